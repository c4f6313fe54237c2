#!/usr/bin/env python3
"""Hugging Face Llama directories against PyTorch, both ways (run_hf_llama_check.sh).

  check_hf_llama.py export HF_DIR --job JOB.yaml --loss L --loom LOOM_FILE
      HF_DIR is `loom ckpt export --hf-dir` of a llama checkpoint, sharded: config.json, the
      index and its shards are read with plain Python (header + numpy), and the Hugging Face
      names mapped back to Loom's (k|v and gate|up concatenated by rows) must give every tensor
      of LOOM_FILE (the same checkpoint exported with Loom's names) bit for bit; torch_llama.Llama
      built from config.json alone must give loss L (Loom's, for the same weights, on step 1's
      batch of a run started from them) within 1e-5 relative. (The loss alone would let gate and
      up swap: with small weights silu(g)*u and silu(u)*g differ by ~5e-6.)

  check_hf_llama.py write OUT --job JOB.yaml
      Writes OUT/hf: a sharded Hugging Face Llama directory (3 shards, BF16 and one F16 tensor,
      random weights) of the job's model, as save_pretrained lays one out; OUT/expected.txt: the
      losses of steps 1 and 2 of a fine-tuning run from those weights (fresh AdamW, the job's LR
      schedule), replayed in PyTorch as check_finetune.py does; and OUT/bad_*: damaged copies,
      each of which an import must refuse by name.

  check_hf_llama.py losses EXPECTED LOSSES [LOSSES ...]
      Each LOSSES file ("step loss" lines) must match EXPECTED at steps 1 and 2 within 1e-5.

Exit 0 pass, 1 fail.
"""
import argparse
import json
import os
import struct
import sys
from collections import OrderedDict

import numpy as np
import torch
import yaml

import torch_gpt
import torch_llama
from check_export import training_batch
from check_finetune import replay_losses

# Hugging Face LlamaForCausalLM names -> (Loom's name, part): part 0/1 are the first/second row
# block of Loom's fused k|v and gate|up.
LAYER_NAMES = {
    "input_layernorm.weight": ("ln_1.weight", None),
    "self_attn.q_proj.weight": ("attn.q.weight", None),
    "self_attn.k_proj.weight": ("attn.kv.weight", 0),
    "self_attn.v_proj.weight": ("attn.kv.weight", 1),
    "self_attn.o_proj.weight": ("attn.c_proj.weight", None),
    "post_attention_layernorm.weight": ("ln_2.weight", None),
    "mlp.gate_proj.weight": ("mlp.c_fc.weight", 0),
    "mlp.up_proj.weight": ("mlp.c_fc.weight", 1),
    "mlp.down_proj.weight": ("mlp.c_proj.weight", None),
}


def to_loom(hf):
    """Hugging Face Llama names -> Loom's canonical names (torch_llama's)."""
    out, parts = {}, {}
    for name, t in hf.items():
        if name == "model.embed_tokens.weight":
            out["wte"] = t
        elif name == "model.norm.weight":
            out["ln_f.weight"] = t
        elif name == "lm_head.weight":
            out["lm_head.weight"] = t
        else:
            layer = name.split(".")[2]  # model.layers.{l}.<rest>
            loom, part = LAYER_NAMES[name[len(f"model.layers.{layer}."):]]
            loom = f"h.{layer}.{loom}"
            if part is None:
                out[loom] = t
            else:
                parts.setdefault(loom, {})[part] = t
    for loom, p in parts.items():
        out[loom] = np.concatenate([p[0], p[1]], axis=0)
    return out


def from_loom(tensors, config):
    """Loom's names -> Hugging Face's, in save_pretrained's order (the inverse of to_loom)."""
    kv = config["num_key_value_heads"] * config["hidden_size"] // config["num_attention_heads"]
    ffn = config["intermediate_size"]
    out = OrderedDict([("model.embed_tokens.weight", tensors["wte"])])
    for layer in range(config["num_hidden_layers"]):
        h, m = f"h.{layer}.", f"model.layers.{layer}."
        out[m + "input_layernorm.weight"] = tensors[h + "ln_1.weight"]
        out[m + "self_attn.q_proj.weight"] = tensors[h + "attn.q.weight"]
        out[m + "self_attn.k_proj.weight"] = tensors[h + "attn.kv.weight"][:kv]
        out[m + "self_attn.v_proj.weight"] = tensors[h + "attn.kv.weight"][kv:]
        out[m + "self_attn.o_proj.weight"] = tensors[h + "attn.c_proj.weight"]
        out[m + "post_attention_layernorm.weight"] = tensors[h + "ln_2.weight"]
        out[m + "mlp.gate_proj.weight"] = tensors[h + "mlp.c_fc.weight"][:ffn]
        out[m + "mlp.up_proj.weight"] = tensors[h + "mlp.c_fc.weight"][ffn:]
        out[m + "mlp.down_proj.weight"] = tensors[h + "mlp.c_proj.weight"]
    out["model.norm.weight"] = tensors["ln_f.weight"]
    if "lm_head.weight" in tensors:
        out["lm_head.weight"] = tensors["lm_head.weight"]
    return out


