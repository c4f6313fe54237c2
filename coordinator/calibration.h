// Calibration: how fast a device and its links really are, as opposed to their nominal figures in
// the cluster manifest. Written by `loom calibrate` (measured on this machine) or by hand for
// hardware we cannot measure (deploy/clusters/*.calibration.json, with the source of every
// number). JSON, documented in docs/PLANNER.md:
//   {"format": "loom-calibration", "version": 1, "source": "...", "precision": "fp32",
//    "compute": {"gemm_efficiency": 0.8, "attention_efficiency": 0.3,
//                "memory_bandwidth": 1.6e12, "op_overhead": 5e-6, "overlap_slowdown": 0.15,
//                "gemm": [{"m": 2048, "n": 768, "k": 256, "threads": 2, "flops": 1.9e11}, ...],
//                "attention": [{"seq": 256, "head_dim": 64, "threads": 2, "flops": 4e10}, ...],
//                "memory": [{"threads": 2, "bandwidth": 3.8e10}],
//                "optimizer": [{"threads": 2, "bandwidth": 1.7e10}],
//                "time_sharing": [{"ranks": 4, "cores": 2, "efficiency": 0.9}]},
//    "links": {"intra_node": {"latency": 5e-6, "bandwidth": 2.3e11},
//              "inter_node": {"latency": 8e-6, "bandwidth": 1.8e11},
//              "zero3_rank_bandwidth": 1.6e10},
//    "collectives": [{"op": "all_reduce", "ranks": 2, "bytes": 67108864, "seconds": 0.042}]}
// Every field is optional; what is absent falls back to the defaults below (and, for links, to
// the manifest's nominal figures). Collectives price the groups of their size inside a node
// (planner/comm_model.h). Repeated samples (merged runs) count by their median in the planner.
#pragma once

#include <string>
#include <vector>

#include "coordinator/cluster.h"
#include "core/status.h"

namespace loom {

// One measured GEMM: C[m, n] = A[m, k] B[k, n] on `threads` threads.
struct GemmSample {
  double m = 0, n = 0, k = 0;
  int threads = 1;
  double flops = 0;  // FLOP/s achieved (2mnk / time)
};

// One measured causal attention forward+backward over `seq` tokens of `head_dim`, expressed as
// FLOP/s of the full s x s square (so it prices the planner's attention FLOP count directly).
struct AttentionSample {
  double seq = 0, head_dim = 0;
  int threads = 1;
  double flops = 0;
};

// Measured throughput of memory-bound kernels for one rank running `threads` threads (while every
// other rank of the measurement ran too), in bytes moved per second.
struct MemorySample {
  int threads = 1;
  double bandwidth = 0;
};

// What sharing the cores costs the compute where more ranks than cores run at once: the ranks'
// total compute rate with all `ranks` computing on `cores` cores, over that of `cores` of them
// computing with a core each (the rates the compute samples hold). 1: time-sharing is free.
struct TimeSharingSample {
  int ranks = 0, cores = 0;
  double efficiency = 1;
};

struct CollectiveSample {
  std::string op;  // all_reduce | all_gather | reduce_scatter | send_recv
  int ranks = 0;
  double bytes = 0;
  double seconds = 0;
};

struct LinkCalibration {
  double latency = -1;    // seconds; < 0: not calibrated (manifest value)
  double bandwidth = -1;  // bytes/s; < 0: not calibrated (manifest value x default efficiency)
};

// Upper bound of Calibration::overlap_slowdown.
constexpr double kMaxOverlapSlowdown = 10;

struct Calibration {
  std::string source;  // where the numbers come from (host and date, or a citation)
  bool has_precision = false;
  Precision precision = Precision::kFp32;  // precision of the measured samples
  double gemm_efficiency = 0.7;            // fraction of peak reached by large GEMMs
  double attention_efficiency = 0.3;  // fraction of peak of fused attention (full-square FLOPs)
  double memory_efficiency = 0.7;     // fraction of the nominal memory bandwidth (if not measured)
  double memory_bandwidth = -1;       // measured bytes/s per device; < 0: nominal x efficiency
  double op_overhead = 5e-6;          // seconds per kernel (launch, synchronisation)
  // Compute seconds lost per second of transfer (its time alone) running alongside the compute.
  // On GPUs a fraction of the compute speed: NCCL's kernels hold SMs exclusively (one per
  // channel) and stream through the same memory. On CPU ranks the cores move the bytes
  // themselves and it can exceed 1 (loom calibrate measures it). 0: overlap is free.
  double overlap_slowdown = 0;
  double link_efficiency = 0.8;  // fraction of nominal link bandwidth (if not measured)
  std::vector<GemmSample> gemm;
  std::vector<AttentionSample> attention;
  std::vector<MemorySample> memory;  // per-rank figures; they take precedence over memory_bandwidth
  // Measured optimizer step (AdamW and the gradient norm) per rank, in the planner's bytes per
  // parameter (36 in fp32) per second; absent: memory-bound at the memory figures above.
  std::vector<MemorySample> optimizer;
  std::vector<TimeSharingSample> time_sharing;
  LinkCalibration intra, inter;
  // Bytes per second that one rank's ZeRO-3 parameter gathers and gradient reduce-scatters move
  // across nodes where the software bounds them below what the links carry (a ring over nodes
  // spreads over every NIC of a node; DeepSpeed's ZeRO-3 of 2021 moved ~16 GB/s per rank:
  // docs/PLANNER.md). < 0: the links alone.
  double zero3_rank_bandwidth = -1;
  std::vector<CollectiveSample> collectives;
};

Result<Calibration> LoadCalibration(const std::string& path);
// "" when `c`'s GEMM samples price a job of `job` precision (MakeHardware keeps them, and on GPU
// types the attention samples, only then; CPU attention runs fp32 in either precision);
// otherwise a sentence saying they were measured in another precision and what prices the job
// instead, for the reports of loom plan and loom launch.
std::string CalibrationPrecisionNote(const Calibration& c, Precision job);
// The world ranks that measure collectives of `size` ranks together with `rank` when `loom
// calibrate` runs under mpirun over `world` ranks: groups of `size` consecutive ranks, as many as
// fit, all measuring at once (as a job's groups run their collectives together, every rank busy);
// empty for the world % size ranks left over. 2 <= size <= world.
std::vector<int> CalibrationGroup(int rank, int world, int size);
// Serialises (pretty JSON) — the inverse of LoadCalibration.
std::string CalibrationToJson(const Calibration& c);

}  // namespace loom
