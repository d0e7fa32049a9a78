#!/usr/bin/python3
"""The planner's parameter counts against sum(p.numel()) of each model built in PyTorch.

For every config.json under tests/data/hf_configs, builds the model the way its Hugging Face
modeling code lays out modules (the same nn.Linear/nn.Embedding/norm shapes and bias flags,
on the meta device so a 47B model costs nothing), counts its parameters, and compares the count
with what `hetpoolctl plan --config FILE --pool INVENTORY -o json` reports. Run by ctest
(Planner.ParameterCountsMatchPyTorch); exits 77 (skipped) when PyTorch is not installed.

    param_count_test.py HETPOOLCTL CONFIG_DIR INVENTORY
"""
import glob
import json
import os
import subprocess
import sys

try:
    import torch
    from torch import nn
except ImportError:
    print("SKIP: PyTorch is not installed (apt-get install python3-torch)")
    sys.exit(77)

META = {"device": "meta"}


def linear(i, o, bias):
    return nn.Linear(i, o, bias=bias, **META)


class RmsNorm(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(h, **META))


def gated_mlp(h, width, bias=False):
    return nn.ModuleDict({"gate": linear(h, width, bias), "up": linear(h, width, bias), "down": linear(width, h, bias)})


def gpt2(c):
    h, inner = c["n_embd"], c.get("n_inner") or 4 * c["n_embd"]
    block = lambda: nn.ModuleDict({  # noqa: E731  GPT2Block: Conv1D projections with biases
        "ln_1": nn.LayerNorm(h, **META), "c_attn": linear(h, 3 * h, True), "c_proj": linear(h, h, True),
        "ln_2": nn.LayerNorm(h, **META), "c_fc": linear(h, inner, True), "mlp_proj": linear(inner, h, True)})
    # lm_head is tied to wte: no parameters of its own.
    return nn.ModuleDict({"wte": nn.Embedding(c["vocab_size"], h, **META),
                          "wpe": nn.Embedding(c["n_positions"], h, **META),
                          "h": nn.ModuleList([block() for _ in range(c["n_layer"])]),
                          "ln_f": nn.LayerNorm(h, **META)})


def gptj(c):
    h, inner = c["n_embd"], c.get("n_inner") or 4 * c["n_embd"]
    block = lambda: nn.ModuleDict({  # noqa: E731  one LayerNorm feeds attention and MLP in parallel
        "ln_1": nn.LayerNorm(h, **META), "q_proj": linear(h, h, False), "k_proj": linear(h, h, False),
        "v_proj": linear(h, h, False), "out_proj": linear(h, h, False),
        "fc_in": linear(h, inner, True), "fc_out": linear(inner, h, True)})
    return nn.ModuleDict({"wte": nn.Embedding(c["vocab_size"], h, **META),
                          "h": nn.ModuleList([block() for _ in range(c["n_layer"])]),
                          "ln_f": nn.LayerNorm(h, **META),
                          "lm_head": linear(h, c["vocab_size"], True)})


def gpt_neox(c):
    h, inner, bias = c["hidden_size"], c["intermediate_size"], c.get("attention_bias", True)
    layer = lambda: nn.ModuleDict({  # noqa: E731
        "input_layernorm": nn.LayerNorm(h, **META), "post_attention_layernorm": nn.LayerNorm(h, **META),
        "query_key_value": linear(h, 3 * h, bias), "dense": linear(h, h, bias),
        "dense_h_to_4h": linear(h, inner, True), "dense_4h_to_h": linear(inner, h, True)})
    return nn.ModuleDict({"embed_in": nn.Embedding(c["vocab_size"], h, **META),
                          "layers": nn.ModuleList([layer() for _ in range(c["num_hidden_layers"])]),
                          "final_layer_norm": nn.LayerNorm(h, **META),
                          "embed_out": linear(h, c["vocab_size"], False)})


