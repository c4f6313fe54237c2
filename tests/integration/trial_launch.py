"""What the fault-trial scripts share (snapshot_trials.py, detect_trials.py): running `loom launch`
with fault variables, when each line of its output arrived, and the shared memory a trial's own
nodes left behind."""

import os
import re
import subprocess
import time


def launch(loom, job, cluster, env, log, timeout=400):
    """Runs loom launch with `env` added; its output goes to `log`, each line's arrival time (s
    from the start) to log + '.times'. Returns (exit status, seconds)."""
    e = dict(os.environ)
    e.update(env)
    e.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    t0 = time.time()
    p = subprocess.Popen([loom, "launch", job, "--cluster", cluster], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, env=e, text=True, bufsize=1)
    with open(log, "w") as f, open(log + ".times", "w") as times:
        for line in p.stdout:
            f.write(line)
            times.write("%.3f %s" % (time.time() - t0, line))
    rc = p.wait(timeout=timeout)
    return rc, time.time() - t0


def arrival(log, pattern):
    """When the first line of `log` matching `pattern` arrived (seconds from the start), or None."""
    for line in open(log + ".times"):
        t, _, text = line.partition(" ")
        if re.search(pattern, text):
            return float(t)
    return None


def leftovers(node_prefix):
    """The job objects in /dev/shm of nodes named <node_prefix><digits> (a trial's own: other
    tests' jobs, which ctest may run at the same time, have other node names)."""
    own = re.compile(r"^loom-[^-]+-" + re.escape(node_prefix) + r"\d+-")
    return sorted(f for f in os.listdir("/dev/shm") if own.match(f))
