"""A tiny DistributedDataParallel training job for hetpool's examples and integration tests.

It uses what hetpool's launch plan gives it: HETPOOL_DIST_BACKEND (nccl / cncl / xccl / gloo) and
HETPOOL_TORCH_DEVICE (cuda / mlu / xpu / cpu), plus torchrun's RANK, WORLD_SIZE and LOCAL_RANK.
Each rank fits a shared linear target from its own data shard; rank 0 prints the loss averaged
over all ranks at every step, so the logs show training converge.

With --checkpoint PATH rank 0 saves the model and the step there every --checkpoint-every steps
and when it is asked to stop (SIGTERM: a cancel, or a preemption within the job's
preemption_grace), and every rank resumes from it when it exists. Each step's data depends only on
the rank and the step, so a job preempted and resumed ends with the same weights as one that ran
straight through (the last line prints a checksum of them).

With --global-batch N each step's N samples depend only on the step and the ranks split them
evenly, so the averaged gradient, and the weights, do not depend on how many ranks there are: an
elastic job resized between generations (hetpool's HETPOOL_RESIZED=1, a new WORLD_SIZE) ends where
a run of any fixed size ends, up to float rounding.
"""
import argparse
import os
import signal
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--step-sleep", type=float, default=0.0,
                        help="seconds to sleep per step (to keep a job running in tests)")
    parser.add_argument("--checkpoint", default="", help="file to save to and resume from")
    parser.add_argument("--checkpoint-every", type=int, default=10, help="steps between checkpoints")
    parser.add_argument("--global-batch", type=int, default=0,
                        help="samples per step split across the ranks (0: 64 per rank, drawn per rank)")
    args = parser.parse_args()

    stop_requested = []
    if args.checkpoint:  # finish the step, save, then stop: what a preemption grace is for
        signal.signal(signal.SIGTERM, lambda signum, frame: stop_requested.append(signum))

    backend = os.environ.get("HETPOOL_DIST_BACKEND", "gloo")
    device_type = os.environ.get("HETPOOL_TORCH_DEVICE", "cpu")
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cpu") if device_type == "cpu" else torch.device(device_type, local_rank)
    print(f"rank {rank}: WORLD_SIZE={os.environ.get('WORLD_SIZE')} world={world} backend={backend} "
          f"device={device} job={os.environ.get('HETPOOL_JOB_ID')} "
          f"restart={os.environ.get('HETPOOL_RESTART_COUNT')} "
          f"preempted={os.environ.get('HETPOOL_PREEMPTED', '0')} "
          f"resized={os.environ.get('HETPOOL_RESIZED', '0')}", flush=True)
    if args.global_batch and args.global_batch % world:
        raise SystemExit(f"--global-batch {args.global_batch} does not split evenly over {world} ranks")
    if "HETPOOL_TP" in os.environ:  # submitted by model: the planner's layout for this job
        print(f"rank {rank}: layout tp={os.environ['HETPOOL_TP']} pp={os.environ['HETPOOL_PP']} "
              f"dp={os.environ['HETPOOL_DP']} zero={os.environ['HETPOOL_ZERO_STAGE']} "
              f"micro_batch={os.environ['HETPOOL_MICRO_BATCH']}", flush=True)

    torch.manual_seed(0)  # identical initial weights on every rank
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to(device)
    ddp = DDP(model, device_ids=[local_rank] if device_type != "cpu" else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    target = torch.randn(16, 1, generator=torch.Generator().manual_seed(7)).to(device)

    start = 0
    if args.checkpoint and os.path.exists(args.checkpoint):
        saved = torch.load(args.checkpoint, map_location=device)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        start = saved["step"]
        print(f"rank {rank}: resumed from step {start}", flush=True)

    def save(step: int) -> None:
        if rank != 0 or not args.checkpoint:
            return
        partial = args.checkpoint + ".partial"  # a kill mid-write leaves the last good one
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}, partial)
        os.replace(partial, args.checkpoint)
        print(f"checkpoint step {step}", flush=True)

    first = last = None
    for step in range(start, args.steps):
        if args.global_batch:  # the step's samples, this rank's even slice of them
            share = args.global_batch // world
            x = torch.randn(args.global_batch, 16, generator=torch.Generator().manual_seed(step))
            x = x[rank * share:(rank + 1) * share].to(device)
        else:
            data = torch.Generator().manual_seed(1_000_000 * (rank + 1) + step)
            x = torch.randn(64, 16, generator=data).to(device)
        y = x @ target
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        mean /= world
        last = mean.item()
        first = last if first is None else first
        if rank == 0:
            print(f"step {step} loss {last:.6f}", flush=True)
        if stop_requested:
            save(step + 1)
            print(f"rank {rank}: stopping after step {step} (signal {stop_requested[0]})", flush=True)
            raise SystemExit(143)
        if args.checkpoint and (step + 1) % args.checkpoint_every == 0:
            save(step + 1)
        if args.step_sleep:
            time.sleep(args.step_sleep)
    if rank == 0:
        # Also when it resumed with nothing left to do (stopped after its last step was saved).
        if last is not None:
            print(f"final loss {last:.6f} (first {first:.6f})", flush=True)
        checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
        print(f"weights checksum {checksum:.10f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
