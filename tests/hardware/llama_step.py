"""Trains a Llama-shaped model with random weights (no download) on one card and prints, as JSON,
the median step time and the memory the card had to hold, for tests/hardware/run.sh to set
against `hetpoolctl plan`.

The setup is the planner's `--mixed-precision autocast --recompute none --attention flash`:
fp32 weights, bf16 autocast, fused AdamW, SDPA attention (K and V repeated to the query heads,
as Hugging Face's Llama does), logits upcast to fp32 for the loss. Median of the timed steps
after the warm-ups; peaks from the caching allocator; `process_mib` is what nvidia-smi says the
process holds (reserved + CUDA context), read while the process still holds it.
"""
import argparse
import json
import os
import statistics
import subprocess
import time

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        variance = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(variance + self.eps)).to(x.dtype) * self.weight


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, self.heads, self.kv_heads = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.head_dim = h // self.heads
        self.q_proj = nn.Linear(h, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(h, h, bias=False)
        self.gate_proj = nn.Linear(h, c["intermediate_size"], bias=False)
        self.up_proj = nn.Linear(h, c["intermediate_size"], bias=False)
        self.down_proj = nn.Linear(c["intermediate_size"], h, bias=False)
        self.input_norm = RMSNorm(h, c.get("rms_norm_eps", 1e-5))
        self.post_norm = RMSNorm(h, c.get("rms_norm_eps", 1e-5))

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        y = self.input_norm(x)
        q = self.q_proj(y).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(y).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(y).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        repeat = self.heads // self.kv_heads
        k = k.repeat_interleave(repeat, dim=1)
        v = v.repeat_interleave(repeat, dim=1)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o_proj(attn.transpose(1, 2).reshape(b, s, -1))
        y = self.post_norm(x)
        return x + self.down_proj(F.silu(self.gate_proj(y)) * self.up_proj(y))


class Llama(nn.Module):
    def __init__(self, c, seq):
        super().__init__()
        self.embed = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(Block(c) for _ in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"], c.get("rms_norm_eps", 1e-5))
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        head_dim = c["hidden_size"] // c["num_attention_heads"]
        inv = 1.0 / (c.get("rope_theta", 10000.0) ** (torch.arange(0, head_dim, 2).float() / head_dim))
        angles = torch.outer(torch.arange(seq).float(), inv)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos()[None, None], persistent=False)
        self.register_buffer("sin", angles.sin()[None, None], persistent=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x, self.cos, self.sin)
        return self.lm_head(self.norm(x))


def process_mib():
    """What nvidia-smi says this process holds on the card (reserved memory + context)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0] == str(os.getpid()) and parts[1].isdigit():
            return int(parts[1])
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    with open(args.config) as f:
        config = json.load(f)
    torch.manual_seed(0)
    model = Llama(config, args.seq).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    tokens = torch.randint(0, config["vocab_size"], (args.micro_batch, args.seq + 1), device="cuda")
    inputs, labels = tokens[:, :-1], tokens[:, 1:]
    times = []
    for step in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(inputs)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    print(json.dumps({
        "step_seconds": statistics.median(times),
        "allocated_mib": torch.cuda.max_memory_allocated() / 2**20,
        "reserved_mib": torch.cuda.max_memory_reserved() / 2**20,
        "process_mib": process_mib(),
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
