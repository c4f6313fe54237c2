// The pipeline executor: one step of a rank's instruction list, and forward-only evaluation.
#include "parallel/pipeline/executor.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/kernels/elementwise.h"
#include "parallel/message_tags.h"
#include "parallel/pipeline/p2p.h"

namespace loom {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The state of one training step on one rank.
class StepRun {
 public:
  StepRun(Communicator& pp, const Schedule& schedule, PipelineStage& stage,
          PipelineTimings* timings)
      : pp_(pp),
        schedule_(schedule),
        stage_(stage),
        timings_(timings),
        program_(schedule.ranks[static_cast<size_t>(pp.rank())]),
        p2p_(pp, schedule, stage.ActivationFloats()) {}

  Result<double> Run() {
    LOOM_RETURN_IF_ERROR(ShareTiedEmbedding());
    for (size_t pc = 0; pc < program_.size(); ++pc) {
      PostAhead(pc);
      LOOM_RETURN_IF_ERROR(Execute(program_[pc]));
    }
    LOOM_RETURN_IF_ERROR(p2p_.WaitSends());
    return loss_;
  }

 private:
  int GlobalChunk(int chunk) const { return schedule_.GlobalChunk(pp_.rank(), chunk); }

  // The owner sends the embedding to the last stage; the last stage receives it before its first
  // forward and starts accumulating its gradient from zero.
  Status ShareTiedEmbedding() {
    LOOM_ASSIGN_OR_RETURN(const float* wte, stage_.EmbeddingWeights());
    if (wte != nullptr) p2p_.Send(wte, stage_.EmbeddingFloats(), schedule_.pp - 1, kTiedWteTag);
    if (float* head = stage_.HeadEmbedding()) {
      float* dwte = stage_.HeadEmbeddingGrads();
      std::fill(dwte, dwte + stage_.EmbeddingFloats(), 0.0f);
      LOOM_RETURN_IF_ERROR(p2p_.Recv(head, stage_.EmbeddingFloats(), 0, kTiedWteTag));
    }
    return Status::Ok();
  }

  // Posts the receives of the next two receive instructions at or after `pc`.
  void PostAhead(size_t pc) {
    while (posted_ahead_ < 2 && next_recv_ < program_.size()) {
      if (next_recv_ < pc) {
        ++next_recv_;
        continue;
      }
      const Instr& in = program_[next_recv_++];
      if (in.kind == InstrKind::kRecvAct || in.kind == InstrKind::kRecvGrad) {
        p2p_.PostRecv(in);
        ++posted_ahead_;
      }
    }
  }

  Status Execute(const Instr& in) {
    switch (in.kind) {
      case InstrKind::kRecvAct:
      case InstrKind::kRecvGrad:
        p2p_.PostRecv(in);  // already posted ahead in the usual case
        --posted_ahead_;
        return Status::Ok();
      case InstrKind::kForward:
        return Forward(in);
      case InstrKind::kSendAct:
        p2p_.SendActivation(in, stage_.Output(in.micro, in.chunk));
        return Status::Ok();
      case InstrKind::kBackward:
        return Backward(in);
      case InstrKind::kSendGrad:
        p2p_.SendGradient(in);
        return Status::Ok();
      case InstrKind::kOptimizerStep:  // the head's embedding gradient goes back to its owner
        if (float* dwte = stage_.HeadEmbeddingGrads()) {
          p2p_.Send(dwte, stage_.EmbeddingFloats(), 0, kTiedWteGradTag);
        }
        return Status::Ok();
      default:
        return Internal("pipeline executor: unsupported instruction " + ToString(in));
    }
  }

  Status Forward(const Instr& in) {
    LOOM_RETURN_IF_ERROR(p2p_.WaitRecv(false, in.micro, in.chunk));
    const float* input =
        GlobalChunk(in.chunk) > 0 ? p2p_.Received(false, in.micro, in.chunk) : nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    LOOM_ASSIGN_OR_RETURN(double loss, stage_.Forward(in.micro, in.chunk, input));
    timings_->forward_s += SecondsSince(t0);
    ++timings_->forwards;
    loss_ += loss;
    p2p_.Drop(false, in.micro, in.chunk);
    return Status::Ok();
  }

