#!/usr/bin/python3
"""Trains one small GPT-style model for a few steps on CPU and reports its peak memory.

Run by tests/bench/sizing_validation (which compares the figure with the planner's estimate);
not a test by itself. The model has the shape the planner assumes for every preset: pre-norm
RMSNorm (fused: saves its input and the inverse RMS), multi-head attention without biases,
a SwiGLU MLP, untied embeddings, cross-entropy over the vocabulary.

Peak memory is the process's peak resident set (VmHWM) after the weights, optimizer states and
activations exist, minus the resident set before the model is built. The parent starts us with
MALLOC_MMAP_THRESHOLD_=65536 so every tensor above 64 KiB is its own mapping and is returned to
the kernel when freed; otherwise glibc keeps freed memory and the peak would be the allocator's,
not the training's.
"""
import argparse
import json
import math
import os

import torch
import torch.nn.functional as F
import torch.utils.checkpoint


def rss_bytes(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(field)


class RmsNorm(torch.autograd.Function):
    """Fused RMSNorm: saves the input and 1/rms only, as fused kernels (apex, TE) do."""

    @staticmethod
    def forward(ctx, x, weight, eps):
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, rstd, weight)
        return x * rstd * weight

    @staticmethod
    def backward(ctx, grad):
        x, rstd, weight = ctx.saved_tensors
        xhat = x * rstd
        grad_weight = (grad * xhat).reshape(-1, x.shape[-1]).sum(0)
        g = grad * weight
        grad_x = rstd * (g - xhat * (g * xhat).mean(-1, keepdim=True))
        return grad_x, grad_weight, None


class Norm(torch.nn.Module):
    def __init__(self, h):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(h))

    def forward(self, x):
        return RmsNorm.apply(x, self.weight, 1e-5)


class Block(torch.nn.Module):
    def __init__(self, h, heads, inter, dropout):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.norm1, self.norm2 = Norm(h), Norm(h)
        self.q = torch.nn.Linear(h, h, bias=False)
        self.k = torch.nn.Linear(h, h, bias=False)
        self.v = torch.nn.Linear(h, h, bias=False)
        self.o = torch.nn.Linear(h, h, bias=False)
        self.gate = torch.nn.Linear(h, inter, bias=False)
        self.up = torch.nn.Linear(h, inter, bias=False)
        self.down = torch.nn.Linear(inter, h, bias=False)

    def forward(self, x, mask):
        b, s, h = x.shape
        d = h // self.heads
        y = self.norm1(x)
        q = self.q(y).view(b, s, self.heads, d).transpose(1, 2) * (1.0 / math.sqrt(d))
        k = self.k(y).view(b, s, self.heads, d).transpose(1, 2)
        v = self.v(y).view(b, s, self.heads, d).transpose(1, 2)
        scores = q @ k.transpose(-2, -1)
        scores.masked_fill_(mask, float("-inf"))
        p = torch.softmax(scores, dim=-1)
        if self.dropout:
            p = F.dropout(p, 0.1, True)
        a = (p @ v).transpose(1, 2).reshape(b, s, h)
        a = self.o(a)
        if self.dropout:
            a = F.dropout(a, 0.1, True)
        x = x + a
        y = self.norm2(x)
        m = self.down(F.silu(self.gate(y)) * self.up(y))
        if self.dropout:
            m = F.dropout(m, 0.1, True)
        return x + m


class Gpt(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed = torch.nn.Embedding(c.vocab, c.hidden)
        self.blocks = torch.nn.ModuleList(
            [Block(c.hidden, c.heads, c.intermediate, c.dropout) for _ in range(c.layers)])
        self.norm = Norm(c.hidden)
        self.head = torch.nn.Linear(c.hidden, c.vocab, bias=False)
        self.full_recompute = c.recompute == "full"

    def forward(self, tokens, targets, mask):
        x = self.embed(tokens)
        for block in self.blocks:
            if self.full_recompute:
                x = torch.utils.checkpoint.checkpoint(block, x, mask)
            else:
                x = block(x, mask)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    for name in ("layers", "hidden", "heads", "intermediate", "vocab", "seq", "micro_batch", "steps"):
        ap.add_argument("--" + name.replace("_", "-"), type=int, required=name != "steps", default=3)
    ap.add_argument("--precision", choices=["fp32", "bf16-autocast"], default="fp32")
    ap.add_argument("--recompute", choices=["none", "full"], default="none")
    ap.add_argument("--dropout", action="store_true")
    c = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(os.cpu_count() or 1)

    # Warm up kernels and thread pools on a tiny model, so their one-time buffers are in the
    # baseline and not counted as training memory.
    warm = Gpt(argparse.Namespace(layers=1, hidden=64, heads=2, intermediate=128, vocab=128,
                                  dropout=c.dropout, recompute=c.recompute))
    wmask = torch.triu(torch.ones(8, 8, dtype=torch.bool), 1)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=c.precision == "bf16-autocast"):
        loss = warm(torch.zeros(1, 8, dtype=torch.long), torch.zeros(1, 8, dtype=torch.long), wmask)
    loss.backward()
    torch.optim.AdamW(warm.parameters()).step()
    del warm, loss

    mask = torch.triu(torch.ones(c.seq, c.seq, dtype=torch.bool), 1)
    tokens = torch.randint(0, c.vocab, (c.micro_batch, c.seq))
    targets = torch.randint(0, c.vocab, (c.micro_batch, c.seq))
    baseline = rss_bytes("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current resident set

    model = Gpt(c)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    params = sum(p.numel() for p in model.parameters())
    for _ in range(c.steps):
        # Gradients stay allocated between steps, as DDP's buckets keep them.
        opt.zero_grad(set_to_none=False)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=c.precision == "bf16-autocast"):
            loss = model(tokens, targets, mask)
        loss.backward()
        opt.step()
    peak = rss_bytes("VmHWM") - baseline
    print(json.dumps({"params": params, "peak_bytes": peak, "loss": float(loss)}))


if __name__ == "__main__":
    main()
