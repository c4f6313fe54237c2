"""Watching a job (docs/OBSERVABILITY.md), with the real components: a Prometheus server started
here scrapes the coordinator of a 4-rank `loom launch` while it trains; its HTTP API's
loom_tokens_per_second and histogram_quantile of loom_step_seconds are checked against the job's
own log (the progress lines it printed, the step times it kept in its series file); `promtool
check metrics` finds nothing to warn about in a scrape; headless Chromium loads the live status
page and, after the job, the page `loom dashboard RUN_DIR` serves: screenshots are taken and the
drawn page must show every rank in the rank map and the charts with their series.

Usage: watch_test.py LOOM WORK_DIR TEXT   (run under tests/temp_dir.sh: temporary files in WORK_DIR)
"""

import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

loom, work, text = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)
    return ok


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def until(what, fn, timeout):
    """Polls fn() until it returns something true; fails the test naming `what` at the deadline."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            v = fn()
            if v:
                return v
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("FAIL: %s within %d s" % (what, timeout))


def chromium(url, name):
    """Loads `url` in headless Chromium: the DOM after its scripts ran and a screenshot."""
    # --single-process: with a zygote and helper processes, headless Chromium 156 on this VM
    # hangs in about half of the loads (measured: 5 of 5 loads drawn single-process, 2 of 5
    # otherwise). A load that still hangs is tried again, and said.
    base = ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--single-process",
            "--disable-dev-shm-usage", "--window-size=1200,1500"]
    png = os.path.join(work, name + ".png")
    loads = [0]

    def run(args):
        for attempt in range(3):
            # A profile of its own each time: one left locked by a killed Chromium would make
            # the next hand its page to the dead one and exit at once.
            loads[0] += 1
            profile = os.path.join(work, "chrome", "%s-%d" % (name, loads[0]))
            try:
                return subprocess.run(base + ["--user-data-dir=" + profile] + args,
                                      capture_output=True, text=True, timeout=40).stdout
            except subprocess.TimeoutExpired:
                print("note: Chromium hung loading %s (attempt %d)" % (url, attempt + 1))
        return ""

    # The page draws at load from the records built into it; the DOM is read after its
    # scripts ran (a virtual time budget, which screenshots hang on here).
    run(["--screenshot=" + png, url])
    dom = run(["--virtual-time-budget=4000", "--dump-dom", url])
    check(os.path.exists(png) and os.path.getsize(png) > 20000,
          "%s: screenshot %s taken (%d bytes)" % (name, png,
                                                  os.path.getsize(png) if os.path.exists(png) else 0))
    body = re.search(r"<body([^>]*)>", dom)
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body.group(1))) if body else {}
    return attrs


def check_page(name, attrs, world, dims, status=None, steps=None):
    if not check(attrs.get("rendered") == "1", "%s: the page drew itself (%s)" % (name, attrs)):
        return
    charts = json.loads(attrs["charts"].replace("&quot;", '"'))
    want = {"loss": 1, "throughput": 2, "step": 1, "comm": dims}
    check(charts == want, "%s: charts with their series %s (expected %s)" % (name, charts, want))
    check(attrs.get("rank-cells") == str(world),
          "%s: the rank map shows %s of %d ranks" % (name, attrs.get("rank-cells"), world))
    if status is not None:
        check(attrs.get("status") == status, "%s: status %s" % (name, attrs.get("status")))
    if steps is not None:
        check(attrs.get("steps") == str(steps), "%s: %s steps drawn" % (name, attrs.get("steps")))


# --- the job and the Prometheus server -----------------------------------------------------
metrics_port, prom_port, dash_port = free_port(), free_port(), free_port()
run_dir = os.path.join(work, "run")
# More steps than it will run: once Prometheus has scraped it for a while and Chromium has drawn
# its live page, the test stops it with SIGUSR1 (it saves and exits 138), so that how fast a
# step is here does not decide what the test sees.
steps = 200000
job = os.path.join(work, "job.yaml")
with open(job, "w") as f:
    f.write("""model: {vocab: 256, max_seq: 64, layers: 2, heads: 4, hidden: 128}
