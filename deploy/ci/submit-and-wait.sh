#!/usr/bin/env bash
# One CI step: submit a training job, stream its logs, and end with the job's own exit code
# (hetpoolctl wait --job-exit-code: 3/4/5 for failures without one, docs in the README), leaving
# a JUnit report for the CI system to show.
#   deploy/ci/submit-and-wait.sh JOB_FILE [TIMEOUT]
# Environment: HETPOOL_SERVER, HETPOOL_TLS_CA, HETPOOL_TOKEN (as for hetpoolctl);
# HETPOOL_REQUEST_ID: a retried step with the same id finds its first job instead of submitting
# another; HETPOOL_JUNIT: the report's path (default hetpool-report.xml).
set -euo pipefail
job_file=${1:?usage: submit-and-wait.sh JOB_FILE [TIMEOUT]}
timeout=${2:-2h}
id=$(hetpoolctl submit -f "$job_file" --request-id "${HETPOOL_REQUEST_ID:-}")
echo "hetpool job $id"
# The logs are for people; whether the step passes is wait's to say, so a broken stream does not.
hetpoolctl logs "$id" -f || echo "(log stream ended early; waiting for the job)"
exec hetpoolctl wait "$id" --timeout "$timeout" --job-exit-code --junit "${HETPOOL_JUNIT:-hetpool-report.xml}"
