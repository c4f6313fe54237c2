#!/usr/bin/env python3
"""Compares a parallel training run with the single-process run of the same job.

Usage: compare_runs.py SINGLE_LOSSES SINGLE_PARAMS PAR_LOSSES PAR_PARAMS [--label L]
                      [--loss-rtol R] [--param-tol P]
Losses files hold "step loss" lines; params files are safetensors (F32) in single-process layout.
Criteria (Parallel runtime I): loss within 1e-5 relative for steps 1-3 and 1e-4 at every later
step; every final parameter within 1e-4 (|a - b| <= 1e-4 * max(1, |b|)). --loss-rtol R replaces
both loss bounds by R and --param-tol P the parameter bound (bf16 runs: their GEMM inputs are
rounded to 8 bits of mantissa, so a different summation order moves a rounding now and then and
AdamW turns that into lr-sized parameter moves). Exit 0 pass, 1 fail.
"""
import argparse
import json
import struct
import sys

import numpy as np


def read_losses(path):
    with open(path) as f:
        return [float(line.split()[1]) for line in f if line.strip()]


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, en = e["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + b:8 + n + en], dtype=np.float32).reshape(e["shape"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("single_losses")
    ap.add_argument("single_params")
    ap.add_argument("par_losses")
    ap.add_argument("par_params")
    ap.add_argument("--label", default="parallel")
    ap.add_argument("--loss-rtol", type=float, default=None)
    ap.add_argument("--param-tol", type=float, default=1e-4)
    a = ap.parse_args()
    ref, got = read_losses(a.single_losses), read_losses(a.par_losses)
    ok = len(ref) == len(got) and len(ref) > 0
    if not ok:
        print(f"FAIL {a.label}: {len(got)} losses, expected {len(ref)}")
        return 1
    worst_early = worst_late = 0.0
    for step, (r, g) in enumerate(zip(ref, got), start=1):
        rel = abs(r - g) / abs(r)
        tol = 1e-5 if step <= 3 else 1e-4
        if a.loss_rtol is not None:
            tol = a.loss_rtol
        if step <= 3:
            worst_early = max(worst_early, rel)
        else:
            worst_late = max(worst_late, rel)
        if rel > tol:
            print(f"FAIL {a.label}: step {step} loss {g:.9g} vs single-process {r:.9g} (rel {rel:.3g} > {tol})")
            ok = False
    pr, pg = read_safetensors(a.single_params), read_safetensors(a.par_params)
    worst_param, worst_name = 0.0, ""
    for name, r in pr.items():
        if name not in pg or pg[name].shape != r.shape:
            print(f"FAIL {a.label}: parameter {name} missing or misshapen")
            ok = False
            continue
        d = np.max(np.abs(pg[name] - r) / np.maximum(1.0, np.abs(r)))
        if d > worst_param:
            worst_param, worst_name = float(d), name
    if worst_param > a.param_tol:
        print(f"FAIL {a.label}: parameter {worst_name} differs by {worst_param:.3g} > {a.param_tol:g}")
        ok = False
    print(f"{'PASS' if ok else 'FAIL'} {a.label}: loss rel diff steps 1-3 {worst_early:.2e}, "
          f"later {worst_late:.2e}; max param diff {worst_param:.2e} ({worst_name or '-'})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
