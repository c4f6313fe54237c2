#!/usr/bin/env python3
"""Seeded fault trials of in-memory snapshots under `loom launch` (docs/SNAPSHOTS.md).

8 ranks on 4 logical nodes of this host (tp=2, dp=4), snapshots every step, RS(2,1) over the
nodes. Each trial injects one failure through fault/inject (LOOM_FAULT_*), drawn from the seed:
  kill      kill -9 of a random rank before a random step
  copy, encode, transfer
            kill -9 of a random rank while its snapshot of a random step is copied into shared
            memory, erasure-coded, or sent to its peers
  corrupt   a random rank's snapshot pieces are found corrupted by the restore (and another rank
            is killed, so that there is a restore): rebuilt from their rows
  delay     a random rank's fragments are sent late (a slow link, 40 ms before each transfer)
            and another rank is killed
  spare     a random node is lost (its ranks killed, its shared memory removed); a spare node of
            the manifest takes its place and its ranks' state is rebuilt by RS decoding
  replan    a random node is lost and there is no spare: the planner replans on the 3 survivors
  double    two nodes of one stripe group are lost (more than m = 1): the restart falls back to
            the last universal checkpoint, saying why
Every trial must finish (exit 0), report its recovery source (the expected kind), recompute at
most one step (except `double`, which goes back to the checkpoint), leave nothing in /dev/shm,
and end with final parameters bit-identical to an uninterrupted run (same layout), or within
1e-5 of it (a replanned layout).

Usage: snapshot_trials.py LOOM WORKDIR DATA [--trials N] [--seed S]
The last line: trials=... recovered=... max_lost_steps=... bitexact=... failed=...
"""

import argparse
import os
import random
import re
import shutil
import subprocess
import sys

import trial_launch

JOB = """model: {{vocab: 257, max_seq: 64, layers: 2, heads: 4, hidden: 64}}
data: {{text: {data}, seq: 32, global_batch: 24}}
optimizer: {{lr: 1.0e-3, grad_clip: 1.0}}
schedule: {{warmup_steps: 2}}
steps: 12
seed: 7
eval: {{batches: 1}}
runtime: {{threads: 1}}
parallel: {{tp: 2, dp: 4}}
snapshot: {{every: 1, k: 2, m: 1}}
checkpoint: {{dir: ck, every: 4, final: true}}
"""

CLUSTER = """name: logical-nodes
device_types:
  cpu-core:
    memory: 2e9
    peak_flops: {{fp32: 30e9}}
    memory_bandwidth: 5e9
    kernels: fused
    shared_cores: true
nodes:
  - name: st{{}}
    count: {count}
    host: localhost
    devices: 2
    type: cpu-core
links:
  intra_node: {{bandwidth: 5e9, latency: 1e-6}}
  inter_node: {{bandwidth: 2e9, latency: 5e-6}}
{spare}"""

# The mix of a run of 30; longer runs repeat it.
MIX = (["kill"] * 7 + ["copy"] * 3 + ["encode"] * 3 + ["transfer"] * 3 + ["spare"] * 5 +
       ["replan"] * 3 + ["corrupt"] * 3 + ["delay"] * 1 + ["double"] * 2)

RECOVERED = re.compile(r"restart 1 recovered from (.*) \| (\d+) steps? recomputed")


def trial_env(kind, rng):
    """The fault variables of a trial, and what the recovery must say."""
    rank, step = rng.randrange(8), rng.randrange(3, 11)
    node = "st%d" % rng.randrange(4)
    if kind == "kill":
        return {"LOOM_FAULT_KILL": "%d:%d" % (rank, step)}, "local memory"
    if kind in ("copy", "encode", "transfer"):
        return {"LOOM_FAULT_KILL": "%d:%d:%s" % (rank, step, kind)}, "local memory"
    if kind == "corrupt":
        other = (rank + 1 + rng.randrange(7)) % 8
        return ({"LOOM_FAULT_SNAPSHOT_CORRUPT": str(rank),
                 "LOOM_FAULT_KILL": "%d:%d" % (other, step)}, "1 rebuilt by erasure decoding")
    if kind == "delay":
        other = (rank + 1 + rng.randrange(7)) % 8
        return ({"LOOM_FAULT_SNAPSHOT_DELAY": "%d:40" % rank,
                 "LOOM_FAULT_KILL": "%d:%d" % (other, step)}, "local memory")
    if kind in ("spare", "replan"):
        return {"LOOM_FAULT_NODE_DROP": "%s:%d" % (node, step)}, "2 rebuilt by erasure decoding"
    # Two nodes of one stripe group (every group spans all four nodes).
    a, b = rng.sample(range(4), 2)
    # (After step 8, the step-4 checkpoint committed: these trials save synchronously, main().)
    return {"LOOM_FAULT_NODE_DROP": "st%d,st%d:%d" % (a, b, max(step, 8))}, "checkpoint"


