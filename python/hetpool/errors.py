"""Typed errors: one class per gRPC status code, each carrying the daemon's message (which names
the field, the quota or the node that is the problem)."""

import grpc


class HetpoolError(Exception):
    """A call hetpoold refused or could not answer. `code` is the grpc.StatusCode."""

    code = grpc.StatusCode.UNKNOWN

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class InvalidArgument(HetpoolError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(HetpoolError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(HetpoolError):
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(HetpoolError):
    code = grpc.StatusCode.PERMISSION_DENIED


class Unauthenticated(HetpoolError):
    code = grpc.StatusCode.UNAUTHENTICATED


class ResourceExhausted(HetpoolError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(HetpoolError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Unavailable(HetpoolError):
    code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceeded(HetpoolError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


_BY_CODE = {cls.code: cls for cls in (InvalidArgument, NotFound, AlreadyExists, PermissionDenied, Unauthenticated,
                                      ResourceExhausted, FailedPrecondition, Unavailable, DeadlineExceeded)}


def from_rpc_error(error):
    """The typed error for a grpc.RpcError."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else str(error)
    cls = _BY_CODE.get(code, HetpoolError)
    return cls(f"{code.name}: {details}", code)


class JobFailed(Exception):
    """Job.wait() saw the job end FAILED or CANCELLED. `job` is its last state; `origin` says whose
    doing a failure was ("job" or "infrastructure"), `rank_failure` which rank failed and how."""

    def __init__(self, job):
        self.job = job
        proto = job.proto
        self.origin = {1: "job", 2: "infrastructure"}.get(proto.failure_origin, "")
        self.rank_failure = proto.failure if proto.HasField("failure") else None
        super().__init__(f"{job.id} {job.state}: {proto.reason}: {proto.message}")

    @property
    def exit_code(self):
        """The failing rank's own exit code (128 + N for signal N), or None when unknown."""
        f = self.rank_failure
        if f is None or f.launch_failure or f.global_rank < 0:
            return None
        if f.signal:
            import signal
            try:
                return 128 + int(getattr(signal, f.signal))
            except (AttributeError, ValueError):
                return None
        return f.exit_code or None
