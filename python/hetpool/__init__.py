"""hetpool: submit and follow jobs on a hetpool GPU pool from Python (see python/README.md).

`hetpool.dist` (process groups for a job across vendors) runs inside jobs, where only torch is
installed: the client's names below load gRPC on first use, not on `import hetpool`.
"""

import importlib

_CLIENT = ("Client", "Job")
_ERRORS = ("HetpoolError", "InvalidArgument", "NotFound", "AlreadyExists", "PermissionDenied", "Unauthenticated",
           "ResourceExhausted", "FailedPrecondition", "Unavailable", "DeadlineExceeded", "JobFailed")

__all__ = list(_CLIENT + _ERRORS)


def __getattr__(name):
    if name in _CLIENT:
        return getattr(importlib.import_module("hetpool.client"), name)
    if name in _ERRORS:
        return getattr(importlib.import_module("hetpool.errors"), name)
    raise AttributeError(f"module 'hetpool' has no attribute '{name}'")
