// Runs the per-rank instruction lists of a Schedule against per-instruction costs and returns the
// step time, each rank's bubble, and the peak number of micro-batch chunks whose activations a
// rank holds. Sends are asynchronous; a receive waits until its message has arrived (send time +
// latency + bytes / bandwidth). It detects deadlocks (receives that can never be satisfied, or
// ranks waiting on each other) and messages sent but never received, naming the instructions.
// Pure code: the planner uses it to price layouts, `loom schedule` to draw them.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "parallel/pipeline/schedule.h"

namespace loom {

struct PipelineCosts {
  double forward = 1.0;          // one micro-batch through one local chunk
  double backward = 2.0;         // kBackward (input + weight gradients)
  double backward_input = 1.0;   // kBackwardInput (zero-bubble split)
  double backward_weight = 1.0;  // kBackwardWeight
  double optimizer = 0.0;
  double p2p_latency = 0.0;    // seconds (or any unit) per transfer
  double p2p_bytes = 0.0;      // bytes per activation / gradient transfer
  double p2p_bandwidth = 0.0;  // bytes per unit of time (0: transfers are free)
  // Per global chunk, a factor on its forward and backward costs (uneven stages: its layers
  // over the average); empty: every chunk 1.
  std::vector<double> chunk_scale;
};

struct TimedInstr {
  Instr instr;
  double start = 0, end = 0;
};

struct SimResult {
  double step_time = 0;             // makespan over all ranks
  std::vector<double> busy;         // compute time per rank
  std::vector<double> bubble;       // per rank: (step_time - busy) / busy
  std::vector<int> peak_in_flight;  // per rank: max forwards whose backward is pending
  std::vector<std::vector<TimedInstr>> timeline;  // compute instructions per rank, in time order
  double max_bubble() const;
};

Result<SimResult> Simulate(const Schedule& schedule, const PipelineCosts& costs);

// A text chart of the timeline, one row per rank: each instruction spans a width proportional to
// its duration and starts with its label (F<mb>, B<mb>, I<mb>, W<mb>, with .<chunk> when
// vpp > 1); blanks are bubbles. At least `width` characters wide, wider when the shortest
// instruction needs room for its label.
std::string RenderTimeline(const Schedule& schedule, const SimResult& result, int width = 80);

}  // namespace loom
