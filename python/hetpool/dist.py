"""Process groups for a hetpool job across vendors, from the variables its launch plan sets.

A job whose role groups run on different vendors' cards (NVIDIA beside MetaX beside Cambricon) has
no one collective library that spans them all. hetpool chooses one per job (docs/mixed-vendor.md)
and tells every rank: HETPOOL_COLLECTIVE (gloo, hierarchical, flagcx), HETPOOL_DIST_BACKEND (the
world's backend), HETPOOL_INTRA_BACKEND / HETPOOL_INTER_BACKEND (inside a group / between groups),
HETPOOL_GROUP, HETPOOL_GROUPS, HETPOOL_GROUP_WORLD; and with a global batch, each local rank's
share (HETPOOL_MICRO_BATCHES, by LOCAL_RANK) of HETPOOL_GLOBAL_BATCH, split by each card's speed.

    import hetpool.dist
    layout = hetpool.dist.init()
    start, end = layout.batch_slice()       # this rank's samples of each global batch
    loss = loss_fn(model(x[start:end]), y[start:end])   # a mean over the micro batch
    loss.backward()
    hetpool.dist.average_gradients(model, layout)       # the global batch's mean gradient

Works the same for a one-vendor job (one group, even split) and without hetpool (one process).
Only torch is needed.
"""

import os
from dataclasses import dataclass, field
from typing import List, Optional

import torch
import torch.distributed as dist


@dataclass
class Layout:
    rank: int
    world_size: int
    local_rank: int
    group: str                  # this rank's role group (HETPOOL_GROUP)
    group_rank: int             # its place in the group
    group_world: int            # ranks in the group
    groups: List[str]           # every group, in the job's order
    collective: str             # gloo, hierarchical, flagcx ("" for a one-vendor job)
    micro_batch: int            # this rank's samples per step (0: no global batch given)
    global_batch: int
    micro_batches: List[int] = field(default_factory=list)  # every rank's, by global rank
    intra_group: Optional[object] = None   # process group of this rank's role group
    inter_group: Optional[object] = None   # one rank per group (its group rank 0); None elsewhere
    group_leader: int = 0                  # global rank of this group's rank 0

    @property
    def grad_weight(self) -> float:
        """This rank's share of the global batch: what its mean-loss gradient is weighed by."""
        return self.micro_batch / self.global_batch if self.global_batch else 1.0 / self.world_size

    def batch_slice(self):
        """[start, end) of this rank's samples in a global batch, ranks in global-rank order."""
        start = sum(self.micro_batches[:self.rank])
        return start, start + self.micro_batch


def _micro_batch(local_rank: int) -> int:
    shares = os.environ.get("HETPOOL_MICRO_BATCHES", "")
    if not shares:
        return 0
    values = [int(v) for v in shares.split(",")]
    if local_rank >= len(values):
        raise RuntimeError(f"HETPOOL_MICRO_BATCHES has {len(values)} entries, LOCAL_RANK is {local_rank}")
    return values[local_rank]


def init(timeout=None) -> Layout:
    """Starts torch.distributed with the world's backend and builds the group process groups.

    Every rank must call it (it is collective). Ranks are numbered by torchrun; a rank's group
    membership is exchanged over the world group, so no numbering is assumed.
    """
    backend = os.environ.get("HETPOOL_DIST_BACKEND", "gloo")
    if "flagcx" in backend:
        import flagcx  # noqa: F401  FlagCX's torch plugin registers the "flagcx" backend
    kwargs = {"timeout": timeout} if timeout is not None else {}
    if not dist.is_initialized():
        dist.init_process_group(backend, **kwargs)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    group = os.environ.get("HETPOOL_GROUP", "")
    micro = _micro_batch(local_rank)
    global_batch = int(os.environ.get("HETPOOL_GLOBAL_BATCH", "0"))

    mine = [None] * world
    dist.all_gather_object(mine, (group, micro))
    order = [g for g in os.environ.get("HETPOOL_GROUPS", "").split(",") if g] or [group]
    for g, _ in mine:
        if g not in order:
            order.append(g)
    collective = os.environ.get("HETPOOL_COLLECTIVE", "")
    intra_backend = os.environ.get("HETPOOL_INTRA_BACKEND", backend)
    inter_backend = os.environ.get("HETPOOL_INTER_BACKEND", backend)
    layout = Layout(rank=rank, world_size=world, local_rank=local_rank, group=group, group_rank=0,
                    group_world=0, groups=order, collective=collective, micro_batch=micro,
                    global_batch=global_batch, micro_batches=[m for _, m in mine])
    # new_group is collective over the whole world, in the same order everywhere.
    leaders = []
    for g in order:
        members = [r for r, (name, _) in enumerate(mine) if name == g]
        if not members:
            continue
        handle = dist.new_group(members, backend=intra_backend) if len(order) > 1 else dist.group.WORLD
        leaders.append(members[0])
        if g == group:
            layout.intra_group = handle
            layout.group_rank = members.index(rank)
            layout.group_world = len(members)
            layout.group_leader = members[0]
    if len(order) > 1:
        inter = dist.new_group(leaders, backend=inter_backend)
        layout.inter_group = inter if rank in leaders else None
    else:
        layout.inter_group = dist.group.WORLD if rank == layout.group_leader else None
    os.environ["HETPOOL_GROUP_RANK"] = str(layout.group_rank)
    return layout


def average_gradients(model: torch.nn.Module, layout: Layout) -> None:
    """Replaces each gradient with the global batch's mean gradient.

    Each rank's gradient (of a mean over its micro batch) is weighed by its share of the global
    batch, so uneven micro batches average correctly. Hierarchical: summed inside each group on
    its own library, across groups by one rank per group, then handed back inside the group.
    """
    weight = layout.grad_weight
    for p in model.parameters():
        if p.grad is None:
            continue
        g = p.grad.mul_(weight)
        if layout.collective != "hierarchical" or len(layout.groups) <= 1:
            dist.all_reduce(g)
            continue
        dist.all_reduce(g, group=layout.intra_group)
        if layout.inter_group is not None:
            host = g.cpu() if os.environ.get("HETPOOL_INTER_BACKEND", "gloo") == "gloo" else g
            dist.all_reduce(host, group=layout.inter_group)
            if host is not g:
                g.copy_(host)
        dist.broadcast(g, src=layout.group_leader, group=layout.intra_group)