def data_bytes(path):
    """The bytes after a safetensors file's header: its tensors'."""
    with open(path, "rb") as f:
        (header,) = struct.unpack("<Q", f.read(8))
    return os.path.getsize(path) - 8 - header


def read_hf_dir(path):
    """config.json and every tensor of a Hugging Face directory: model.safetensors, or the
    shards model.safetensors.index.json names (each tensor from the shard it names, and each
    shard holding exactly what the index gives it)."""
    config = json.load(open(os.path.join(path, "config.json")))
    single = os.path.join(path, "model.safetensors")
    if os.path.exists(single):
        return config, torch_gpt.read_safetensors(single), [single]
    index = json.load(open(os.path.join(path, "model.safetensors.index.json")))
    by_file = {}
    for name, file in index["weight_map"].items():
        by_file.setdefault(file, set()).add(name)
    tensors, total = {}, 0
    for file, names in sorted(by_file.items()):
        shard, meta = torch_gpt.read_safetensors(os.path.join(path, file), with_metadata=True)
        if set(shard) != names:
            raise ValueError(f"{file}: holds {sorted(set(shard) ^ names)[:3]} against the index")
        if meta.get("format") != "pt":
            raise ValueError(f"{file}: metadata format {meta.get('format')!r}, expected 'pt'")
        tensors.update(shard)
        total += data_bytes(os.path.join(path, file))
    if index["metadata"]["total_size"] != total:
        raise ValueError(f"index total_size {index['metadata']['total_size']}, the shards hold "
                         f"{total} bytes of tensors")
    return config, tensors, [os.path.join(path, f) for f in sorted(by_file)]


def model_config(hf):
    """torch_llama's config from config.json, as LlamaConfig reads it."""
    config = {"vocab": hf["vocab_size"], "max_seq": hf["max_position_embeddings"],
              "layers": hf["num_hidden_layers"], "heads": hf["num_attention_heads"],
              "hidden": hf["hidden_size"], "kv_heads": hf["num_key_value_heads"],
              "ffn_hidden": hf["intermediate_size"], "rope_theta": hf["rope_theta"],
              "norm_eps": hf["rms_norm_eps"], "tie_embeddings": hf["tie_word_embeddings"]}
    r = hf.get("rope_scaling")
    if r:
        config["rope_scaling"] = {"factor": r["factor"], "low_freq_factor": r["low_freq_factor"],
                                  "high_freq_factor": r["high_freq_factor"],
                                  "original_max_seq": r["original_max_position_embeddings"]}
    return config


def hf_rope_scaling(m):
    """config.json's rope_scaling for the job's model section (null without one)."""
    r = m.get("rope_scaling")
    if not r:
        return None
    return {"rope_type": "llama3", "factor": r["factor"],
            "low_freq_factor": r.get("low_freq_factor", 1.0),
            "high_freq_factor": r.get("high_freq_factor", 4.0),
            "original_max_position_embeddings": r.get("original_max_seq", 8192)}


def job_data(path):
    job = yaml.safe_load(open(path))
    d = job["data"]
    data = np.frombuffer(open(d["text"], "rb").read(), dtype=np.uint8).astype(np.int64)
    tokens = data[:len(data) - int(len(data) * d.get("val_fraction", 0.1))]
    return job, tokens


