// Helpers shared by the planner tests: the shipped manifests and calibration, and jobs built in
// code (the Megatron-LM runs of Narayanan et al., SC'21).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "coordinator/calibration.h"
#include "coordinator/cluster.h"
#include "coordinator/plan_job.h"
#include "model/config.h"

namespace loom {

inline std::string SourcePath(const std::string& rel) {
  return std::string(LOOM_SOURCE_DIR) + "/" + rel;
}

inline Cluster LoadShippedCluster(const std::string& name) {
  Result<Cluster> c = LoadCluster(SourcePath("deploy/clusters/" + name));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : Cluster{};
}

inline Calibration LoadShippedCalibration(const std::string& name) {
  Result<Calibration> c = LoadCalibration(SourcePath("deploy/clusters/" + name));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : Calibration{};
}

// A GPT of Narayanan et al. 2021: vocabulary 51,200, sequence 2,048, bf16, dropout.
inline PlanJob MegatronJob(int64_t heads, int64_t hidden, int64_t layers, int64_t batch,
                           int64_t devices) {
  PlanJob j;
  j.model = ModelConfig{51200, 2048, layers, heads, hidden};
  j.seq = 2048;
  j.global_batch = batch;
  j.precision = Precision::kBf16;
  j.dropout = true;
  // Half-precision reductions and gathers on the wire (Megatron's fp16 in SC'21; the ZeRO-3
  // rows are DeepSpeed's fp16), where Loom's executor moves fp32.
  j.grad_comm_bytes = 2;
  j.param_comm_bytes = 2;
  j.mixed_precision_states = true;       // bf16 weights and gradients, sharded fp32 master
  j.mixed_precision_activations = true;  // Korthikanti et al.'s 2-byte activations
  j.devices = devices;
  return j;
}

// Fixes the published layout: tp, pp, the rest data-parallel, micro-batch 1, full recompute,
// interleaved schedule when pipelined (vpp left to the planner: the paper does not give it),
// no ZeRO, no sequence parallelism.
inline PlanJob Published(PlanJob j, int tp, int pp) {
  j.tp = tp;
  j.pp = pp;
  j.cp = 1;
  j.dp = j.devices / (tp * pp);
  j.micro_batch = 1;
  j.recompute = Recompute::kFull;
  j.zero = 0;
  j.sp = false;
  if (pp > 1) j.schedule = ScheduleKind::kInterleaved;
  return j;
}

// SC'21 table 2's "ZeRO-3 without model parallelism": dp = every GPU, ZeRO 3, micro-batch =
// batch / GPUs, full recompute.
inline PlanJob Zero3Job(int64_t heads, int64_t hidden, int64_t layers, int64_t batch,
                        int64_t devices) {
  PlanJob j = Published(MegatronJob(heads, hidden, layers, batch, devices), 1, 1);
  j.zero = 3;
  j.micro_batch = batch / devices;
  return j;
}

}  // namespace loom
