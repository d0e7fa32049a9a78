"""hetpool: submit and follow jobs on a hetpool GPU pool from Python (see python/README.md)."""

from hetpool.client import Client, Job
from hetpool.errors import (AlreadyExists, DeadlineExceeded, FailedPrecondition, HetpoolError, InvalidArgument,
                            JobFailed, NotFound, PermissionDenied, ResourceExhausted, Unauthenticated, Unavailable)

__all__ = ["Client", "Job", "HetpoolError", "InvalidArgument", "NotFound", "AlreadyExists", "PermissionDenied",
           "Unauthenticated", "ResourceExhausted", "FailedPrecondition", "Unavailable", "DeadlineExceeded", "JobFailed"]
