"""A small client over hetpoold's gRPC API, with the CLI's environment and defaults.

Like hetpoolctl it fills a job's `user` (on a daemon without authentication) and its
`working_dir` (the current directory) when a job file leaves them out, and it talks TLS unless
told `insecure`. Every refused call raises the typed error of its status code (errors.py).
"""

import getpass
import json
import os

import grpc
from google.protobuf import json_format

from hetpool import errors
from hetpool.v1 import job_pb2, job_pb2_grpc, planner_pb2, planner_pb2_grpc

TERMINAL = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")


def _call(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except grpc.RpcError as e:
        raise errors.from_rpc_error(e) from None



def _expand_elastic_nnodes(spec):
    """A job file's `"nnodes": {"min": 2, "max": 8}` is JobSpec's nnodes=2 plus elastic_nnodes (as hetpoolctl reads it)."""
    nnodes = spec.get("nnodes") if isinstance(spec, dict) else None
    if not isinstance(nnodes, dict):
        return spec
    if set(nnodes) != {"min", "max"} or not all(isinstance(v, int) for v in nnodes.values()):
        raise errors.InvalidArgument('INVALID_ARGUMENT: nnodes: an elastic job writes {"min": N, "max": M} (integers)')
    if "elastic_nnodes" in spec or "elasticNnodes" in spec:
        raise errors.InvalidArgument("INVALID_ARGUMENT: nnodes: {min, max} and elastic_nnodes both given; write one")
    return dict(spec, nnodes=nnodes["min"], elastic_nnodes=dict(nnodes))

class Job:
    """A job on the pool: `id`, `state` ("JOB_STATE_RUNNING", ...) and the whole `proto` (hetpool.v1.Job)."""

    def __init__(self, client, proto):
        self._client = client
        self.proto = proto

    @property
    def id(self):
        return self.proto.id

    @property
    def state(self):
        return job_pb2.JobState.Name(self.proto.state)

    def refresh(self):
        self.proto = self._client.get(self.id).proto
        return self

    def watch(self, timeout=None):
        """The job's events (hetpool.v1.JobEvent), every one from the first, until it ends."""
        printed = 0
        stream = self._client._jobs.WatchJob(job_pb2.WatchJobRequest(job_id=self.id), timeout=timeout,
                                             metadata=self._client._metadata)
        try:
            for update in stream:
                self.proto = update.job
                events = update.job.events
                for event in events[printed:]:
                    yield event
                printed = len(events)
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from None

    def wait(self, timeout=None, check=True):
        """Blocks until the job ends (or `timeout` seconds pass: DeadlineExceeded). With `check`, a
        job that did not succeed raises JobFailed (whose doing, which rank, its exit code)."""
        if self.state not in TERMINAL:
            for _ in self.watch(timeout=timeout):
                pass
        if check and self.state != "JOB_STATE_SUCCEEDED":
            raise errors.JobFailed(self)
        return self

    def logs(self, follow=False, rank=None, node=None, raw=False):
        """The job's output as text chunks; `rank`: one global rank's lines; `follow`: until it ends."""
        request = job_pb2.GetJobLogsRequest(job_id=self.id, follow=follow, raw=raw, node=node or "")
        if rank is not None:
            request.rank = rank
        stream = self._client._jobs.GetJobLogs(request, timeout=None if follow else self._client.timeout,
                                               metadata=self._client._metadata)
        try:
            for chunk in stream:
                yield chunk.data.decode("utf-8", errors="replace")
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from None

    def cancel(self, reason=""):
        self.proto = self._client.cancel(self.id, reason).proto
        return self

    def __repr__(self):
        return f"Job({self.id!r}, {self.state})"


class Client:
    """Connects to hetpoold. `server` may list replicas comma-separated (the first is used here)."""

    def __init__(self, server="127.0.0.1:7070", tls_ca=None, token=None, insecure=False, timeout=30.0):
        self.server = server.split(",")[0]
        self.timeout = timeout
        self.token = token
        if insecure:
            channel = grpc.insecure_channel(self.server)
        else:
            root = None
            if tls_ca:
                with open(tls_ca, "rb") as f:
                    root = f.read()
            channel = grpc.secure_channel(self.server, grpc.ssl_channel_credentials(root_certificates=root))
        self._channel = channel
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._jobs = job_pb2_grpc.JobServiceStub(channel)
        self._planner = planner_pb2_grpc.PlannerServiceStub(channel)
        self._insecure = insecure

    @classmethod
    def from_env(cls, **overrides):
        """The CLI's environment: HETPOOL_SERVER, HETPOOL_TLS_CA, HETPOOL_TOKEN, HETPOOL_INSECURE=1."""
        settings = {
            "server": os.environ.get("HETPOOL_SERVER") or "127.0.0.1:7070",
            "tls_ca": os.environ.get("HETPOOL_TLS_CA") or None,
            "token": os.environ.get("HETPOOL_TOKEN") or None,
            "insecure": os.environ.get("HETPOOL_INSECURE") == "1",
        }
        settings.update(overrides)
        return cls(**settings)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _spec(self, spec):
        if isinstance(spec, job_pb2.JobSpec):
            message = job_pb2.JobSpec()
            message.CopyFrom(spec)
        else:
            if isinstance(spec, (str, os.PathLike)):
                with open(spec) as f:
                    spec = json.load(f)
            spec = _expand_elastic_nnodes(spec)
            try:
                message = json_format.ParseDict(spec, job_pb2.JobSpec())  # unknown fields are errors
            except json_format.ParseError as e:
                raise errors.InvalidArgument(f"INVALID_ARGUMENT: job spec: {e}") from None
        if not message.user and not self.token:
            message.user = getpass.getuser()  # nobody else can say on a daemon without tokens
        if not message.working_dir:
            message.working_dir = os.getcwd()
        return message

    def submit(self, spec, request_id=""):
        """Submits a job file path, a dict (protobuf JSON of hetpool.v1.JobSpec) or a JobSpec."""
        request = job_pb2.SubmitJobRequest(spec=self._spec(spec), request_id=request_id)
        response = _call(self._jobs.SubmitJob, request, timeout=self.timeout, metadata=self._metadata)
        return Job(self, response.job)

    def get(self, job_id):
        return Job(self, _call(self._jobs.GetJob, job_pb2.GetJobRequest(job_id=job_id), timeout=self.timeout,
                               metadata=self._metadata))

    def list(self, states=(), user="", labels=None):
        """Every matching job (all pages), oldest first. `states`: names like "running" or "JOB_STATE_FAILED"."""
        request = job_pb2.ListJobsRequest(user=user, labels=labels or {})
        for s in states:
            name = s.upper() if s.upper().startswith("JOB_STATE_") else "JOB_STATE_" + s.upper()
            request.states.append(job_pb2.JobState.Value(name))
        jobs = []
        while True:
            page = _call(self._jobs.ListJobs, request, timeout=self.timeout, metadata=self._metadata)
            jobs.extend(Job(self, j) for j in page.jobs)
            if not page.next_page_token:
                return jobs
            request.page_token = page.next_page_token

    def cancel(self, job_id, reason=""):
        return Job(self, _call(self._jobs.CancelJob, job_pb2.CancelJobRequest(job_id=job_id, reason=reason),
                               timeout=self.timeout, metadata=self._metadata))

    def plan(self, model, objective="", cards=0, **workload):
        """Plans per class of cards for a preset `model` (or {"config_json": ...}); `workload` takes
        hetpool.v1.Workload's fields (mode="train", precision="bf16", seq=4096, tokens=2e9, ...)."""
        ref = planner_pb2.ModelRef(preset=model) if isinstance(model, str) else planner_pb2.ModelRef(**model)
        request = planner_pb2.PlanRequest(model=ref, workload=planner_pb2.Workload(**workload), objective=objective,
                                          cards=cards)
        return _call(self._planner.Plan, request, timeout=self.timeout, metadata=self._metadata)
