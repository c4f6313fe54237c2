// How activations and gradients move between pipeline stages during one optimizer step (the
// executor, executor.h, decides what runs when; this decides how tensors travel), as Megatron's
// p2p_communication apart from its schedules.
//
// Every transfer is asynchronous on the pipeline group and tagged by (micro-batch, destination
// global chunk) (parallel/message_tags.h), so any number may be in flight between two stages.
// Received activations and gradients land in buffers of their own, per (micro-batch, local
// chunk), kept until the executor drops them; an output activation is sent from the model's slot
// itself (the executor waits for those sends before it releases the slot); an input gradient is
// copied into a send buffer first, since the next backward overwrites it.
//
// One PipelineP2p lives for one step. On destruction (also on an early error return) it waits for
// every receive and send still running, with one deadline for all; if communication was
// abandoned (Communicator::Abandoned) it waits for nothing and keeps every buffer an unfinished
// transfer may still use. Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "comm/communicator.h"
#include "core/status.h"
#include "parallel/pipeline/schedule.h"

namespace loom {

class PipelineP2p {
 public:
  // `pp` and `schedule` must outlive this object; `width`: floats of one activation.
  PipelineP2p(Communicator& pp, const Schedule& schedule, int64_t width);
  ~PipelineP2p();
  PipelineP2p(const PipelineP2p&) = delete;
  PipelineP2p& operator=(const PipelineP2p&) = delete;

  // Posts the receive of a kRecvAct or kRecvGrad instruction of this rank, unless it is posted.
  void PostRecv(const Instr& in);
  // Waits for the posted receive of the activation (grad = false) or the gradient of (micro,
  // local chunk), if any; Received then holds it until Drop.
  Status WaitRecv(bool grad, int micro, int chunk);
  const float* Received(bool grad, int micro, int chunk);
  void Drop(bool grad, int micro, int chunk);

  // kSendAct: sends `out`, the output of (in.micro, in.chunk), which must stay valid until
  // WaitActivationSends for that (micro, chunk) returns.
  void SendActivation(const Instr& in, const float* out);
  Status WaitActivationSends(int micro, int chunk);
  // Copies the input gradient `dx` of (micro, chunk) for its kSendGrad, then sends it.
  void KeepGradient(int micro, int chunk, const float* dx);
  void SendGradient(const Instr& in);

  // Other transfers of the step on the pipeline group (the tied embedding): a send whose buffer
  // stays valid until WaitSends, and a blocking receive.
  void Send(const float* data, int64_t n, int peer, int tag);
  Status Recv(float* data, int64_t n, int peer, int tag);
  // Waits for every send of the step.
  Status WaitSends();

 private:
  int Key(int micro, int chunk) const { return micro * schedule_.vpp + chunk; }
  Status Wait(const HandlePtr& h) { return h->Wait(pp_.DefaultDeadline()); }

  Communicator& pp_;
  const Schedule& schedule_;
  const int64_t width_;
  // Buffers by Key: received activations and gradients, input gradients being sent. Declared
  // before `keep_`, which keeps them when communication is abandoned.
  std::map<int, std::vector<float>> act_in_, grad_in_, grad_out_;
  KeepIfAbandoned keep_;
  std::map<int, HandlePtr> recvs_;                    // by Key * 2 + (gradient ? 1 : 0)
  std::vector<HandlePtr> sends_;                      // gradients and the tied embedding
  std::map<int, std::vector<HandlePtr>> slot_sends_;  // by Key: sends reading an output
};

}  // namespace loom