def llama_like(c):
    """Llama, Mistral, Qwen2, Gemma, Phi-3, Mixtral, Qwen2-MoE, DeepSeek (v1)."""
    t = c["model_type"]
    h, heads = c["hidden_size"], c["num_attention_heads"]
    kv, hd = c.get("num_key_value_heads", heads), c.get("head_dim") or h // heads
    attn_bias = c.get("attention_bias", False)
    qkv_bias = attn_bias or t in ("qwen2", "qwen2_moe")
    tied = c.get("tie_word_embeddings", t == "gemma")

    def attention():
        if t == "phi3":  # fused qkv_proj
            return nn.ModuleDict({"qkv_proj": linear(h, heads * hd + 2 * kv * hd, False),
                                  "o_proj": linear(heads * hd, h, False)})
        return nn.ModuleDict({"q_proj": linear(h, heads * hd, qkv_bias), "k_proj": linear(h, kv * hd, qkv_bias),
                              "v_proj": linear(h, kv * hd, qkv_bias), "o_proj": linear(heads * hd, h, attn_bias)})

    def mlp(index):
        mlp_bias = c.get("mlp_bias", False)
        if t == "phi3":  # fused gate_up_proj
            i = c["intermediate_size"]
            return nn.ModuleDict({"gate_up_proj": linear(h, 2 * i, False), "down_proj": linear(i, h, False)})
        if t == "mixtral":
            e = c["num_local_experts"]
            return nn.ModuleDict({"gate": linear(h, e, False),
                                  "experts": nn.ModuleList([gated_mlp(h, c["intermediate_size"]) for _ in range(e)])})
        if t == "qwen2_moe":
            e = c["num_experts"]
            return nn.ModuleDict({"gate": linear(h, e, False),
                                  "experts": nn.ModuleList([gated_mlp(h, c["moe_intermediate_size"]) for _ in range(e)]),
                                  "shared_expert": gated_mlp(h, c["shared_expert_intermediate_size"]),
                                  "shared_expert_gate": linear(h, 1, False)})
        if t == "deepseek" and index >= c.get("first_k_dense_replace", 0):
            e, w = c["n_routed_experts"], c["moe_intermediate_size"]
            return nn.ModuleDict({"gate": linear(h, e, False),  # MoEGate: a weight of e x h, no bias
                                  "experts": nn.ModuleList([gated_mlp(h, w) for _ in range(e)]),
                                  "shared_experts": gated_mlp(h, w * c["n_shared_experts"])})
        return gated_mlp(h, c["intermediate_size"], mlp_bias)

    layers = nn.ModuleList([nn.ModuleDict({"self_attn": attention(), "mlp": mlp(i), "input_layernorm": RmsNorm(h),
                                           "post_attention_layernorm": RmsNorm(h)})
                            for i in range(c["num_hidden_layers"])])
    parts = {"embed_tokens": nn.Embedding(c["vocab_size"], h, **META), "layers": layers, "norm": RmsNorm(h)}
    if not tied:
        parts["lm_head"] = linear(h, c["vocab_size"], False)
    return nn.ModuleDict(parts)


BUILDERS = {"gpt2": gpt2, "gptj": gptj, "gpt_neox": gpt_neox}


def main():
    hetpoolctl, config_dir, inventory = sys.argv[1:4]
    configs = sorted(glob.glob(os.path.join(config_dir, "*.json")))
    if not configs:
        print(f"no config.json files under {config_dir}")
        return 1
    failures = 0
    for path in configs:
        with open(path) as f:
            config = json.load(f)
        model = BUILDERS.get(config["model_type"], llama_like)(config)
        expected = sum(p.numel() for p in model.parameters())
        out = subprocess.run([hetpoolctl, "plan", "--config", path, "--pool", inventory, "-o", "json"],
                             capture_output=True, text=True)
        if not out.stdout.strip():
            print(f"FAIL {os.path.basename(path)}: hetpoolctl said nothing (exit {out.returncode}): {out.stderr}")
            failures += 1
            continue
        plan = json.loads(out.stdout)
        got = int(plan.get("total_params", plan.get("totalParams", 0)))
        family = plan.get("family", "")
        ok = got == expected and family == config["model_type"]
        failures += 0 if ok else 1
        print(f"{'ok  ' if ok else 'FAIL'} {os.path.basename(path):26s} {config['model_type']:10s} "
              f"torch {expected:>15,d}  planner {got:>15,d} ({family})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
