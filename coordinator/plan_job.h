// What the planner needs from a job file (the job.yaml of `loom train`, docs/JOB.md): the model
// shape, the batch, and which parts of the layout the user has fixed. Fields under `parallel:`
// that are present are fixed; absent ones are the planner's to choose. Planner-only settings live
// in an optional top-level `plan:` section (docs/PLANNER.md). Sections and keys that only
// `loom train` uses (optimizer, eval, data.text, ...) are left to it and ignored here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "coordinator/cluster.h"
#include "core/status.h"
#include "parallel/pipeline/schedule.h"

namespace loom {

// GPT-2 style decoder shape (ffn = 4 * hidden, tied embeddings, learned positions).
struct ModelShape {
  int64_t vocab = 0;
  int64_t max_seq = 0;  // rows of the position table
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t hidden = 0;
  int64_t ffn() const { return 4 * hidden; }
  int64_t head_dim() const { return hidden / heads; }
};

enum class RecomputeMode { kNone, kSelective, kFull };
const char* RecomputeModeName(RecomputeMode r);
Result<RecomputeMode> ParseRecomputeMode(const std::string& name);  // none | selective | full

struct PlanJob {
  std::string file;
  ModelShape model;
  int64_t seq = 0;           // tokens per sequence
  int64_t global_batch = 0;  // sequences per optimizer step
  Precision precision = Precision::kFp32;
  double headroom = 0.1;             // fraction of device memory kept free
  int64_t devices = 0;               // use at most this many devices (0: every usable one)
  bool selective_recompute = false;  // may the search choose selective recompute?
  bool dropout = false;  // the model applies dropout (Megatron's GPT does; Loom's does not)
  bool overlap = true;   // parallel.overlap: DP reductions overlap the backward
  // Fixed choices; nullopt means "the planner chooses".
  std::optional<int64_t> micro_batch, tp, cp, pp, vpp, dp, zero;
  std::optional<bool> sp;
  std::optional<ScheduleKind> schedule;
  std::optional<RecomputeMode> recompute;

  // True when tp, cp, pp and dp are all fixed (the world size is then their product).
  bool FullyFixed() const { return tp && cp && pp && dp; }
};

Result<PlanJob> LoadPlanJob(const std::string& path);

}  // namespace loom
