#!/usr/bin/env bash
# In-memory snapshots, every figure of docs/SNAPSHOTS.md in one run (about 15 minutes here):
#   1. mpirun -np 2 snapshot_bench: step time with snapshots at K = 1 and K = 4 against none
#      (what part is copy, encode, transfer), RS encode against raw ec_encode_data, decode, bulk
#      put bandwidth over UCX and over MPI;
#   2. ucx_perftest's put bandwidth on the same machine and transports, beside ours;
#   3. restarts under loom launch, 4 ranks on 4 logical nodes, RS(2,1), the benchmark model:
#      seconds from a worker crash to the first new step, and from the loss of a node (its
#      state rebuilt by RS decoding on a spare) to the first new step;
#   4. effective training time ratio (training time / wall time) of a run with one worker
#      killed (kill -9) every minute;
#   5. 100 seeded fault trials (tests/integration/snapshot_trials.py).
# Usage: bench/snapshot_bench.sh [BUILD_DIR] [ETTR_MINUTES]   Last lines:
#   trials=... recovered=... max_lost_steps=... bitexact=... failed=...
#   snapshot_overhead_k1=... snapshot_overhead_k4=... snapshot_cost_k1=... snapshot_cost_k4=...
#   ec_vs_raw=... recover_crash_s=... recover_node_s=... ettr=...
# (overhead: measured step time against none, settings interleaved; cost: the upper bound by
# accounting, every ms of the snapshot writer's work taken from compute.)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
minutes=${2:-3}
loom=$build/loom
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
if [[ -n ${LOOM_BENCH_KEEP:-} ]]; then echo "logs kept in $work"; else trap 'rm -rf "$work"' EXIT; fi
export TMPDIR=$work OMPI_MCA_btl_vader_backing_directory=$work

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
value() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }

# 1. Overhead, coding, transfer.
mpirun --oversubscribe -np 2 "$build/bench/snapshot_bench" | tee "$work/bench.out"
last=$(tail -1 "$work/bench.out")

# 2. ucx_perftest on the same machine (server and client on this host).
perf=""
if command -v ucx_perftest >/dev/null; then
  port=$((20000 + RANDOM % 20000))
  ucx_perftest -p "$port" >/dev/null 2>&1 &
  server=$!
  sleep 1  # the server's listening socket (ucx_perftest has no readiness signal)
  perf=$(ucx_perftest -p "$port" 127.0.0.1 -t ucp_put_bw -s 67108864 -n 20 -w 2 2>/dev/null |
         awk '/Final:/ {print $(NF-2)}' | tail -1) || true
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  echo "ucx_perftest ucp_put_bw 64 MiB on this host: ${perf:-?} MB/s;" \
       "ours over UCX: $(value "$last" put_ucx_gbs) GB/s"
fi

# 3. Restarts of the benchmark model on 4 logical nodes (and a spare).
cat > "$work/cluster.yaml" <<'EOF'
name: logical-nodes
device_types:
  cpu-core: {memory: 4e9, peak_flops: {fp32: 30e9}, memory_bandwidth: 5e9, kernels: fused,
             shared_cores: true}
nodes:
  - {name: "n{}", count: 5, host: localhost, devices: 1, type: cpu-core}
links:
  intra_node: {bandwidth: 5e9, latency: 1e-6}
  inter_node: {bandwidth: 2e9, latency: 5e-6}
spare: [n4]
EOF
job() {  # $1: steps, $2: file
  cat > "$2" <<EOF
model: {vocab: 256, max_seq: 256, layers: 4, heads: 8, hidden: 256}
data: {text: $root/data/tinyshakespeare.txt, seq: 256, global_batch: 8, micro_batch: 2}
optimizer: {lr: 1.0e-4}
steps: $1
eval: {every: 0, batches: 1}
runtime: {threads: 1, log_every: 1}
parallel: {tp: 1, pp: 1, dp: 4, zero: 1}
snapshot: {every: 1, k: 2, m: 1, max_restarts: 100}
EOF
}
job 14 "$work/restart.yaml"
recover() {  # fault variables; prints "seconds restore_seconds"
  env "$@" "$loom" launch "$work/restart.yaml" --cluster "$work/cluster.yaml" > "$work/r.out" 2>&1
  grep -o 'training again [0-9.]* s after the failure (restore [0-9.]* s)' "$work/r.out" |
    awk '{print $3, substr($9, 1)}'
}
crash=$(recover LOOM_FAULT_KILL=2:8)
node=$(recover LOOM_FAULT_NODE_DROP=n1:8)
echo "restart after a worker crash: ${crash%% *} s to the first new step (restore ${crash#* } s)"
echo "restart after a lost node (rebuilt on the spare): ${node%% *} s (restore ${node#* } s);" \
     "decode $(value "$last" decode_gbs) GB/s per core"

# 4. Effective training time ratio with a worker killed every minute.
job 100000 "$work/ettr.yaml"
sed -i 's/^steps: .*/steps: 100000/' "$work/ettr.yaml"
"$loom" launch "$work/ettr.yaml" --cluster "$work/cluster.yaml" > "$work/ettr.out" 2>&1 &
launcher=$!
start=$(date +%s.%N)
for m in $(seq "$minutes"); do
  sleep 60
  victim=$(pgrep -f "loom worker" | shuf -n 1 || true)
  [[ -n $victim ]] && kill -9 "$victim" && echo "minute $m: killed worker pid $victim"
done
sleep 5  # the last restart's first steps
kill -INT "$launcher"
wait "$launcher" || true
end=$(date +%s.%N)
# Steps trained (the last complete one), the median healthy step time, the wall time.
steps=$(grep -o 'step *[0-9]*/100000' "$work/ettr.out" | tail -1 | grep -o '[0-9]*/' | tr -d /)
ms=$(grep -o '[0-9.]* ms/step' "$work/ettr.out" | awk '{print $1}' | sort -n |
     awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
restarts=$(grep -c 'recovered from' "$work/ettr.out" || true)
ettr=$(awk -v s="${steps:-0}" -v ms="${ms:-0}" -v a="$start" -v b="$end" \
       'BEGIN {printf "%.3f", s * ms / 1000 / (b - a)}')
echo "ETTR over $minutes min with a worker killed each minute: $steps steps x ${ms} ms =" \
     "$ettr of the wall time ($restarts restarts)"

# 5. 100 fault trials.
/usr/bin/python3 "$root/tests/integration/snapshot_trials.py" "$loom" "$work/trials" \
  "$root/data/tinyshakespeare.txt" --trials 100 --seed 7 > "$work/trials.out" || true
grep -E "FAILED" "$work/trials.out" || true
tail -1 "$work/trials.out"
echo "snapshot_overhead_k1=$(value "$last" overhead_k1) snapshot_overhead_k4=$(value "$last" overhead_k4)" \
     "snapshot_cost_k1=$(value "$last" cost_k1) snapshot_cost_k4=$(value "$last" cost_k4)" \
     "ec_vs_raw=$(value "$last" ec_vs_raw) recover_crash_s=${crash%% *} recover_node_s=${node%% *}" \
     "ettr=$ettr"