data: {text: %s, seq: 64, global_batch: 16, micro_batch: 4}
optimizer: {lr: 1.0e-3, grad_clip: 1.0}
parallel: {tp: 2, dp: 2, cp: 1, pp: 1, vpp: 1, zero: 1, sp: false}
steps: %d
seed: 3
eval: {batches: 1}
runtime: {threads: 1, log_every: 1}
checkpoint: {dir: %s, every: 100000}
metrics: {port: %d, run_dir: %s}
""" % (text, steps, os.path.join(work, "ckpt"), metrics_port, run_dir))
prom_dir = os.path.join(work, "prometheus")
os.makedirs(prom_dir)
with open(os.path.join(prom_dir, "prometheus.yml"), "w") as f:
    f.write("""global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: loom
    static_configs: [{targets: ["127.0.0.1:%d"]}]
""" % metrics_port)
prom = subprocess.Popen(
    ["prometheus", "--config.file=" + os.path.join(prom_dir, "prometheus.yml"),
     "--storage.tsdb.path=" + os.path.join(prom_dir, "data"),
     "--web.listen-address=127.0.0.1:%d" % prom_port, "--web.enable-lifecycle"],
    stdout=open(os.path.join(prom_dir, "log"), "w"), stderr=subprocess.STDOUT)
papi = "http://127.0.0.1:%d/api/v1/" % prom_port


def query(expr, at=None):
    q = {"query": expr}
    if at is not None:
        q["time"] = "%.3f" % at
    r = json.loads(get(papi + "query?" + urllib.parse.urlencode(q)))
    return r["data"]["result"]


def stop_prometheus():
    try:
        urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%d/-/quit" % prom_port,
                                                      method="POST"), timeout=10)
        prom.wait(timeout=30)
    except Exception:  # noqa: BLE001 - killed below
        pass
    if prom.poll() is None:
        prom.kill()
        prom.wait()


log_path = os.path.join(work, "launch.log")
launch = subprocess.Popen([loom, "launch", job, "--np", "4"], stdout=open(log_path, "w"),
                          stderr=subprocess.STDOUT)
try:
    until("Prometheus answering", lambda: get(papi + "query?query=up"), 60)
    murl = "http://127.0.0.1:%d" % metrics_port

    def step_now():
        m = re.search(r"^loom_step (\S+)$", get(murl + "/metrics"), re.M)
        return float(m.group(1)) if m else 0

    until("the coordinator's /metrics reaching step 5", lambda: step_now() >= 5, 180)
    scrape = get(murl + "/metrics")
    with open(os.path.join(work, "scrape.txt"), "w") as f:
        f.write(scrape)
    pt = subprocess.run(["promtool", "check", "metrics"], input=scrape, capture_output=True,
                        text=True)
    check(pt.returncode == 0 and not (pt.stdout + pt.stderr).strip(),
          "promtool check metrics: no warnings (%s)" % (pt.stdout + pt.stderr).strip())
    for name in ["loom_tokens_per_second", "loom_step_seconds_bucket", "loom_straggler_score",
                 "loom_rank_communication_wait_seconds", "loom_memory_bytes", "loom_rank_info"]:
        check(re.search("^" + name + r"[{ ]", scrape, re.M) is not None, "scrape has " + name)
    check(re.search(r'^loom_rank_info\{[^}]*rank="3"[^}]*\} 1', scrape, re.M) is not None,
          "loom_rank_info names rank 3 with its node and coordinates")
    until("Prometheus scraping a few steps",
          lambda: query("loom_step") and float(query("loom_step")[0]["value"][1]) >= 10, 60)
    t_first = time.time()
    time.sleep(15)  # 15 scrapes
    t_last = time.time() - 1
    live_dims = len({d for st in json.loads(get(murl + "/api/run.json"))["steps"]
                     for d in st["exposed_s"]})
    live = chromium(murl + "/", "live")
    check(launch.poll() is None, "the job still ran when its live page was loaded")
    check_page("live page", live, 4, live_dims, status="running")
    launch.send_signal(signal.SIGUSR1)
    rc = launch.wait(timeout=300)

    def series_at(expr):
        """`expr` evaluated every second from t_first to t_last: {time: value}."""
        q = {"query": expr, "start": "%.3f" % t_first, "end": "%.3f" % t_last, "step": "1"}
        r = json.loads(get(papi + "query_range?" + urllib.parse.urlencode(q)))["data"]["result"]
        return {float(t): float(v) for t, v in r[0]["values"]} if r else {}

    at_step = series_at("loom_step")
    at_tok = series_at("loom_tokens_per_second")
    at_count = series_at("loom_step_seconds_count")
    at_p50 = series_at("histogram_quantile(0.5, loom_step_seconds_bucket)")
    # (step, tokens/s, steps in the histogram, p50) as Prometheus had them, once per second
    samples = [(int(at_step[t]), at_tok[t], int(at_count[t]), at_p50[t])
               for t in sorted(at_step) if t in at_tok and t in at_count and t in at_p50]
finally:
    if launch.poll() is None:  # the test failed early: Ctrl-C, which removes the job's memory
        launch.send_signal(signal.SIGINT)
        try:
            launch.wait(timeout=30)
        except subprocess.TimeoutExpired:
            launch.kill()
            launch.wait()
    stop_prometheus()
out = open(log_path).read()
stopped = re.search(r"^stopped after step (\d+) of %d .* on SIGUSR1" % steps, out, re.M)
check(rc == 138 and stopped is not None,
      "loom launch saved and stopped on SIGUSR1 (exit %s): %s" % (rc, out.strip().splitlines()[-1]))
steps = int(stopped.group(1)) if stopped else 0
check("metrics at http://127.0.0.1:%d/metrics" % metrics_port in out,
      "loom launch printed where its metrics are")

# --- Prometheus' figures against the job's own log ------------------------------------------
printed = {int(m.group(1)): int(m.group(2))
           for m in re.finditer(r"^step +(\d+)/\d+ \| loss \S+ \| +(\d+) tok/s", out, re.M)}
series = [json.loads(line) for line in open(os.path.join(run_dir, "series.jsonl"))]
step_s = {r["step"]: r["step_s"] for r in series if r["kind"] == "step"}
check(sorted(step_s) == list(range(1, steps + 1)), "the series file kept every step once")
tok_s = {r["step"]: r["tokens_per_s"] for r in series if r["kind"] == "step"}
matched = 0
for step, tok, count, p50 in samples:
    check(abs(tok - tok_s[step]) <= 1e-9 * tok_s[step],
          "Prometheus' loom_tokens_per_second at step %d: %.3f, the series logged %.3f"
          % (step, tok, tok_s[step]))
    if step in printed:
        matched += 1
        check(round(tok) == printed[step],
              "Prometheus' loom_tokens_per_second at step %d: %.1f, the job printed %d tok/s"
              % (step, tok, printed[step]))
    check(count == step, "Prometheus' histogram counts %d steps at step %d" % (count, step))
    # The median step as the job logged steps 1..count, and the bucket it falls in: linear
    # interpolation inside the right bucket must land between the bucket's bounds.
    times = sorted(step_s[i] for i in range(1, count + 1))
    median = times[(len(times) - 1) // 2]
    bounds = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 120, math.inf]
    hi = next(b for b in bounds if median <= b)
    lo = ([0] + bounds)[bounds.index(hi)]
    check(lo <= p50 <= hi,
          "histogram_quantile(0.5) at step %d: %.4f s, in the bucket (%g, %g] of the logged "
          "median %.4f s" % (step, p50, lo, hi, median))
check(len(samples) >= 10 and matched >= 2,
      "%d Prometheus samples (one a second), %d at steps the job printed" % (len(samples), matched))

# --- the finished run's page ----------------------------------------------------------------
dash = subprocess.Popen([loom, "dashboard", run_dir, "--port", str(dash_port), "--for-s", "300"],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
first = dash.stdout.readline()
check("(%d steps, " % steps in first and "stopped" in first, "loom dashboard: " + first.strip())
done = chromium("http://127.0.0.1:%d/" % dash_port, "finished")
dims = len({d for r in series if r["kind"] == "step" for d in r["exposed_s"]})
check_page("finished run's page", done, 4, dims, status="stopped", steps=steps)
dash.send_signal(signal.SIGTERM)
check(dash.wait(timeout=30) == 0, "loom dashboard stops on SIGTERM")
bad = subprocess.run([loom, "dashboard", work], capture_output=True, text=True)
check(bad.returncode != 0 and "series.jsonl" in bad.stdout + bad.stderr,
      "loom dashboard of a directory without a series names the file: " +
      (bad.stdout + bad.stderr).strip())

print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