  Status Backward(const Instr& in) {
    LOOM_RETURN_IF_ERROR(p2p_.WaitRecv(true, in.micro, in.chunk));
    const int g = GlobalChunk(in.chunk);
    const bool last = in.micro == schedule_.micro - 1;
    if (g == 0 && last && schedule_.pp > 1 && stage_.TiedEmbedding()) {
      LOOM_RETURN_IF_ERROR(AddHeadEmbeddingGrads());
    }
    const float* dout =
        g < schedule_.num_chunks() - 1 ? p2p_.Received(true, in.micro, in.chunk) : nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    LOOM_RETURN_IF_ERROR(stage_.Backward(in.micro, in.chunk, dout, last));
    timings_->backward_s += SecondsSince(t0);
    ++timings_->backwards;
    p2p_.Drop(true, in.micro, in.chunk);
    if (g > 0) p2p_.KeepGradient(in.micro, in.chunk, stage_.InputGradient(in.chunk));
    LOOM_RETURN_IF_ERROR(p2p_.WaitActivationSends(in.micro, in.chunk));
    stage_.Release(in.micro, in.chunk);
    return Status::Ok();
  }

  // The last stage's head gradient of the embedding joins the embedding gradient before its bucket
  // is reduced across data-parallel ranks.
  Status AddHeadEmbeddingGrads() {
    const int64_t n = stage_.EmbeddingFloats();
    std::vector<float> dwte(static_cast<size_t>(n));
    KeepIfAbandoned keep(&pp_);
    keep(dwte);
    LOOM_RETURN_IF_ERROR(p2p_.Recv(dwte.data(), n, schedule_.pp - 1, kTiedWteGradTag));
    float* grads = stage_.EmbeddingGrads();
    if (grads == nullptr) return Internal("out of memory for the embedding gradient");
    Axpy(grads, dwte.data(), 1.0f, n);
    return Status::Ok();
  }

  Communicator& pp_;
  const Schedule& schedule_;
  PipelineStage& stage_;
  PipelineTimings* timings_;
  const std::vector<Instr>& program_;
  PipelineP2p p2p_;
  size_t next_recv_ = 0;  // the next instruction PostAhead looks at
  int posted_ahead_ = 0;  // receives posted ahead and not yet reached
  double loss_ = 0;
};

}  // namespace

Result<std::unique_ptr<PipelineExecutor>> PipelineExecutor::Create(Communicator* pp,
                                                                   const Schedule* schedule) {
  if (pp == nullptr || pp->size() != schedule->pp) {
    return InvalidArgument("pipeline executor: the schedule is for another pipeline group");
  }
  LOOM_RETURN_IF_ERROR(CheckPipelineTags(schedule->micro, schedule->num_chunks()));
  return std::unique_ptr<PipelineExecutor>(new PipelineExecutor(pp, schedule));
}

Result<double> PipelineExecutor::RunStep(PipelineStage& stage, PipelineTimings* timings) {
  StepRun run(*pp_, *schedule_, stage, timings);
  return run.Run();
}

Result<double> PipelineExecutor::Evaluate(PipelineStage& stage, int64_t count,
                                          const std::function<Status(int64_t)>& load) {
  Communicator& pp = *pp_;
  const int r = pp.rank(), stages = schedule_->pp, chunks = schedule_->num_chunks();
  const int64_t width = stage.ActivationFloats();
  std::vector<float> buf(static_cast<size_t>(width));
  KeepIfAbandoned keep(&pp);
  keep(buf);
  LOOM_ASSIGN_OR_RETURN(const float* wte, stage.EmbeddingWeights());
  if (wte != nullptr) {
    LOOM_RETURN_IF_ERROR(pp.Send(wte, stage.EmbeddingFloats(), stages - 1, kTiedWteTag));
  }
  if (float* head = stage.HeadEmbedding()) {
    LOOM_RETURN_IF_ERROR(pp.Recv(head, stage.EmbeddingFloats(), 0, kTiedWteTag));
  }
  double sum = 0;
  for (int64_t e = 0; e < count; ++e) {
    LOOM_RETURN_IF_ERROR(load(e));
    const int micro = static_cast<int>(e);
    for (int k = 0; k < schedule_->vpp; ++k) {
      const int g = schedule_->GlobalChunk(r, k);
      if (g > 0) {
        LOOM_RETURN_IF_ERROR(
            pp.Recv(buf.data(), width, (r + stages - 1) % stages, PipelineEvalTag(g)));
      }
      LOOM_ASSIGN_OR_RETURN(double loss, stage.Forward(micro, k, g > 0 ? buf.data() : nullptr));
      sum += loss;
      if (g < chunks - 1) {
        LOOM_RETURN_IF_ERROR(
            pp.Send(stage.Output(micro, k), width, (r + 1) % stages, PipelineEvalTag(g + 1)));
      }
      stage.Release(micro, k);
    }
  }
  return sum;
}

}  // namespace loom
