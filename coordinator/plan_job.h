// What the planner needs from a job (job/job_config.h, docs/JOB.md): the model, the batch, the
// planner's settings (`plan:`, docs/PLANNER.md), and which parts of the layout the user has
// fixed. Fields under `parallel:` that are present are fixed; absent ones are the planner's to
// choose. A view computed from the one parsed JobConfig, never read from YAML itself.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/precision.h"
#include "core/status.h"
#include "job/job_config.h"
#include "model/config.h"
#include "parallel/pipeline/schedule.h"

namespace loom {

struct PlanJob {
  std::string file;
  ModelConfig model;
  int64_t seq = 0;           // tokens per sequence
  int64_t global_batch = 0;  // sequences per optimizer step
  Precision precision = Precision::kFp32;
  double headroom = 0.1;             // fraction of device memory kept free
  int64_t devices = 0;               // use at most this many devices (0: every usable one)
  bool selective_recompute = false;  // may the search choose selective recompute?
  bool dropout = false;  // the model applies dropout (Megatron's GPT does; Loom's does not)
  bool overlap = true;   // parallel.overlap: DP reductions overlap the backward
  // Bytes per parameter of the data-parallel traffic under bf16: gradient reductions
  // (all-reduce, reduce-scatter) and parameter gathers (ZeRO 1-2's after the update, ZeRO 3's
  // per layer). 0: what Loom moves, 4 each (it keeps, reduces and gathers them in fp32; the bf16
  // copies are made where they are used); 2 for software that moves half precision (Megatron's
  // fp16 reductions, DeepSpeed's fp16 ZeRO, FSDP's bf16 gathers) in published runs. fp32 jobs
  // move 4 whatever these say.
  double grad_comm_bytes = 0, param_comm_bytes = 0;
  // Model states in memory: false, as Loom's executor keeps them (fp32 parameters and
  // gradients, plus bf16 weight copies under bf16); true, mixed precision's 2 + 2 + 12 bytes a
  // parameter of Megatron and DeepSpeed (published runs). The same under fp32.
  bool mixed_precision_states = false;
  // Activations in memory: false, as Loom's executor keeps them under bf16 (only the GEMM inputs
  // in bf16: memory_model.h); true, every kept tensor in bf16 as Megatron-LM (published runs).
  bool mixed_precision_activations = false;
  // runtime.vocab_chunk: vocabulary rows of the logits chunk Loom's chunked loss keeps (priced with
  // Loom's activations, not with mixed_precision_activations).
  int64_t vocab_chunk = 4096;
  // Fixed choices; nullopt means "the planner chooses".
  std::optional<int64_t> micro_batch, tp, cp, pp, vpp, dp, zero;
  std::optional<bool> sp;
  std::optional<int64_t> first_stage_layers, last_stage_layers;
  std::optional<ScheduleKind> schedule;
  std::optional<Recompute> recompute;

  // True when tp, cp, pp and dp are all fixed (the world size is then their product).
  bool FullyFixed() const { return tp && cp && pp && dp; }
};

// The planner's view of a parsed job (its schedule name was checked by the parser).
PlanJob PlanJobOf(const JobConfig& job);
// Reads `path` for planning (JobUse::kPlan) and returns its planner view.
Result<PlanJob> LoadPlanJob(const std::string& path);

}  // namespace loom