def leftovers():
    # This test's objects: its nodes are named st0..st4, so that other tests' jobs, which ctest
    # may run at the same time, are not counted.
    return trial_launch.leftovers("st")


def launch(loom, job, cluster, env, log):
    return trial_launch.launch(loom, job, cluster, env, log, timeout=240)


def diff(loom, ref, ck, replanned):
    cmd = [loom, "ckpt", "diff", ref, ck]
    if replanned:
        cmd[3:3] = ["--weights-only", "--atol", "1e-5"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    return out.returncode == 0, (out.stdout + out.stderr).strip().splitlines()[-1:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("loom")
    ap.add_argument("workdir")
    ap.add_argument("data")
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    loom = os.path.abspath(a.loom)
    os.makedirs(a.workdir, exist_ok=True)
    w = os.path.abspath(a.workdir)
    data = os.path.abspath(a.data)
    for name, count, spare in (("cluster5.yaml", 5, "spare: [st4]\n"), ("cluster4.yaml", 4, "")):
        with open(os.path.join(w, name), "w") as f:
            f.write(CLUSTER.format(count=count, spare=spare))
    before = leftovers()

    # The uninterrupted run every trial is compared with.
    ref_dir = os.path.join(w, "reference")
    shutil.rmtree(ref_dir, ignore_errors=True)
    os.makedirs(ref_dir)
    with open(os.path.join(ref_dir, "job.yaml"), "w") as f:
        f.write(JOB.format(data=data))
    rc, _ = launch(loom, os.path.join(ref_dir, "job.yaml"), os.path.join(w, "cluster4.yaml"), {},
                   os.path.join(ref_dir, "log"))
    if rc != 0:
        print(open(os.path.join(ref_dir, "log")).read())
        print("the uninterrupted reference run failed (exit %d)" % rc)
        return 1
    ref = os.path.join(ref_dir, "ck")

    rng = random.Random(a.seed)
    kinds = [MIX[i % len(MIX)] for i in range(a.trials)]
    recovered = bitexact = failed = 0
    max_lost = 0
    seconds = []
    for i, kind in enumerate(kinds):
        env, expect = trial_env(kind, rng)
        d = os.path.join(w, "trial%03d" % i)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        with open(os.path.join(d, "job.yaml"), "w") as f:
            job = JOB.format(data=data)
            if kind == "double":
                # The fallback is the subject, not asynchronous saving: saved synchronously, the
                # step-4 checkpoint is committed before step 5 whatever the machine's load (an
                # asynchronous one was still being written at step 9 on a loaded 2-core VM).
                job = job.replace("final: true}", "final: true, async: false}")
            f.write(job)
        cluster = os.path.join(w, "cluster5.yaml" if kind == "spare" else "cluster4.yaml")
        log = os.path.join(d, "log")
        rc, secs = launch(loom, os.path.join(d, "job.yaml"), cluster, env, log)
        seconds.append(secs)
        text = open(log).read()
        m = RECOVERED.search(text)
        problems = []
        if rc != 0:
            problems.append("exit %d" % rc)
        if m is None:
            problems.append("no recovery line")
        else:
            recovered += 1
            source, lost = m.group(1), int(m.group(2))
            if expect not in source:
                problems.append("recovered from '%s', expected '%s'" % (source, expect))
            if kind != "double":
                max_lost = max(max_lost, lost)
                if lost > 1:
                    problems.append("%d steps recomputed" % lost)
        replanned = kind in ("replan", "double")
        same, last = diff(loom, ref, os.path.join(d, "ck"), replanned)
        if not same:
            problems.append("final parameters differ: %s" % " ".join(last))
        elif not replanned:
            bitexact += 1
        left = [f for f in leftovers() if f not in before]
        if left:
            problems.append("left in /dev/shm: %s" % " ".join(left))
        status = "ok" if not problems else "FAILED: " + "; ".join(problems)
        print("trial %3d %-8s %-55s %5.1f s  %s" %
              (i, kind, " ".join("%s=%s" % kv for kv in sorted(env.items())), secs, status))
        sys.stdout.flush()
        if problems:
            failed += 1
            print("  --- its log (%s) ---" % log)
            print("  " + text.replace("\n", "\n  "))
        else:
            shutil.rmtree(d, ignore_errors=True)
    print("trials=%d recovered=%d max_lost_steps=%d bitexact=%d failed=%d median_s=%.1f" %
          (len(kinds), recovered, max_lost, bitexact, failed, sorted(seconds)[len(seconds) // 2]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
