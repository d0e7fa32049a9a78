"""A data-parallel job across vendors for hetpool's examples and integration tests.

Every rank learns one shared linear model; each step's global batch is the same whatever the
placement (drawn from the step number), and each rank takes its share of it: the micro batch
hetpool gave it (HETPOOL_MICRO_BATCHES, split by each card's speed, so a fast card gets more
samples than a slow one). hetpool.dist builds the groups (the vendor's library inside each, the
job's collective between them) and averages the gradients weighed by each rank's share.

Rank 0 then trains the same model in one process on the whole batch, and compares: with the
weighting right, the losses and weights agree to float rounding. The job fails when they differ by
more than --tolerance (1e-5), so a wrong split or weighting cannot pass unnoticed.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import hetpool.dist  # noqa: E402  (the repository's Python package; a wheel install works too)

FEATURES = 8


def global_batch(step: int, size: int):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(size, FEATURES, generator=g, dtype=torch.float64)
    w = torch.arange(1, FEATURES + 1, dtype=torch.float64).unsqueeze(1) / FEATURES
    y = x @ w + 0.5 + 0.01 * torch.randn(size, 1, generator=g, dtype=torch.float64)
    return x, y


def fresh_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Linear(FEATURES, 1).double()


def train(model, steps, size, lr, step_fn):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loss = None
    for step in range(steps):
        x, y = global_batch(step, size)
        opt.zero_grad()
        loss = step_fn(model, x, y)
        opt.step()
    return loss


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--global-batch", type=int, default=0,
                        help="used only when hetpool gave none (HETPOOL_GLOBAL_BATCH): split evenly")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    args = parser.parse_args()

    layout = hetpool.dist.init()
    if layout.global_batch == 0:  # no split from hetpool: an even one
        size = args.global_batch or 12 * layout.world_size
        base, extra = divmod(size, layout.world_size)
        layout.micro_batches = [base + (1 if r < extra else 0) for r in range(layout.world_size)]
        layout.micro_batch, layout.global_batch = layout.micro_batches[layout.rank], size
    print(f"rank {layout.rank}: group={layout.group or '-'} group_rank={layout.group_rank}/{layout.group_world} "
          f"vendor={os.environ.get('HETPOOL_VENDOR', 'cpu')} collective={layout.collective or '-'} "
          f"intra={os.environ.get('HETPOOL_INTRA_BACKEND', '-')} inter={os.environ.get('HETPOOL_INTER_BACKEND', '-')} "
          f"micro_batch={layout.micro_batch}/{layout.global_batch}", flush=True)
    start, end = layout.batch_slice()
    loss_fn = torch.nn.MSELoss()

    def distributed_step(model, x, y):
        loss = loss_fn(model(x[start:end]), y[start:end])
        loss.backward()
        hetpool.dist.average_gradients(model, layout)
        return loss

    model = fresh_model()
    train(model, args.steps, layout.global_batch, args.lr, distributed_step)
    x, y = global_batch(args.steps, layout.global_batch)
    with torch.no_grad():
        final = loss_fn(model(x), y).item()
    if layout.rank == 0:
        def whole_batch_step(ref, x, y):
            loss = loss_fn(ref(x), y)
            loss.backward()
            return loss

        reference = fresh_model()
        train(reference, args.steps, layout.global_batch, args.lr, whole_batch_step)
        with torch.no_grad():
            ref_final = loss_fn(reference(x), y).item()
        weight_diff = max((a - b).abs().max().item() for a, b in zip(model.parameters(), reference.parameters()))
        print(f"micro batches by rank: {layout.micro_batches}", flush=True)
        print(f"final loss {final:.10f} reference {ref_final:.10f} loss diff {abs(final - ref_final):.3e} "
              f"max weight diff {weight_diff:.3e}", flush=True)
        if abs(final - ref_final) > args.tolerance or weight_diff > args.tolerance:
            print("MISMATCH: the split or the gradient weighting is wrong", flush=True)
            sys.exit(1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
