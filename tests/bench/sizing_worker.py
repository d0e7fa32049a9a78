#!/usr/bin/python3
"""Trains or serves one small transformer on CPU and reports its peak memory.

Run by tests/bench/sizing_validation (which compares the figure with the planner's estimate);
not a test by itself. Three families, as their Hugging Face modeling code lays them out:
  llama: pre-norm RMSNorm (fused: saves its input and the inverse RMS), multi-head attention
         without biases, a SwiGLU MLP, rotary positions (no parameters), untied embeddings;
  gpt2:  LayerNorm, attention and a GELU MLP with biases, learned positions, tied embeddings;
  moe:   the llama block with a Mixtral-style sparse MLP: a router, `experts` SwiGLU experts run
         one after another on the tokens routed to them (top `experts_per_token`).
Training: a few AdamW steps with cross-entropy over the vocabulary. Inference (--mode infer):
under torch.no_grad, a KV cache for batch x context allocated up front (as servers do), the
prompt prefilled in one pass with eager attention, then decode steps, the last attending over
the whole context; only the last token's logits are computed, in fp32.

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
    def __init__(self, h, **kw):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(h, **kw))

    def forward(self, x):
        return RmsNorm.apply(x, self.weight, 1e-5)


class SwiGlu(torch.nn.Module):
    def __init__(self, h, inter, **kw):
        super().__init__()
        self.gate = torch.nn.Linear(h, inter, bias=False, **kw)
        self.up = torch.nn.Linear(h, inter, bias=False, **kw)
        self.down = torch.nn.Linear(inter, h, bias=False, **kw)

    def forward(self, y):
        return self.down(F.silu(self.gate(y)) * self.up(y))


class GeluMlp(torch.nn.Module):
    def __init__(self, h, inter, **kw):
        super().__init__()
        self.fc = torch.nn.Linear(h, inter, bias=True, **kw)
        self.proj = torch.nn.Linear(inter, h, bias=True, **kw)

    def forward(self, y):
        return self.proj(F.gelu(self.fc(y)))


class SparseMoe(torch.nn.Module):
    """Mixtral's sparse block: softmax router, top-k, experts one after another (HF's loop)."""

    def __init__(self, h, inter, experts, top_k, **kw):
        super().__init__()
        self.top_k = top_k
        self.router = torch.nn.Linear(h, experts, bias=False, **kw)
        self.experts = torch.nn.ModuleList([SwiGlu(h, inter, **kw) for _ in range(experts)])

    def forward(self, y):
        shape = y.shape
        y = y.reshape(-1, shape[-1])
        probs = torch.softmax(self.router(y).float(), dim=-1)
        weights, chosen = torch.topk(probs, self.top_k, dim=-1)
        weights = (weights / weights.sum(-1, keepdim=True)).to(y.dtype)
        out = torch.zeros_like(y)
        for e, expert in enumerate(self.experts):
            rows, slot = torch.where(chosen == e)
            if rows.numel() == 0:
                continue
            out.index_add_(0, rows, expert(y[rows]) * weights[rows, slot, None])
        return out.view(shape)


class Block(torch.nn.Module):
    def __init__(self, c, **kw):
        super().__init__()
        h = c.hidden
        self.heads, self.dropout = c.heads, c.dropout
        gpt2 = c.family == "gpt2"
        self.norm1 = torch.nn.LayerNorm(h, **kw) if gpt2 else Norm(h, **kw)
        self.norm2 = torch.nn.LayerNorm(h, **kw) if gpt2 else Norm(h, **kw)
        self.q = torch.nn.Linear(h, h, bias=gpt2, **kw)
        self.k = torch.nn.Linear(h, h, bias=gpt2, **kw)
        self.v = torch.nn.Linear(h, h, bias=gpt2, **kw)
        self.o = torch.nn.Linear(h, h, bias=gpt2, **kw)
        if c.family == "moe":
            self.mlp = SparseMoe(h, c.intermediate, c.experts, c.experts_per_token, **kw)
        elif gpt2:
            self.mlp = GeluMlp(h, c.intermediate, **kw)
        else:
            self.mlp = SwiGlu(h, c.intermediate, **kw)

    def attend(self, x, mask, cache=None, start=0):
        """Attention; with `cache` (2, b, heads, context, d) the new K/V go into it at `start`
        and the queries attend over everything up to them."""
        b, s, h = x.shape
        d = h // self.heads
        y = self.norm1(x)
        q = self.q(y).view(b, s, self.heads, d).transpose(1, 2) * (1.0 / math.sqrt(d))
        k = self.k(y).view(b, s, self.heads, d).transpose(1, 2)
        v = self.v(y).view(b, s, self.heads, d).transpose(1, 2)
        if cache is not None:
            cache[0, :, :, start:start + s] = k
            cache[1, :, :, start:start + s] = v
            k, v = cache[0, :, :, :start + s], cache[1, :, :, :start + s]
        scores = q @ k.transpose(-2, -1)
        if mask is not None:
            scores.masked_fill_(mask, float("-inf"))
        p = torch.softmax(scores, dim=-1)
        del scores
        if self.dropout:
            p = F.dropout(p, 0.1, True)
        a = (p @ v).transpose(1, 2).reshape(b, s, h)
        a = self.o(a)
        if self.dropout:
            a = F.dropout(a, 0.1, True)
        return a

    def feed_forward(self, x):
        m = self.mlp(self.norm2(x))
        if self.dropout:
            m = F.dropout(m, 0.1, True)
        return m

    def forward(self, x, mask, cache=None, start=0):
        x = x + self.attend(x, mask, cache, start)
        return x + self.feed_forward(x)


class Gpt(torch.nn.Module):
    def __init__(self, c, **kw):
        super().__init__()
        self.embed = torch.nn.Embedding(c.vocab, c.hidden, **kw)
        self.gpt2 = c.family == "gpt2"
        if self.gpt2:
            self.positions = torch.nn.Embedding(c.positions, c.hidden, **kw)
        self.blocks = torch.nn.ModuleList([Block(c, **kw) for _ in range(c.layers)])
        self.norm = torch.nn.LayerNorm(c.hidden, **kw) if self.gpt2 else Norm(c.hidden, **kw)
        # GPT-2 ties the output projection to the input embedding.
        self.head = None if self.gpt2 else torch.nn.Linear(c.hidden, c.vocab, bias=False, **kw)
        self.full_recompute = c.recompute == "full"

    def logits(self, x):
        x = self.norm(x)
        return F.linear(x, self.embed.weight) if self.head is None else self.head(x)

    def embed_at(self, tokens, start):
        x = self.embed(tokens)
        if self.gpt2:
            x = x + self.positions(torch.arange(start, start + tokens.shape[1]))
        return x

    def forward(self, tokens, targets, mask):
        x = self.embed_at(tokens, 0)
        for block in self.blocks:
            if self.full_recompute:
                x = torch.utils.checkpoint.checkpoint(block, x, mask)
            else:
                x = block(x, mask)
        logits = self.logits(x)
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def serve(c, dtype):
    """Prefill `prompt` tokens for `batch` sequences, then decode; returns the model's parameters."""
    model = Gpt(c, dtype=dtype).eval()
    params = sum(p.numel() for p in model.parameters())
    with torch.no_grad():
        d = c.hidden // c.heads
        # The whole context's cache up front, written so its pages are resident (a server
        # reserves it on the card).
        caches = [torch.zeros(2, c.batch, c.heads, c.context, d, dtype=dtype) for _ in range(c.layers)]
        tokens = torch.randint(0, c.vocab, (c.batch, c.prompt))
        mask = torch.triu(torch.ones(c.prompt, c.prompt, dtype=torch.bool), 1)
        x = model.embed_at(tokens, 0)
        for block, cache in zip(model.blocks, caches):
            x = block(x, mask, cache, 0)
        nxt = torch.argmax(model.logits(x[:, -1:]).float(), dim=-1)
        del x
        # Decode a few tokens after the prompt, and one at the end of the context (attending
        # over all of it: the largest decode step).
        for pos in [c.prompt + i for i in range(min(3, c.context - c.prompt))] + [c.context - 1]:
            x = model.embed_at(nxt, pos)
            for block, cache in zip(model.blocks, caches):
                x = block(x, None, cache, pos)
            nxt = torch.argmax(model.logits(x).float(), dim=-1)
    return params