def check_export(a):
    job, tokens = job_data(a.job)
    d = job["data"]
    hf, tensors, files = read_hf_dir(a.hf_dir)
    m = job["model"]
    want = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
            "rope_scaling": hf_rope_scaling(m), "attention_bias": False, "mlp_bias": False,
            "torch_dtype": "float32"}
    wrong = {k: hf.get(k) for k, v in want.items() if hf.get(k) != v}
    sizes = {"vocab_size": m["vocab"], "max_position_embeddings": m["max_seq"],
             "num_hidden_layers": m["layers"], "num_attention_heads": m["heads"],
             "num_key_value_heads": m["kv_heads"], "hidden_size": m["hidden"],
             "intermediate_size": m["ffn_hidden"], "rope_theta": m.get("rope_theta", 10000),
             "rms_norm_eps": m.get("norm_eps", 1e-5),
             "tie_word_embeddings": m.get("tie_embeddings", False)}
    wrong.update({k: hf.get(k) for k, v in sizes.items() if hf.get(k) != v})
    ok = True
    if wrong:
        print(f"FAIL {a.hf_dir}/config.json: {wrong}, expected {want} and {sizes}")
        ok = False
    if len(files) < 3:
        print(f"FAIL {a.hf_dir}: {len(files)} weight files, expected 3 shards or more")
        ok = False
    config = model_config(hf)
    shapes = torch_llama.expected_shapes(config)
    loom = to_loom(tensors)
    if list(sorted(loom)) != sorted(shapes):
        print(f"FAIL {a.hf_dir}: tensors {sorted(set(loom) ^ set(shapes))} against the model")
        return 1
    exact = torch_gpt.read_safetensors(a.loom)
    bad = [n for n in exact if n not in loom or loom[n].shape != exact[n].shape
           or not np.array_equal(loom[n].view(np.uint32), exact[n].view(np.uint32))]
    if bad or len(exact) != len(loom):
        print(f"FAIL {a.hf_dir}: mapped back to Loom's names, tensors differ from {a.loom}: "
              f"{bad[:5]}")
        ok = False
    else:
        print(f"PASS {a.hf_dir}: mapped back to Loom's names, all {len(exact)} tensors are "
              f"{os.path.basename(a.loom)}'s, bit for bit")
    model = torch_llama.Llama(config, loom, dtype=torch.float32)
    inputs, targets = training_batch(tokens, d["seq"], d["global_batch"],
                                     job.get("seed", 1337), 0)
    with torch.no_grad():
        _, loss = model(torch.as_tensor(inputs), torch.as_tensor(targets))
    rel = abs(loss.item() - a.loss) / abs(a.loss)
    ok = ok and rel <= 1e-5
    print(f"{'PASS' if rel <= 1e-5 else 'FAIL'} {a.hf_dir} ({len(files)} shards, "
          f"{len(tensors)} Hugging Face tensors): PyTorch loss {loss.item():.8f} vs Loom "
          f"{a.loss:.8f} on step 1's batch (rel {rel:.2e})")
    return 0 if ok else 1


