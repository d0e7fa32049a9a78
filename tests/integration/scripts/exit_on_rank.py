# A training script nobody on the project would write: rank FAIL_RANK says why on stderr and exits
# with FAIL_CODE; the other ranks wait a little so that its failure is the first torchrun sees.
import os
import sys
import time

rank = int(os.environ["RANK"])
fail_rank, fail_code = int(sys.argv[1]), int(sys.argv[2])
print(f"rank {rank} loaded its shard", flush=True)
if rank == fail_rank:
    print("giving up: out of data on this shard", file=sys.stderr, flush=True)
    sys.exit(fail_code)
time.sleep(3)
