#!/usr/bin/env python3
"""Sums an ncu per-kernel summary (ncu --metrics gpu__time_duration.sum --print-summary
per-kernel) by kernel, cuBLAS's GEMM kernels grouped by family, and prints the time per step,
largest first.

Usage: ncu_summary.py NCU_OUTPUT STEPS
  STEPS: the training steps the profiled run took (warm-up included), to divide by.
"""
import collections
import re
import sys

UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    path, steps = argv[1], int(argv[2])
    total = collections.Counter()
    calls = collections.Counter()
    name, invocations = None, 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"  (\S.*?) \(\d+, \d+, \d+\)x\(\d+, \d+, \d+\), .*Invocations (\d+)", line)
            if m:
                name, invocations = m.group(1), int(m.group(2))
                continue
            m = re.match(r"\s+gpu__time_duration\.sum\s+(\S+)\s+\S+\s+\S+\s+(\S+)", line)
            if m and name:
                avg_us = float(m.group(2).replace(",", "")) * UNITS.get(m.group(1), 1.0)
                key = re.sub(r"\(.*", "", name)
                key = re.sub(r"loom::(cuda::)?<unnamed>::", "", key)
                if "xmma" in key or "nvjet" in key or "gemm" in key.lower():
                    key = "GEMM " + key[:48]
                total[key] += avg_us * invocations
                calls[key] += invocations
                name = None
    step_ms = sum(total.values()) / 1e3 / steps
    print(f"{step_ms:.2f} ms of kernels per step ({steps} steps profiled)")
    for key, us in total.most_common():
        print(f"{us / 1e3 / steps:9.3f} ms/step {calls[key] / steps:7.1f} calls/step  {key}")


if __name__ == "__main__":
    main(sys.argv)
