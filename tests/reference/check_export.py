#!/usr/bin/env python3
"""Loads `loom ckpt export` files into the PyTorch reference model and checks the loss.

Usage: check_export.py HF_FILE LOOM_FILE --job JOB.yaml --step S --loss L

HF_FILE holds Hugging Face GPT-2 names with Conv1D ([in, out]) linear weights; LOOM_FILE holds
Loom's canonical names and [out, in] weights. Both are read with plain Python (header + numpy),
mapped to the reference model's names, and the model's mean cross-entropy on the training batch of
step S (regenerated here from the seed, exactly as Loom's sampler draws it) must equal Loom's
loss L for that step within 1e-5 relative. Exit 0 pass, 1 fail.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import yaml

import torch_gpt

MASK = (1 << 64) - 1
TRAIN_STREAM = 0x7472616E  # "tran", worker/data/sampler.h


def mix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def hash_combine(a, b):
    return mix64(a ^ mix64(b))


def training_batch(tokens, seq, global_batch, seed, step):
    """The inputs and targets of 0-based optimizer step `step` (core/rng.h, sampler.cc)."""
    span = len(tokens) - seq
    base = hash_combine(seed, TRAIN_STREAM)
    rows = []
    for j in range(global_batch):
        start = mix64(hash_combine(base, step * global_batch + j)) % span
        rows.append(tokens[start:start + seq + 1])
    rows = np.array(rows, dtype=np.int64)
    return rows[:, :-1], rows[:, 1:]


def from_hf(tensors):
    """Hugging Face GPT-2 names and Conv1D layouts -> the reference model's."""
    out = {}
    for name, t in tensors.items():
        if name in ("wte.weight", "wpe.weight"):
            name = name[:3]
        elif name.endswith(("c_attn.weight", "c_proj.weight", "c_fc.weight")):
            t = t.T
        out[name] = np.ascontiguousarray(t)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hf_file")
    ap.add_argument("loom_file")
    ap.add_argument("--job", required=True, help="the job file (data.text with an absolute path)")
    ap.add_argument("--step", type=int, required=True, help="1-based step whose loss is given")
    ap.add_argument("--loss", type=float, required=True)
    ap.add_argument("--bf16", help="the LOOM_FILE export with --dtype bf16")
    ap.add_argument("--f16", help="the LOOM_FILE export with --dtype f16")
    ap.add_argument("--hf-dir", help="an export with --hf-dir: config.json + model.safetensors")
    a = ap.parse_args()

    job = yaml.safe_load(open(a.job))
    d = job["data"]
    data = np.frombuffer(open(d["text"], "rb").read(), dtype=np.uint8).astype(np.int64)
    val_n = int(len(data) * d.get("val_fraction", 0.1))  # the defaults of docs/JOB.md
    tokens = data[:len(data) - val_n]
    inputs, targets = training_batch(tokens, d["seq"], d["global_batch"], job.get("seed", 1337),
                                     a.step - 1)

    ok = True
    files = [(a.hf_file, from_hf, None), (a.loom_file, lambda t: t, None)]
    if a.hf_dir:
        files.append((os.path.join(a.hf_dir, "model.safetensors"), from_hf,
                      os.path.join(a.hf_dir, "config.json")))
    for path, convert, config_json in files:
        tensors, meta = torch_gpt.read_safetensors(path, with_metadata=True)
        config = {"vocab": meta["vocab_size"], "max_seq": meta["n_positions"],
                  "layers": meta["n_layer"], "heads": meta["n_head"], "hidden": meta["n_embd"]}
        if config_json:
            # The model is built from config.json alone, with what GPT2Config would make of it:
            # the architecture keys must say this reference model (tanh GELU, its layer-norm
            # epsilon, a tied head, no dropout).
            hf = json.load(open(config_json))
            config = {"vocab": hf["vocab_size"], "max_seq": hf["n_positions"],
                      "layers": hf["n_layer"], "heads": hf["n_head"], "hidden": hf["n_embd"]}
            want = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"],
                    "activation_function": "gelu_new",
                    "layer_norm_epsilon": torch_gpt.LAYER_NORM_EPS, "n_inner": None,
                    "tie_word_embeddings": True, "scale_attn_weights": True,
                    "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
                    "torch_dtype": "float32"}
            wrong = {k: hf.get(k) for k, v in want.items() if hf.get(k) != v}
            if wrong:
                print(f"FAIL {config_json}: {wrong}, expected {want}")
                ok = False
        if meta.get("format") != "pt":
            print(f"FAIL {path}: metadata format {meta.get('format')!r}, expected 'pt'")
            ok = False
        model = torch_gpt.GPT(config, convert(tensors), dtype=torch.float32)
        with torch.no_grad():
            _, loss = model(torch.as_tensor(inputs), torch.as_tensor(targets))
        rel = abs(loss.item() - a.loss) / abs(a.loss)
        verdict = "PASS" if rel <= 1e-5 else "FAIL"
        ok = ok and rel <= 1e-5
        print(f"{verdict} {path} ({meta['naming']} names, {len(tensors)} tensors): PyTorch loss "
              f"{loss.item():.8f} vs Loom {a.loss:.8f} on step {a.step}'s batch (rel {rel:.2e})")
    if a.bf16 or a.f16:
        ok = check_narrow(a.loom_file, a.bf16, a.f16) and ok
    return 0 if ok else 1


def bf16_round(x):
    """float32 -> bfloat16 (as float32), rounding to nearest, ties to even (no NaNs here)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32)


def check_narrow(f32_path, bf16_path, f16_path):
    """The bf16 / f16 exports hold exactly the f32 export rounded to nearest-even (numpy's own
    float16 cast; bfloat16 by bit arithmetic), tensor for tensor, in the header's dtype."""
    ok = True
    exact = torch_gpt.read_safetensors(f32_path)
    for path, tag, rounded in ((bf16_path, "BF16", bf16_round),
                               (f16_path, "F16", lambda t: t.astype(np.float16))):
        if path is None:
            continue
        tensors, meta = torch_gpt.read_safetensors(path, with_metadata=True)
        bad = [n for n in exact if n not in tensors or
               not np.array_equal(tensors[n].view(np.uint8), rounded(exact[n]).view(np.uint8))]
        if meta.get("dtype") != tag or list(tensors) != list(exact) or bad:
            print(f"FAIL {path}: metadata dtype {meta.get('dtype')!r} (expected {tag!r}); "
                  f"tensors differing from the f32 export rounded to {tag}: {bad[:5]}")
            ok = False
        else:
            print(f"PASS {path}: {len(tensors)} {tag} tensors, each exactly the f32 export "
                  f"rounded to nearest-even ({os.path.getsize(path)} vs "
                  f"{os.path.getsize(f32_path)} bytes)")
    return ok


if __name__ == "__main__":
    sys.exit(main())
