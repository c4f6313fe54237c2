// Point-to-point transfers of one pipeline step.
#include "parallel/pipeline/p2p.h"

#include "parallel/message_tags.h"

namespace loom {

PipelineP2p::PipelineP2p(Communicator& pp, const Schedule& schedule, int64_t width)
    : pp_(pp), schedule_(schedule), width_(width), keep_(&pp) {
  keep_(act_in_);  // receives land in act_in_ and grad_in_, sends read grad_out_
  keep_(grad_in_);
  keep_(grad_out_);
}

// Receives posted ahead and sends may still be running: wait for them (one deadline for all)
// before their buffers go. A timeout there abandons the communication, and `keep_` then keeps
// the buffers instead.
PipelineP2p::~PipelineP2p() {
  const Deadline deadline = pp_.DefaultDeadline();
  auto finish = [&](const HandlePtr& h) {
    if (!pp_.Abandoned()) (void)h->Wait(deadline);  // abandoned: `keep_` keeps the buffers
  };
  for (auto& [id, h] : recvs_) finish(h);
  for (HandlePtr& h : sends_) finish(h);
  for (auto& [slot, list] : slot_sends_) {
    for (HandlePtr& h : list) finish(h);
  }
}

void PipelineP2p::PostRecv(const Instr& in) {
  const bool grad = in.kind == InstrKind::kRecvGrad;
  const int key = Key(in.micro, in.chunk), id = key * 2 + grad;
  if (recvs_.count(id)) return;
  const int g = schedule_.GlobalChunk(pp_.rank(), in.chunk);
  auto& buf = (grad ? grad_in_ : act_in_)[key];
  buf.resize(static_cast<size_t>(width_));
  recvs_[id] = pp_.RecvAsync(buf.data(), width_, in.peer,
                             PipelineTransferTag(grad, in.micro, g, schedule_.num_chunks()));
}

Status PipelineP2p::WaitRecv(bool grad, int micro, int chunk) {
  auto it = recvs_.find(Key(micro, chunk) * 2 + grad);
  if (it == recvs_.end()) return Status::Ok();
  LOOM_RETURN_IF_ERROR(Wait(it->second));
  recvs_.erase(it);
  return Status::Ok();
}

const float* PipelineP2p::Received(bool grad, int micro, int chunk) {
  return (grad ? grad_in_ : act_in_)[Key(micro, chunk)].data();
}

void PipelineP2p::Drop(bool grad, int micro, int chunk) {
  (grad ? grad_in_ : act_in_).erase(Key(micro, chunk));
}

void PipelineP2p::SendActivation(const Instr& in, const float* out) {
  const int g = schedule_.GlobalChunk(pp_.rank(), in.chunk);
  HandlePtr h = pp_.SendAsync(out, width_, in.peer,
                              PipelineTransferTag(false, in.micro, g + 1, schedule_.num_chunks()));
  slot_sends_[Key(in.micro, in.chunk)].push_back(h);
}

Status PipelineP2p::WaitActivationSends(int micro, int chunk) {
  const int key = Key(micro, chunk);
  for (HandlePtr& h : slot_sends_[key]) LOOM_RETURN_IF_ERROR(Wait(h));
  slot_sends_.erase(key);
  return Status::Ok();
}

void PipelineP2p::KeepGradient(int micro, int chunk, const float* dx) {
  grad_out_[Key(micro, chunk)].assign(dx, dx + width_);
}

void PipelineP2p::SendGradient(const Instr& in) {
  const int g = schedule_.GlobalChunk(pp_.rank(), in.chunk);
  sends_.push_back(
      pp_.SendAsync(grad_out_[Key(in.micro, in.chunk)].data(), width_, in.peer,
                    PipelineTransferTag(true, in.micro, g - 1, schedule_.num_chunks())));
}

void PipelineP2p::Send(const float* data, int64_t n, int peer, int tag) {
  sends_.push_back(pp_.SendAsync(data, n, peer, tag));
}

Status PipelineP2p::Recv(float* data, int64_t n, int peer, int tag) {
  return Wait(pp_.RecvAsync(data, n, peer, tag));
}

Status PipelineP2p::WaitSends() {
  for (HandlePtr& h : sends_) LOOM_RETURN_IF_ERROR(Wait(h));
  return Status::Ok();
}

}  // namespace loom
