// The effective speed of one rank and of the links between ranks, for one job precision: the
// manifest's nominal figures combined with a calibration. Prices GEMMs (measured samples when the
// calibration has them, else a roofline at calibrated efficiency), fused attention and
// memory-bound kernels. Pure code.
#pragma once

#include <vector>

#include "coordinator/calibration.h"
#include "coordinator/cluster.h"
#include "coordinator/planner/comm_model.h"
#include "coordinator/planner/model_math.h"

namespace loom {

struct Hardware {
  DeviceType type;
  Precision precision = Precision::kBf16;
  int devices_per_rank = 1;   // > 1 only for CPU cores shared by fewer ranks than cores
  double peak = 0;            // FLOP/s of one rank in the job's precision
  double attention_peak = 0;  // for attention (CPU ranks: fp32's, which Loom runs it in); 0: peak
  double memory = 0;          // bytes of one rank
  double gemm_efficiency = 0.7;
  double attention_efficiency = 0.3;
  double memory_bandwidth = 0;  // effective bytes/s of one rank
  // Optimizer step (AdamW and gradient norm) in the time model's bytes per parameter per second;
  // 0: memory_bandwidth.
  double optimizer_bandwidth = 0;
  double op_overhead = 0;                  // seconds per kernel
  std::vector<GemmSample> gemm;            // samples for this precision and thread count
  std::vector<AttentionSample> attention;  // idem
  LinkSpec intra;                          // effective, per device
  LinkSpec inter;                          // effective, per node
  // The runtime's collectives measured inside one node (calibration collectives[]); groups of a
  // measured size are priced with them instead of intra's alpha and bandwidth.
  MeasuredCollectives collectives;
  double link_efficiency = 1;  // applied to nominal inter-node figures (not to measured ones)
  // Compute seconds lost per second of transfer running alongside it (calibration.h).
  double overlap_slowdown = 0;
  // Seconds a synchronising collective waits for its latest member beyond the transfer, for the
  // job's rank count (calibration collectives[] "sync_wait"; comm_model.h GroupPath); 0: none.
  double sync_wait = 0;
  // Where ranks time-share cores (DeviceType::core_share < 1): the fraction of the cores' compute
  // the ranks keep (calibration compute.time_sharing, for the job's rank count), applied with the
  // core share to every compute rate; 1: not measured or not shared.
  double time_sharing = 1;
  // Bytes/s one rank's ZeRO-3 transfers move across nodes at most (calibration.h); 0: no bound.
  double zero3_rank_bandwidth = 0;

  // Seconds for `g` with `element_bytes` operands: the nearest measured sample's rate, else
  // max(flops / (peak * efficiency), bytes / memory bandwidth), plus one kernel overhead.
  double GemmTime(const GemmShape& g, int element_bytes) const;
  // Seconds of a fused (flash-style) attention with `flops` counted over the full square.
  double AttentionTime(double flops, double seq, double head_dim) const;
  // Seconds to stream `bytes` through memory (element-wise kernels), without overhead.
  double MemoryTime(double bytes) const { return bytes / memory_bandwidth; }
};

// Builds the rank model for device type `type` of `cluster`. `devices_per_rank` > 1 scales peak,
// memory and bandwidth (CPU cores shared by fewer ranks); samples are kept when their precision
// matches and their thread count equals devices_per_rank (if none does, all of them, rescaled).
// Samples of the same shape (a file merged from repeated runs of loom calibrate) count by their
// median, and so do memory and optimizer figures of the same thread count.
Hardware MakeHardware(const Cluster& cluster, int type, const Calibration& cal, Precision precision,
                      int devices_per_rank);

}  // namespace loom