def bf16(x):
    """float32 -> the bfloat16 bits (uint16), rounding to nearest-even (no NaNs here)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)


def write_shard(path, tensors):
    """A safetensors file of name -> (tag, array): BF16 given as its uint16 bits."""
    header, chunks, offset = OrderedDict([("__metadata__", {"format": "pt"})]), [], 0
    for name, (tag, arr) in tensors.items():
        raw = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": tag, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def write_hf_dir(path, config, stored, shards=3, unlisted=None):
    """save_pretrained's layout: config.json, `shards` shards of consecutive tensors and the
    index. `stored`: HF name -> (tag, array as stored); `unlisted` goes into the last shard
    without the index naming it."""
    os.makedirs(path)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    names = list(stored)
    per = -(-len(names) // shards)
    weight_map, total = {}, 0
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = OrderedDict((n, stored[n]) for n in names[s * per:(s + 1) * per])
        for n, (_, arr) in part.items():
            weight_map[n] = file
            total += arr.nbytes
        if s == shards - 1 and unlisted:
            part.update(unlisted)
        write_shard(os.path.join(path, file), part)
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total},
                   "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)


def write(a):
    job, tokens = job_data(a.job)
    m = job["model"]
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
              "vocab_size": m["vocab"], "hidden_size": m["hidden"],
              "intermediate_size": m["ffn_hidden"], "num_hidden_layers": m["layers"],
              "num_attention_heads": m["heads"], "num_key_value_heads": m["kv_heads"],
              "max_position_embeddings": m["max_seq"], "rope_theta": m.get("rope_theta", 10000),
              "rms_norm_eps": m.get("norm_eps", 1e-5),
              "tie_word_embeddings": m.get("tie_embeddings", False), "hidden_act": "silu",
              "rope_scaling": hf_rope_scaling(m),
              "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2}
    torch_config = model_config(config)
    rng = np.random.default_rng(11)
    weights = {}  # Loom's names, the values as stored (rounded), float32
    for name, shape in torch_llama.expected_shapes(torch_config).items():
        if len(shape) == 1:
            weights[name] = (1 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:
            weights[name] = (0.05 * rng.standard_normal(shape)).astype(np.float32)
    stored = OrderedDict()
    for name, t in from_loom(weights, config).items():
        if name == "model.norm.weight":  # one F16 tensor: every widening is exercised
            stored[name] = ("F16", t.astype(np.float16))
        else:
            stored[name] = ("BF16", bf16(t))
    # What the import must read back: the stored values widened.
    widened = OrderedDict((n, arr.astype(np.float32) if tag == "F16"
                           else (arr.astype(np.uint32) << 16).view(np.float32))
                          for n, (tag, arr) in stored.items())
    out = a.out
    write_hf_dir(os.path.join(out, "hf"), config, stored)

    # The fine-tuning run's steps 1 and 2 in PyTorch (check_finetune.py's replay).
    model = torch_llama.Llama(torch_config, to_loom(widened), dtype=torch.float32)
    with open(os.path.join(out, "expected.txt"), "w") as f:
        for step, loss in enumerate(replay_losses(model, job, tokens, 2), start=1):
            f.write(f"{step} {loss:.17g}\n")

    # Damaged copies, one fault each.
    def bad(name, config=config, stored=stored, unlisted=None):
        write_hf_dir(os.path.join(out, "bad_" + name), config, stored, unlisted=unlisted)
        return os.path.join(out, "bad_" + name)
    missing = OrderedDict((n, t) for n, t in stored.items()
                          if n != "model.layers.3.mlp.up_proj.weight")
    bad("missing_tensor", stored=missing)
    shape = OrderedDict(stored)
    shape["model.layers.1.self_attn.k_proj.weight"] = ("BF16", np.zeros((8, 32), np.uint16))
    bad("shape", stored=shape)
    os.remove(os.path.join(bad("missing_shard"), "model-00002-of-00003.safetensors"))
    bad("no_heads", config={k: v for k, v in config.items() if k != "num_attention_heads"})
    tied = dict(config, tie_word_embeddings=True)
    bad("tied_head", config=tied)  # lm_head.weight is there and differs from the embedding
    bad("rope_scaling", config=dict(config, rope_scaling={"rope_type": "yarn", "factor": 8.0}))
    bad("theta", config=dict(config, rope_theta=500000.0))  # imports; another model for the job
    bad("unscaled", config=dict(config, rope_scaling=None))  # the same: plain rotary positions
    nan = OrderedDict(stored)
    t = nan["model.layers.0.mlp.down_proj.weight"][1].copy()
    t.flat[7] = 0x7FC0  # a BF16 NaN
    nan["model.layers.0.mlp.down_proj.weight"] = ("BF16", t)
    bad("nan", stored=nan)
    # A shard that holds a tensor the index does not list.
    bad("unlisted", unlisted={"model.layers.0.self_attn.extra.weight":
                              ("F32", np.zeros(4, np.float32))})
    print(f"wrote {out}/hf (3 shards, {len(stored)} tensors) and the losses PyTorch takes from "
          f"them: {open(os.path.join(out, 'expected.txt')).read().split()}")
    return 0


def losses(a):
    want = dict((int(l.split()[0]), float(l.split()[1])) for l in open(a.expected) if l.strip())
    ok = True
    for path in a.losses:
        got = dict((int(l.split()[0]), float(l.split()[1])) for l in open(path) if l.strip())
        for step, w in sorted(want.items()):
            if step not in got:
                print(f"FAIL {path}: no loss for step {step}")
                ok = False
                continue
            rel = abs(got[step] - w) / abs(w)
            ok = ok and rel <= 1e-5
            print(f"{'PASS' if rel <= 1e-5 else 'FAIL'} {path}: step {step} loss {got[step]:.8f} "
                  f"vs PyTorch {w:.8f} from the Hugging Face weights (rel {rel:.2e})")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("hf_dir")
    e.add_argument("--job", required=True)
    e.add_argument("--loss", type=float, required=True)
    e.add_argument("--loom", required=True, help="the export with --names loom")
    w = sub.add_parser("write")
    w.add_argument("out")
    w.add_argument("--job", required=True)
    lo = sub.add_parser("losses")
    lo.add_argument("expected")
    lo.add_argument("losses", nargs="+")
    a = ap.parse_args()
    return {"export": check_export, "write": write, "losses": losses}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
