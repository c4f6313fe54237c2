// `loom schedule`: generate a pipeline schedule, simulate it and draw the timeline per rank.
//   loom schedule --pp 4 --vpp 2 --microbatches 8 --schedule interleaved
//   loom schedule --pp 4 --layers 30 --first-stage-layers 6 --last-stage-layers 6   (uneven)
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"
#include "parallel/layout.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/pipeline/simulator.h"

namespace loom {
namespace {

struct ScheduleOptions {
  int pp = 4, vpp = 1, micro = 8, width = 80;
  std::string schedule = "1f1b";
  double forward = 1.0, backward = 2.0, latency = 0.0;
  int layers = 0, first_stage_layers = 0, last_stage_layers = 0;  // uneven stages
};

Status RunSchedule(const ScheduleOptions& o) {
  LOOM_ASSIGN_OR_RETURN(ScheduleKind kind, ParseScheduleKind(o.schedule));
  LOOM_ASSIGN_OR_RETURN(Schedule s, MakeSchedule(kind, o.pp, o.vpp, o.micro));
  PipelineCosts c;
  // Costs are per micro-batch through a whole stage; a virtual chunk does 1/vpp of the work.
  c.forward = o.forward / o.vpp;
  c.backward = o.backward / o.vpp;
  c.backward_input = c.backward / 2;
  c.backward_weight = c.backward / 2;
  c.p2p_latency = o.latency;
  std::string stages;
  if (o.layers > 0 || o.first_stage_layers > 0 || o.last_stage_layers > 0) {
    if (o.layers <= 0) return InvalidArgument("--first/last-stage-layers need --layers");
    Layout l;
    l.pp = o.pp;
    l.vpp = o.vpp;
    l.first_stage_layers = o.first_stage_layers;
    l.last_stage_layers = o.last_stage_layers;
    LOOM_ASSIGN_OR_RETURN(std::vector<int> per, l.ChunkLayers(o.layers));
    // --forward/--backward are for a stage of the average size; a chunk's cost follows its layers.
    const double mean = static_cast<double>(o.layers) / static_cast<double>(per.size());
    for (int n : per) c.chunk_scale.push_back(n / mean);
    stages = " | layers per chunk";
    for (int n : per) stages += " " + std::to_string(n);
  }
  LOOM_ASSIGN_OR_RETURN(SimResult r, Simulate(s, c));
  std::printf(
      "schedule %s: pp=%d vpp=%d micro-batches=%d | forward %.2f, backward %.2f per stage, "
      "p2p latency %.2f%s\n",
      ScheduleKindName(kind), o.pp, o.vpp, o.micro, o.forward, o.backward, o.latency,
      stages.c_str());
  std::printf(
      "legend: F<mb> forward, B<mb> backward, I<mb>/W<mb> input/weight gradient%s; "
      "blank = bubble\n\n",
      o.vpp > 1 ? ", .<chunk> local virtual stage" : "");
  std::fputs(RenderTimeline(s, r, o.width).c_str(), stdout);
  std::printf(
      "\nstep time %.2f | bubble %.1f%% (idle / compute, worst rank) | peak in-flight "
      "micro-batch chunks %d (rank 0)\n",
      r.step_time, 100 * r.max_bubble(), r.peak_in_flight[0]);
  return Status::Ok();
}

}  // namespace

void AddScheduleCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ScheduleOptions>();
  CLI::App* cmd = app.add_subcommand("schedule", "Simulate and draw a pipeline schedule");
  cmd->add_option("--pp", o->pp, "Pipeline ranks")->check(CLI::Range(1, 256));
  cmd->add_option("--vpp", o->vpp, "Virtual stages per rank (interleaved)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--microbatches", o->micro, "Micro-batches per step")->check(CLI::Range(1, 4096));
  cmd->add_option("--schedule", o->schedule, "gpipe | 1f1b | interleaved | zb-h1");
  cmd->add_option("--forward", o->forward, "Forward time of one micro-batch through one stage");
  cmd->add_option("--backward", o->backward, "Backward time of one micro-batch through one stage");
  cmd->add_option("--p2p-latency", o->latency, "Time of one activation/gradient transfer");
  cmd->add_option("--layers", o->layers, "Model layers (with uneven stages: costs per chunk)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--first-stage-layers", o->first_stage_layers,
                  "Layers of the first chunk (the others share the rest)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--last-stage-layers", o->last_stage_layers, "Layers of the last chunk")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--width", o->width, "Minimum chart width in characters")
      ->check(CLI::Range(20, 1000));
  cmd->callback([o, exit_code] {
    Status st = RunSchedule(*o);
    *exit_code = st.ok() ? 0 : ReportError("schedule", st);
  });
}

}  // namespace loom
