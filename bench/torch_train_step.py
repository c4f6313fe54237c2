#!/usr/bin/env python3
"""PyTorch side of the Loom training-step benchmark.

Times full float32 (or, with --autocast-bf16, mixed-precision) training
steps (zero_grad, forward, loss, backward, optional gradient clipping, AdamW
step) of the reference GPT from tests/reference/torch_gpt.py on the CPU or,
with --device cuda, on the current GPU (bench/gpu_step_bench.cc), and prints
one machine-readable line:

  torch_ms=<median ms> threads=<N> openblas_threads=<env> peak_rss_mb=<MB>
  [peak_gpu_mb=<MB> device=<name>]   (with --device cuda)
  loss_first=<loss of the first step> loss_last=<loss of the last>

On the GPU every timed step is bracketed by torch.cuda.synchronize(), so the
time is the device's, not the launch queue's. The caller is expected to set
OPENBLAS_NUM_THREADS in the environment (it is only reported here, since BLAS
reads it at load time).
"""

import argparse
import os
import resource
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "tests", "reference"))
import torch_gpt  # noqa: E402  (needs the sys.path entry above)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Time PyTorch GPT training steps (float32, CPU).")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--seq", type=int, default=256,
                        help="sequence length (also used as max_seq)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--warmup", type=int, default=3,
                        help="untimed steps before measuring")
    parser.add_argument("--steps", type=int, default=7,
                        help="timed steps; the median is reported")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch.set_num_threads value (default: leave "
                             "torch's default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--autocast-bf16", action="store_true",
                        help="run the forward under torch.autocast(<device>, "
                             "bfloat16): PyTorch's mixed precision")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the model and the step run")
    parser.add_argument("--tf32", action="store_true",
                        help="allow TF32 in float32 matmuls (cuda only; "
                             "PyTorch's default is off)")
    parser.add_argument("--grad-clip", type=float, default=0.0,
                        help="clip_grad_norm_ to this value before the step "
                             "(0: no clipping, the CPU benchmark's setting)")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be >= 1")
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be >= 1")
    if args.hidden % args.heads:
        parser.error("--hidden must be divisible by --heads")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch.cuda.is_available() is False")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    config = {"vocab": args.vocab, "max_seq": args.seq,
              "layers": args.layers, "heads": args.heads,
              "hidden": args.hidden}
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
    model = torch_gpt.GPT(config, torch_gpt.gpt2_init(config, seed=args.seed),
                          dtype=torch.float32).to(device)
    # Typical GPT training hyper-parameters; they do not affect the cost.
    optimizer = torch_gpt.make_optimizer(model, lr=3e-4, betas=(0.9, 0.95),
                                         eps=1e-8, weight_decay=0.1)
    inputs = torch.randint(0, args.vocab, (args.batch, args.seq)).to(device)
    targets = torch.randint(0, args.vocab, (args.batch, args.seq)).to(device)

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16,
                            enabled=args.autocast_bf16):
            _, loss = model(inputs, targets)
        loss.backward()
        if args.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        optimizer.step()
        return loss.detach()

    def sync():
        if cuda:
            torch.cuda.synchronize()

    # Losses are kept as tensors and read after the timed loop: .item() would synchronise.
    losses = []
    for _ in range(args.warmup):
        losses.append(train_step())
    sync()
    times_ms = []
    for _ in range(args.steps):
        sync()
        start = time.perf_counter()
        losses.append(train_step())
        sync()
        times_ms.append((time.perf_counter() - start) * 1e3)

    # ru_maxrss is in KiB on Linux.
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    openblas_threads = os.environ.get("OPENBLAS_NUM_THREADS", "unset")
    print(f"torch_ms={statistics.median(times_ms):.3f} "
          f"threads={torch.get_num_threads()} "
          f"openblas_threads={openblas_threads} "
          f"peak_rss_mb={peak_rss_mb:.1f}"
          + (f" peak_gpu_mb={torch.cuda.max_memory_allocated() / 2**20:.1f}"
             f" device={torch.cuda.get_device_name().replace(' ', '_')}"
             if cuda else "")
          + f" loss_first={losses[0].item():.4f} loss_last={losses[-1].item():.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
