# A torchrun script in the tutorials' shape (cuda and nccl hard-coded) whose rank 0 cannot open the
# snapshot it resumes from and fails first; rank 1 is already in a collective and fails there in
# turn (gloo: "Connection closed by peer"), or is stopped by torchrun. A report must quote rank 0's
# own error line, not rank 1's (issue 62). Usage: torchrun ... resume_or_fail.py SNAPSHOT
import os
import sys

import torch
import torch.distributed as dist


def load_snapshot(path):
    if not os.access(path, os.R_OK):
        raise RuntimeError(f"File {path} cannot be opened")
    return torch.load(path, map_location=f"cuda:{os.environ['LOCAL_RANK']}")


def main(snapshot_path):
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group(backend="nccl")
    if dist.get_rank() == 0:
        load_snapshot(snapshot_path)
    weights = torch.ones(4).to(local_rank)
    dist.all_reduce(weights)
    print(f"rank {dist.get_rank()}: {weights.tolist()}")


if __name__ == "__main__":
    main(sys.argv[1])
