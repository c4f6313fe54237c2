// The measurements behind `loom calibrate` (cli/calibrate_command.cc): what the runtime pays for
// a job's kernels on this machine, and, under mpirun, for its collectives and for overlapping
// transfers with compute. Every function adds its samples to a Calibration
// (coordinator/calibration.h; the meaning of each figure: docs/PLANNER.md, "Calibration").
#pragma once

#include <cstdint>
#include <vector>

#include "comm/backend.h"
#include "coordinator/calibration.h"
#include "coordinator/plan_job.h"
#include "core/status.h"

namespace loom {

// Operands are rotated through this many copies: in a training step a layer's weights and
// inputs were last touched a whole layer earlier, not by the previous call.
constexpr int kCalibrationCopies = 4;

// kCalibrationCopies buffers of `n` floats spread over [-scale, scale] (a fixed pseudo-random
// pattern): constant inputs make attention scores all equal and its backward run on near-zero
// values, which is not the speed of training (up to 1.4x slower here).
std::vector<std::vector<float>> SpreadCopies(int64_t n, float scale);

// GEMMs of the job's linear layers and head (tp splits up to `max_tp`, micro-batches 1..16),
// fused attention, the element-wise work of a layer, the optimizer step and the fixed cost of a
// kernel, on `threads` threads (already configured). Every sample is measured in `passes` passes
// over all of them, `secs` / passes each, and its median pass kept: with two threads this VM's
// speed swings by a third within seconds (both vCPUs must run for a parallel region to finish),
// and one slow second then hits a few samples, not one sample entirely. Without a job: a ladder
// of square GEMMs and default sizes. GEMMs run in job->precision as the runtime runs them
// (loom calibrate sets it to the precision the job trains in); attention and the element-wise
// kernels in fp32, as they run in either precision on CPU. Errors: Unimplemented for bf16 in a
// build without oneDNN.
Status MeasureCompute(const PlanJob* job, int threads, int max_tp, double secs, int passes,
                      Calibration* cal);

// Under mpirun (every rank calls it): all-reduce, all-gather, reduce-scatter for groups of
// 2..world ranks and send/recv exchanges between two, from 4 KiB to `max_bytes` (x4 steps), every
// group size measured by as many disjoint groups at once as the world holds; the intra-node link
// fit from the two-rank all-reduce; the overlap slowdown (two ranks, every pair at once); the
// wait per synchronisation among all `world` ranks computing between collectives ("sync_wait");
// with more ranks than the node's cores, what sharing them costs the compute (time_sharing).
// Only rank 0's `cal` is complete for what groups it belongs to (one of each size).
Status MeasureComm(Backend& backend, int64_t max_bytes, const PlanJob* job, Calibration* cal);

}  // namespace loom
