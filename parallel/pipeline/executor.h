// The pipeline executor: runs this rank's instruction list of a schedule (schedule.h) for one
// optimizer step over a PipelineStage (stage.h), moving activations and gradients with
// PipelineP2p (p2p.h); and the pipeline's forward-only evaluation.
//
// Training step: receives are posted two receive instructions ahead, so a transfer lands while
// the rank still computes the instructions before it; sends are asynchronous; every in-flight
// (micro-batch, chunk) keeps its own activations, released after its backward. Tied embeddings:
// at the start of the step the stage owning the embedding sends its weights to the stage whose
// head uses them; that stage accumulates the head's gradient over the step and sends it back at
// its optimizer-step instruction; the owner adds it to its embedding gradient just before the last
// backward of global chunk 0, i.e. before the data-parallel reduction. This cannot deadlock: the
// last stage's last backward always precedes the first stage's. On an error every transfer still
// running is drained (or its buffers kept, once communication is abandoned) before returning.
//
// Not thread-safe; one executor per rank, used by one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "comm/communicator.h"
#include "core/status.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/pipeline/stage.h"

namespace loom {

// Measured compute time of the pipeline instructions (for comparing with the simulator).
struct PipelineTimings {
  double forward_s = 0, backward_s = 0;
  int forwards = 0, backwards = 0;
};

class PipelineExecutor {
 public:
  // `pp` (the pipeline group, more than one rank) and `schedule` (built for pp->size() ranks)
  // must outlive the executor. Fails when the schedule needs more message tags than the pipeline
  // owns (parallel/message_tags.h).
  static Result<std::unique_ptr<PipelineExecutor>> Create(Communicator* pp,
                                                          const Schedule* schedule);

  // Runs this rank's program for one optimizer step; returns the loss sum of this rank's head
  // chunk (0 on other stages). Adds the forward and backward compute times to `timings`.
  Result<double> RunStep(PipelineStage& stage, PipelineTimings* timings);

  // Forward only, `count` micro-batches one at a time through the chunks in global order (no
  // overlap): `load(i)` prepares micro-batch i's data on this rank's stage before it runs.
  // Returns the loss sum of this rank's head chunk (0 on other stages).
  Result<double> Evaluate(PipelineStage& stage, int64_t count,
                          const std::function<Status(int64_t)>& load);

 private:
  PipelineExecutor(Communicator* pp, const Schedule* schedule) : pp_(pp), schedule_(schedule) {}

  Communicator* pp_;
  const Schedule* schedule_;
};

}  // namespace loom