def main():
    ap = argparse.ArgumentParser()
    for name in ("layers", "hidden", "heads", "intermediate", "vocab"):
        ap.add_argument("--" + name, type=int, required=True)
    for name, default in (("seq", 0), ("micro_batch", 1), ("steps", 3), ("experts", 0), ("experts_per_token", 0),
                          ("batch", 1), ("prompt", 0), ("context", 0), ("positions", 0)):
        ap.add_argument("--" + name.replace("_", "-"), type=int, default=default)
    ap.add_argument("--family", choices=["llama", "gpt2", "moe"], default="llama")
    ap.add_argument("--mode", choices=["train", "infer"], default="train")
    ap.add_argument("--precision", choices=["fp32", "bf16-autocast", "bf16"], default="fp32")
    ap.add_argument("--recompute", choices=["none", "full"], default="none")
    ap.add_argument("--dropout", action="store_true")
    c = ap.parse_args()
    c.positions = c.positions or max(c.seq, c.context, 8)
    torch.manual_seed(0)
    torch.set_num_threads(os.cpu_count() or 1)
    dtype = torch.bfloat16 if c.precision == "bf16" else torch.float32
    autocast = c.precision == "bf16-autocast"

    # Warm up kernels and thread pools on a tiny model of the same family, so their one-time
    # buffers are in the baseline and not counted.
    tiny = argparse.Namespace(**{**vars(c), "layers": 1, "hidden": 64, "heads": 2, "intermediate": 128,
                                 "vocab": 128, "batch": 1, "prompt": 4, "context": 8, "positions": 8})
    if c.mode == "infer":
        serve(tiny, dtype)
    else:
        warm = Gpt(tiny)
        wmask = torch.triu(torch.ones(8, 8, dtype=torch.bool), 1)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = warm(torch.zeros(1, 8, dtype=torch.long), torch.zeros(1, 8, dtype=torch.long), wmask)
        loss.backward()
        torch.optim.AdamW(warm.parameters()).step()
        del warm, loss

    if c.mode == "train":
        mask = torch.triu(torch.ones(c.seq, c.seq, dtype=torch.bool), 1)
        tokens = torch.randint(0, c.vocab, (c.micro_batch, c.seq))
        targets = torch.randint(0, c.vocab, (c.micro_batch, c.seq))
    baseline = rss_bytes("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current resident set

    loss = 0.0
    if c.mode == "infer":
        params = serve(c, dtype)
    else:
        model = Gpt(c)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        params = sum(p.numel() for p in model.parameters())
        for _ in range(c.steps):
            # Gradients stay allocated between steps, as DDP's buckets keep them.
            opt.zero_grad(set_to_none=False)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss = model(tokens, targets, mask)
            loss.backward()
            opt.step()
    peak = rss_bytes("VmHWM") - baseline
    print(json.dumps({"params": params, "peak_bytes": peak, "loss": float(loss)}))


if __name__ == "__main__":
    main()
