#!/usr/bin/env python3
"""Checks a run started from a checkpoint's weights only (checkpoint.init_from) against PyTorch.

Usage: check_finetune.py WEIGHTS --job JOB.yaml --losses LOSSES [LOSSES ...]

WEIGHTS is `loom ckpt export --names loom` of the checkpoint the runs started from; each LOSSES
file holds a run's "step loss" lines. A fine-tuning run starts at step 1 of its own: the batch of
step 1, the learning rate of step 1 and a new AdamW (zero moments, step count 0). The reference
model loads WEIGHTS and replays steps 1 and 2 that way with torch.optim.AdamW; both losses of every
run must match within 1e-5 relative. Step 1's loss shows the weights came from WEIGHTS and the data
position restarted; step 2's shows the update used fresh moments and the restarted LR schedule
(moments carried over from the checkpoint, or its step count, would move the weights elsewhere).
Exit 0 pass, 1 fail.
"""
import argparse
import math
import sys

import torch
import yaml

import torch_gpt
from check_export import training_batch

import numpy as np


def scheduled_lr(lr, min_lr, warmup, decay_steps, step):
    """worker/lr_schedule.cc: linear warmup, then cosine decay to min_lr (0-based step)."""
    if step < warmup:
        return lr * (step + 1) / warmup
    if step >= decay_steps:
        return min_lr
    ratio = (step - warmup) / (decay_steps - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def replay_losses(model, job, tokens, steps):
    """The loss of each of a fine-tuning run's first `steps` steps (1, 2, ...), in PyTorch: the
    job's batches, a fresh AdamW with the job's hyper-parameters, clipping and learning-rate
    schedule (the defaults of docs/JOB.md). decay_steps defaults to the job file's `steps`, read
    before --steps overrides it (job/job_config.cc), so a run with --steps 2 still decays over the
    file's steps."""
    d, o, s = job["data"], job["optimizer"], job.get("schedule", {})
    lr, min_lr = o["lr"], o.get("min_lr", 1e-4)
    warmup, decay = s.get("warmup_steps", 0), s.get("decay_steps", job["steps"])
    optimizer = torch_gpt.make_optimizer(model, lr, (o.get("beta1", 0.9), o.get("beta2", 0.95)),
                                         o.get("eps", 1e-8), o.get("weight_decay", 0.1))
    losses = []
    for step in range(steps):
        inputs, targets = training_batch(tokens, d["seq"], d["global_batch"],
                                         job.get("seed", 1337), step)
        optimizer.zero_grad(set_to_none=True)
        _, loss = model(torch.as_tensor(inputs), torch.as_tensor(targets))
        losses.append(loss.item())
        loss.backward()
        if o.get("grad_clip", 1.0) > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), o.get("grad_clip", 1.0))
        for group in optimizer.param_groups:
            group["lr"] = scheduled_lr(lr, min_lr, warmup, decay, step)
        optimizer.step()
    return losses


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("weights")
    ap.add_argument("--job", required=True, help="the job file (data.text with an absolute path)")
    ap.add_argument("--losses", nargs="+", required=True)
    a = ap.parse_args()

    job = yaml.safe_load(open(a.job))
    d = job["data"]
    data = np.frombuffer(open(d["text"], "rb").read(), dtype=np.uint8).astype(np.int64)
    tokens = data[:len(data) - int(len(data) * d.get("val_fraction", 0.1))]
    tensors, meta = torch_gpt.read_safetensors(a.weights, with_metadata=True)
    config = {"vocab": meta["vocab_size"], "max_seq": meta["n_positions"],
              "layers": meta["n_layer"], "heads": meta["n_head"], "hidden": meta["n_embd"]}
    model = torch_gpt.GPT(config, tensors, dtype=torch.float32)
    ref = replay_losses(model, job, tokens, 2)

    ok = True
    for path in a.losses:
        with open(path) as f:
            got = dict((int(line.split()[0]), float(line.split()[1])) for line in f if line.strip())
        for step, want in enumerate(ref, start=1):
            if step not in got:
                print(f"FAIL {path}: no loss for step {step} (a fine-tuning run counts from 1)")
                ok = False
                continue
            rel = abs(got[step] - want) / abs(want)
            verdict = "PASS" if rel <= 1e-5 else "FAIL"
            ok = ok and rel <= 1e-5
            print(f"{verdict} {path}: step {step} loss {got[step]:.8f} vs PyTorch {want:.8f} "
                  f"from the checkpoint's weights with a new AdamW (rel {rel:.2e})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
