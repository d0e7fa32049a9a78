"""A small client over hetpoold's gRPC API, with the CLI's environment and defaults.

Like hetpoolctl it fills a job's `user` (on a daemon without authentication) and its
`working_dir` (the current directory) when a job file leaves them out, and it talks TLS unless
told `insecure`. Every refused call raises the typed error of its status code (errors.py).
"""

import getpass
import json
import os
import time

import grpc
from google.protobuf import json_format

from hetpool import errors
from hetpool.v1 import cluster_pb2, cluster_pb2_grpc, job_pb2, job_pb2_grpc, planner_pb2, planner_pb2_grpc

TERMINAL = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")

# How long a stream (watch, wait, logs with follow) keeps asking again through a failover, as
# hetpoolctl does; and what replicas on etcd say of who leads (src/common/leader_words.h).
FAILOVER_PATIENCE = 60.0
_FORWARDED = "x-hetpool-forwarded"
_NOT_THE_LEADER = "not the leader; "
_LEADER_IS_AT = "not the leader; the leader is at "


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
        """The job's events (hetpool.v1.JobEvent), every one from the first, until it ends. Rides
        through a failover: each new stream starts with the whole job, and what was yielded is not
        yielded again."""
        printed = 0
        deadline = None if timeout is None else time.monotonic() + timeout
        retry = _Retry(self._client)
        while True:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.001)
            stream = self._client._jobs.WatchJob(job_pb2.WatchJobRequest(job_id=self.id), timeout=left,
                                                 metadata=self._client._metadata)
            try:
                for update in stream:
                    retry.answered()
                    self.proto = update.job
                    events = update.job.events
                    for event in events[printed:]:
                        yield event
                    printed = len(events)
                return
            except grpc.RpcError as e:
                if (deadline is not None and time.monotonic() >= deadline) or not retry.again(e):
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
        """The job's output as text chunks; `rank`: one global rank's lines; `follow`: until it ends
        (through a failover too: each node's output starts over, and what was yielded is skipped)."""
        request = job_pb2.GetJobLogsRequest(job_id=self.id, follow=follow, raw=raw, node=node or "")
        if rank is not None:
            request.rank = rank
        shown = {}
        retry = _Retry(self._client)
        while True:
            seen = {}
            stream = self._client._jobs.GetJobLogs(request, timeout=None if follow else self._client.timeout,
                                                   metadata=self._client._metadata)
            try:
                for chunk in stream:
                    retry.answered()
                    at = seen.get(chunk.node, 0)
                    done = shown.get(chunk.node, 0)
                    seen[chunk.node] = at + len(chunk.data)
                    data = chunk.data[max(done - at, 0):]
                    if not data:
                        continue
                    shown[chunk.node] = done + len(data)
                    yield data.decode("utf-8", errors="replace")
                return
            except grpc.RpcError as e:
                if not follow or not retry.again(e):
                    raise errors.from_rpc_error(e) from None

    def cancel(self, reason=""):
        self.proto = self._client.cancel(self.id, reason).proto
        return self

    def __repr__(self):
        return f"Job({self.id!r}, {self.state})"


class _Retry:
    """Whether a stream that failed should be opened again: UNAVAILABLE from a replica naming
    another (it is not the leader), or after the stream had answered (a failover, a restart), for
    at most FAILOVER_PATIENCE seconds of such failures in a row. A daemon never reached is
    reported at once. Reconnects the client (to the leader named, first) before saying yes."""

    def __init__(self, client):
        self._client = client
        self._had_answers = False
        self._since = None

    def answered(self):
        self._had_answers = True
        self._since = None

    def again(self, error):
        if error.code() != grpc.StatusCode.UNAVAILABLE:
            return False
        details = error.details() or ""
        if not (self._had_answers or details.startswith(_NOT_THE_LEADER)):
            return False
        now = time.monotonic()
        if self._since is None:
            self._since = now
        if now - self._since > FAILOVER_PATIENCE:
            return False
        time.sleep(0.5)
        hint = details[len(_LEADER_IS_AT):] if details.startswith(_LEADER_IS_AT) else None
        self._client._reconnect(hint)
        return True


class Client:
    """Connects to hetpoold. `server` may list replicas comma-separated: the client goes to the
    one that leads (followers pass unary calls on, but streams only the leader serves)."""

    def __init__(self, server="127.0.0.1:7070", tls_ca=None, token=None, insecure=False, timeout=30.0):
        self.servers = [s.strip() for s in server.split(",") if s.strip()] or ["127.0.0.1:7070"]
        self.timeout = timeout
        self.token = token
        self._insecure = insecure
        self._root = None
        if not insecure and tls_ca:
            with open(tls_ca, "rb") as f:
                self._root = f.read()
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._channel = None
        self._connect(self._pick_leader(self.servers))

    def _channel_to(self, server):
        if self._insecure:
            return grpc.insecure_channel(server)
        return grpc.secure_channel(server, grpc.ssl_channel_credentials(root_certificates=self._root))

    def _connect(self, server):
        if self._channel is not None:
            self._channel.close()
        self.server = server
        self._channel = self._channel_to(server)
        self._jobs = job_pb2_grpc.JobServiceStub(self._channel)
        self._planner = planner_pb2_grpc.PlannerServiceStub(self._channel)

    def _reconnect(self, leader=None):
        self._connect(self._pick_leader(([leader] if leader else []) + self.servers))

    def _pick_leader(self, servers):
        """Asks each replica as a follower would (so that it answers for itself); one that names
        the leader sends the next question there. With no leader found, the first replica that
        answered at all (it passes unary calls on once one is elected), else the first."""
        if len(servers) == 1:
            return servers[0]
        queue, asked, answered = list(servers), set(), None
        i = 0
        while i < len(queue):
            server = queue[i]
            i += 1
            if server in asked:
                continue
            asked.add(server)
            channel = self._channel_to(server)
            try:
                cluster_pb2_grpc.ClusterServiceStub(channel).ListFingerprints(
                    cluster_pb2.ListFingerprintsRequest(), timeout=2, metadata=self._metadata + ((_FORWARDED, "1"),))
                return server
            except grpc.RpcError as e:
                if e.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    return server  # refused for another reason (a viewer's token): it leads
                details = e.details() or ""
                if details.startswith(_LEADER_IS_AT):
                    answered = answered or server
                    leader = details[len(_LEADER_IS_AT):]
                    if leader not in asked:
                        queue.insert(i, leader)
                elif details.startswith(_NOT_THE_LEADER):
                    answered = answered or server
            finally:
                channel.close()
        return answered or servers[0]

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
