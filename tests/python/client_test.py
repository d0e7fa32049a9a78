"""The Python client against a live hetpoold (started by tests/integration/python_client_test.cc,
over TLS with a user's token): submit, wait, logs, cancel, list, plan and the typed errors.
Environment: HETPOOL_SERVER, HETPOOL_TLS_CA, HETPOOL_TOKEN, HETPOOL_SOURCE_DIR."""

import contextlib
import io
import os
import sys
import unittest

import hetpool

SOURCE = os.environ["HETPOOL_SOURCE_DIR"]


def cpu_job(script, *args, procs=2):
    return {"python": {"script": script, "args": list(args)}, "working_dir": SOURCE, "nnodes": 1,
            "devices_per_node": 0, "procs_per_node": procs, "requirements": {"vendors": ["cpu"]}}


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = hetpool.Client.from_env()

    def test_a_job_runs_and_its_logs_say_which_rank(self):
        job = self.client.submit(cpu_job("deploy/examples/train_ddp.py", "--steps", "3"), request_id="py-train")
        self.assertTrue(job.id.startswith("job-"))
        job.wait(timeout=120)
        self.assertEqual(job.state, "JOB_STATE_SUCCEEDED")
        text = "".join(job.logs())
        self.assertIn("final loss", text)
        rank1 = "".join(job.logs(rank=1))
        # The whole log in the message: a rank's lines missing once (under a loaded ctest run)
        # could not be told from a filter's mistake without it.
        self.assertIn("r1] rank 1: WORLD_SIZE=2", rank1, msg="the job's whole log:\n" + text)
        self.assertNotIn("rank 0:", rank1)
        # A retry with the same request id is the same job.
        again = self.client.submit(cpu_job("deploy/examples/train_ddp.py", "--steps", "3"), request_id="py-train")
        self.assertEqual(again.id, job.id)
        self.assertIn(job.id, [j.id for j in self.client.list(states=["succeeded"])])

    def test_a_failing_rank_raises_with_its_own_exit_code(self):
        job = self.client.submit(cpu_job("tests/integration/scripts/exit_on_rank.py", "1", "7"))
        with self.assertRaises(hetpool.JobFailed) as failed:
            job.wait(timeout=120)
        self.assertEqual(failed.exception.origin, "job")
        self.assertEqual(failed.exception.exit_code, 7)
        self.assertEqual(failed.exception.rank_failure.global_rank, 1)
        self.assertIn("giving up: out of data on this shard", list(failed.exception.rank_failure.last_lines))
        events = [e.reason for e in job.watch(timeout=30)]
        self.assertEqual(events[0], "Submitted")
        self.assertEqual(events[-1], "NonZeroExit")

    def test_the_failure_quotes_the_rank_that_failed_first(self):
        # Rank 0 fails first; rank 1 then fails in its collective: rank 0's own line is the one quoted.
        job = self.client.submit(cpu_job("tests/integration/scripts/tutorial/resume_or_fail.py", "no-such-snapshot.pt"))
        with self.assertRaises(hetpool.JobFailed) as failed:
            job.wait(timeout=120)
        self.assertEqual(failed.exception.rank_failure.global_rank, 0)
        self.assertEqual(failed.exception.rank_failure.last_lines[-1],
                         "RuntimeError: File no-such-snapshot.pt cannot be opened")
        self.assertIn("File no-such-snapshot.pt cannot be opened", str(failed.exception))

    def test_an_elastic_nnodes_range_is_read_and_judged_by_the_daemon(self):
        spec = cpu_job("deploy/examples/train_ddp.py", "--steps", "3")
        spec["nnodes"] = {"min": 1, "max": 2}
        with self.assertRaises(hetpool.InvalidArgument) as refused:  # read as elastic_nnodes, refused there
            self.client.submit(spec)
        self.assertIn("elastic_nnodes: an elastic job grows and shrinks by cards", str(refused.exception))
        spec["nnodes"] = {"min": 1}
        with self.assertRaises(hetpool.InvalidArgument) as unreadable:
            self.client.submit(spec)
        self.assertIn('an elastic job writes {"min": N, "max": M}', str(unreadable.exception))

    def test_cancel(self):
        job = self.client.submit({"command": ["/bin/sleep", "60"], "working_dir": "/tmp", "nnodes": 1,
                                  "devices_per_node": 0, "procs_per_node": 1, "requirements": {"vendors": ["cpu"]}})
        job.cancel("not needed")
        with self.assertRaises(hetpool.JobFailed) as cancelled:
            job.wait(timeout=60)
        self.assertEqual(cancelled.exception.job.state, "JOB_STATE_CANCELLED")
        self.assertIsNone(cancelled.exception.exit_code)

    def test_a_list_of_servers_goes_to_the_one_that_answers(self):
        client = hetpool.Client.from_env(server="127.0.0.1:1," + os.environ["HETPOOL_SERVER"])
        self.assertEqual(client.server, os.environ["HETPOOL_SERVER"])
        job = client.submit({"command": ["/bin/echo", "listed"], "working_dir": "/tmp", "nnodes": 1,
                             "devices_per_node": 0, "procs_per_node": 1, "requirements": {"vendors": ["cpu"]}})
        job.wait(timeout=60)
        self.assertIn("listed", "".join(job.logs()))

    def test_errors_are_typed_and_say_what_is_wrong(self):
        with self.assertRaises(hetpool.NotFound):
            self.client.get("job-999999")
        with self.assertRaises(hetpool.InvalidArgument) as bad:
            self.client.submit({"command": ["/bin/true"], "nnodes": 0, "working_dir": "/tmp"})
        self.assertIn("nnodes", bad.exception.message)
        with self.assertRaises(hetpool.InvalidArgument) as typo:  # an unknown field is an error, not dropped
            self.client.submit({"comand": ["/bin/true"]})
        self.assertIn('no field named "comand"', typo.exception.message)
        stranger = hetpool.Client.from_env(token="hp_not-a-token")
        with self.assertRaises(hetpool.Unauthenticated):
            stranger.get("job-000001")
        with self.assertRaises(hetpool.FailedPrecondition) as done:
            self.client.cancel(self.client.list(states=["succeeded"])[0].id)
        self.assertIn("already ended", done.exception.message)

    def test_the_readme_example_runs_as_written(self):
        with open(os.path.join(SOURCE, "README.md")) as f:
            readme = f.read()
        section = readme.split("## From Python and from CI", 1)[1]
        example = section.split("```python\n", 1)[1].split("```", 1)[0]
        here = os.getcwd()
        os.chdir(SOURCE)  # the example's job file path is relative to the repository
        try:
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                exec(compile(example, "README.md", "exec"), {})
        finally:
            os.chdir(here)
        self.assertIn("final loss", printed.getvalue())

    def test_plan(self):
        answer = self.client.plan("llama-2-7b", mode="infer", precision="bf16", batch=8)
        self.assertTrue(any(p.feasible for p in answer.plans))
        self.assertTrue(answer.ranked_by)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
