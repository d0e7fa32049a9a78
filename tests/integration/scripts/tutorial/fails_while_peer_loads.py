# A torchrun script in the tutorials' shape (cuda and nccl hard-coded) for two nodes: rank 0 fails
# at once; the other rank is still loading its data (here: sleeping) and would only then enter the
# collective that fails. Rank 0's torchrun meanwhile waits at its exit barrier for the other
# node's torchrun, holding its cards (PyTorch 1.13: up to 300 s). Issue 62: the job ends within 30 s.
import os
import sys
import time

import torch
import torch.distributed as dist

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
if dist.get_rank() == 0:
    print("rank 0: the dataset index is corrupt", file=sys.stderr, flush=True)
    sys.exit(3)
time.sleep(600)  # loading a large shard
dist.all_reduce(torch.ones(1).to(local_rank))
