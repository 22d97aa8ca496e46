#!/usr/bin/env python3
"""The logits of Hugging Face's LlamaForCausalLM or GPT2LMHeadModel, computed
with plain PyTorch from an exported model directory, to check Chimera's
models and their export without `transformers` (which Debian does not ship).

    hugging_face_logits.py MODEL_DIR CHECK.safetensors

MODEL_DIR holds config.json and model.safetensors as `transformers` reads
them; CHECK.safetensors holds `tokens` [batch, seq] (I64) and `logits`
[batch, seq, vocab], the logits Chimera computed. Prints the largest
absolute difference from the logits computed here.

Llama's forward follows the definitions of transformers' modeling_llama.py:
RMSNorm (weight * x / sqrt(mean(x^2) + eps)), rotary embeddings by
rotate_half on each head's two halves with inv_freq = theta^(-2i/d) (scaled
as rope_type "llama3" says in modeling_rope_utils.py, when configured),
repeat_kv (key/value head j serves query heads j*g ... j*g + g - 1), causal
softmax attention scaled by 1/sqrt(head_dim), and down(silu(gate(x)) *
up(x)), and lm_head, or the token embedding when tie_word_embeddings. It
computes in the weights' dtype throughout (transformers'
RMSNorm would round float64 to float32, which a 1e-9 check cannot use).

GPT-2's follows modeling_gpt2.py: token plus position embeddings; per block
x + c_proj(attention(ln_1(x))) and x + c_proj(act(c_fc(ln_2(x)))), where a
Conv1D computes x @ weight + bias (its weight is [in, out]) and c_attn's
output holds the queries, keys and values in that order; ln_f; and the token
embedding as the head. `activation_function` "gelu" is the exact GELU,
"gelu_new" its tanh approximation.
"""
import json
import math
import struct
import sys

import torch

DTYPES = {"F64": torch.float64, "F32": torch.float32, "BF16": torch.bfloat16,
          "I64": torch.int64}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    length = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + length])
    base = 8 + length
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        tensors[name] = torch.frombuffer(
            bytearray(data[base + begin:base + end]),
            dtype=DTYPES[entry["dtype"]]).reshape(entry["shape"])
    return tensors


def rms_norm(x, weight, eps):
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def llama3_scaled(inv_freq, scaling):
    factor = scaling["factor"]
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    context = scaling["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > context / low, inv_freq / factor, inv_freq)
    smooth = (context / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < context / high) * ~(wavelen > context / low)
    return torch.where(medium, smoothed, scaled)


def llama_logits(config, w, tokens):
    heads = config["num_attention_heads"]
    kv_heads = config["num_key_value_heads"]
    head_dim = config["hidden_size"] // heads
    eps = config["rms_norm_eps"]
    batch, seq = tokens.shape
    dtype = w["model.embed_tokens.weight"].dtype

    inv_freq = 1.0 / (config["rope_theta"] ** (
        torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    if config.get("rope_scaling"):
        assert config["rope_scaling"]["rope_type"] == "llama3", config
        inv_freq = llama3_scaled(inv_freq, config["rope_scaling"])
    angles = torch.outer(torch.arange(seq, dtype=torch.float64), inv_freq)
    emb = torch.cat((angles, angles), dim=-1)
    cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
    causal = torch.full((seq, seq), float("-inf"), dtype=dtype).triu(1)

    x = w["model.embed_tokens.weight"][tokens]
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(
            batch, seq, heads, head_dim).transpose(1, 2)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(
            batch, seq, kv_heads, head_dim).transpose(1, 2)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(
            batch, seq, kv_heads, head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        group = heads // kv_heads
        k = k[:, :, None].expand(batch, kv_heads, group, seq, head_dim).reshape(
            batch, heads, seq, head_dim)
        v = v[:, :, None].expand(batch, kv_heads, group, seq, head_dim).reshape(
            batch, heads, seq, head_dim)
        scores = q @ k.transpose(2, 3) / head_dim ** 0.5 + causal
        context = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(
            batch, seq, heads * head_dim)
        x = x + context @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = torch.nn.functional.silu(h @ w[p + "mlp.gate_proj.weight"].T)
        up = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (gate * up) @ w[p + "mlp.down_proj.weight"].T
    head = w["model.embed_tokens.weight" if config["tie_word_embeddings"]
             else "lm_head.weight"]
    return rms_norm(x, w["model.norm.weight"], eps) @ head.T


def layer_norm(x, w, prefix, eps):
    return torch.nn.functional.layer_norm(
        x, x.shape[-1:], w[prefix + ".weight"], w[prefix + ".bias"], eps)


def gpt2_logits(config, w, tokens):
    heads = config["n_head"]
    hidden = config["n_embd"]
    head_dim = hidden // heads
    eps = config["layer_norm_epsilon"]
    approximate = {"gelu": "none", "gelu_new": "tanh"}[
        config["activation_function"]]
    assert config["tie_word_embeddings"], config
    batch, seq = tokens.shape
    dtype = w["transformer.wte.weight"].dtype
    causal = torch.full((seq, seq), float("-inf"), dtype=dtype).triu(1)

    def conv1d(x, prefix):
        return x @ w[prefix + ".weight"] + w[prefix + ".bias"]

    def split_heads(x):
        return x.view(batch, seq, heads, head_dim).transpose(1, 2)

    x = w["transformer.wte.weight"][tokens] + w["transformer.wpe.weight"][:seq]
    for i in range(config["n_layer"]):
        p = f"transformer.h.{i}."
        q, k, v = conv1d(layer_norm(x, w, p + "ln_1", eps),
                         p + "attn.c_attn").split(hidden, dim=2)
        q, k, v = split_heads(q), split_heads(k), split_heads(v)
        scores = q @ k.transpose(2, 3) / head_dim ** 0.5 + causal
        context = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(
            batch, seq, hidden)
        x = x + conv1d(context, p + "attn.c_proj")
        h = conv1d(layer_norm(x, w, p + "ln_2", eps), p + "mlp.c_fc")
        h = torch.nn.functional.gelu(h, approximate=approximate)
        x = x + conv1d(h, p + "mlp.c_proj")
    x = layer_norm(x, w, "transformer.ln_f", eps)
    return x @ w["transformer.wte.weight"].T


LOGITS = {"LlamaForCausalLM": llama_logits, "GPT2LMHeadModel": gpt2_logits}


def main():
    model_dir, check_path = sys.argv[1], sys.argv[2]
    with open(f"{model_dir}/config.json") as f:
        config = json.load(f)
    [architecture] = config["architectures"]
    weights = read_safetensors(f"{model_dir}/model.safetensors")
    check = read_safetensors(check_path)
    ours = check["logits"]
    theirs = LOGITS[architecture](config, weights, check["tokens"])
    print(f"{(theirs - ours).abs().max().item():.3e}")


if __name__ == "__main__":
    main()
