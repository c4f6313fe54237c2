// The GPT's activation plan: the scratch buffers every chunk keeps, the activations of each
// in-flight micro-batch (slots), and their sizes. All of it is tagged kActivations.
#include "worker/gpt_activations.h"

#include <algorithm>

#include "core/memory.h"
#include "model/config.h"

namespace loom {

Status Gpt::Allocate() {
  const int64_t before = GetMemUsage(MemTag::kActivations).current;
  LOOM_RETURN_IF_ERROR(AllocateScratch());
  scratch_bytes_ = GetMemUsage(MemTag::kActivations).current - before;
  return Status::Ok();
}

Status Gpt::AllocateScratch() {
  const int64_t n = rt_.micro_batch * rt_.seq, c = config_.hidden, t = tp_.size();
  const int64_t nl = tp_.sp ? n / t : n;
  auto act = [](Shape s) { return Tensor::Zeros(std::move(s), DType::kF32, MemTag::kActivations); };
  if (chunk_.head) {
    LOOM_ASSIGN_OR_RETURN(ce_stats_, act({3 * n}));
    LOOM_ASSIGN_OR_RETURN(ce_dloss_, act({n}));
    LOOM_ASSIGN_OR_RETURN(ce_chunk_, act({n, std::min(rt_.vocab_chunk, vl_)}));
  }
  LOOM_ASSIGN_OR_RETURN(dresid_, act({nl, c}));
  LOOM_ASSIGN_OR_RETURN(dln_, act({n, c}));
  LOOM_ASSIGN_OR_RETURN(datt_, act({n, cl_}));
  LOOM_ASSIGN_OR_RETURN(dqkv_, act({n, 3 * cl_}));
  // Llama: d(gate|up) [n, 2Fl] and d(silu(gate)*up) [n, Fl]; the projected q|k|v before the
  // KV heads are copied to their query heads (and its gradient).
  LOOM_ASSIGN_OR_RETURN(dfc_, act({n, llama_ ? 3 * fl_ : fl_}));
  if (llama_) {
    LOOM_ASSIGN_OR_RETURN(qkvc_, act({n, qw_}));
  }
  LOOM_ASSIGN_OR_RETURN(emb_full_, act({n, c}));
  if (t > 1) {
    LOOM_ASSIGN_OR_RETURN(rowpar_, act({n, c}));
    LOOM_ASSIGN_OR_RETURN(dln_local_, act({nl, c}));
  }
  if (tp_.sp && t > 1) {
    LOOM_ASSIGN_OR_RETURN(ln_local_, act({nl, c}));
    LOOM_ASSIGN_OR_RETURN(dfull_, act({n, c}));
  }
  if (bf16()) {
    auto act16 = [](Shape s) {
      return Tensor::Zeros(std::move(s), DType::kBF16, MemTag::kActivations);
    };
    LOOM_ASSIGN_OR_RETURN(ln32_, act({nl, c}));
    if (tp_.sp && t > 1) {
      LOOM_ASSIGN_OR_RETURN(ln16_local_, act16({nl, c}));
    }
    LOOM_ASSIGN_OR_RETURN(att16_, act16({n, cl_}));
    // Row-parallel backward: [full + local, C] (core/../linear.h); column: [full, 3Cl or Fl].
    // Llama: the column GEMMs are q|k|v [N, qw] and gate|up [N, 2Fl].
    LOOM_ASSIGN_OR_RETURN(
        dy16_, act16({std::max({(n + nl) * c, n * 3 * cl_, n * fl_, n * qw_, n * 2 * fl_})}));
    if (chunk_.head) {
      LOOM_ASSIGN_OR_RETURN(lnf16_, act16({n, c}));
      LOOM_ASSIGN_OR_RETURN(ce_chunk16_, act16({n, std::min(rt_.vocab_chunk, vl_)}));
    }
  }
  return Status::Ok();
}

Result<Gpt::Slot*> Gpt::GetSlot(int id) {
  auto it = slots_.find(id);
  if (it != slots_.end()) return it->second.get();
  const int64_t n = rt_.micro_batch * rt_.seq, c = config_.hidden, t = tp_.size();
  const int64_t nl = tp_.sp ? n / t : n;
  const int64_t lse_n = rt_.micro_batch * hl_ * rt_.seq;
  auto act = [](Shape s) { return Tensor::Zeros(std::move(s), DType::kF32, MemTag::kActivations); };
  // GEMM inputs kept in the compute precision.
  const DType gemm_in = bf16() ? DType::kBF16 : DType::kF32;
  auto in = [gemm_in](Shape s) {
    return Tensor::Zeros(std::move(s), gemm_in, MemTag::kActivations);
  };
  const int64_t before = GetMemUsage(MemTag::kActivations).current;
  auto slot = std::make_unique<Slot>();
  for (int l = 0; l <= chunk_.num_layers; ++l) {
    LOOM_ASSIGN_OR_RETURN(Tensor r, act({nl, c}));
    slot->resid.push_back(std::move(r));
  }
  const int sets = rt_.recompute == Recompute::kFull ? 1 : chunk_.num_layers;
  for (int i = 0; i < sets; ++i) {
    auto a = std::make_unique<LayerActs>();
    LOOM_ASSIGN_OR_RETURN(a->ln1, in({n, c}));
    LOOM_ASSIGN_OR_RETURN(a->ln1_mean, act({nl}));
    LOOM_ASSIGN_OR_RETURN(a->ln1_rstd, act({nl}));
    LOOM_ASSIGN_OR_RETURN(a->qkv, act({n, 3 * cl_}));
    LOOM_ASSIGN_OR_RETURN(a->att, act({n, cl_}));
    LOOM_ASSIGN_OR_RETURN(a->lse, act({lse_n}));
    LOOM_ASSIGN_OR_RETURN(a->res2, act({nl, c}));
    LOOM_ASSIGN_OR_RETURN(a->ln2, in({n, c}));
    LOOM_ASSIGN_OR_RETURN(a->ln2_mean, act({nl}));
    LOOM_ASSIGN_OR_RETURN(a->ln2_rstd, act({nl}));
    LOOM_ASSIGN_OR_RETURN(a->fc, act({n, llama_ ? 2 * fl_ : fl_}));
    LOOM_ASSIGN_OR_RETURN(a->gelu, in({n, fl_}));
    slot->acts.push_back(std::move(a));
  }
  if (chunk_.head) {
    LOOM_ASSIGN_OR_RETURN(slot->lnf, act({n, c}));
    LOOM_ASSIGN_OR_RETURN(slot->lnf_mean, act({nl}));
    LOOM_ASSIGN_OR_RETURN(slot->lnf_rstd, act({nl}));
    LOOM_ASSIGN_OR_RETURN(slot->ce_lse, act({n}));
  }
  slot->tokens.resize(static_cast<size_t>(n));
  slot->targets.resize(static_cast<size_t>(n));
  slot_bytes_ = GetMemUsage(MemTag::kActivations).current - before;
  Slot* raw = slot.get();
  slots_.emplace(id, std::move(slot));
  return raw;
}

void Gpt::ReleaseSlot(int slot) {
  slots_.erase(slot);
}

int64_t Gpt::ActivationRows(int64_t b, int64_t t) const {
  return TokenRows::Of(tp_, b * t).local;
}

int64_t Gpt::ActivationBytesPerLayer() const {
  const int64_t n = rt_.micro_batch * rt_.seq, c = config_.hidden;
  const int64_t nl = tp_.sp ? n / tp_.size() : n;
  if (rt_.recompute == Recompute::kFull) return nl * c * 4;
  // Llama: RMSNorm keeps no means; fc is gate|up.
  const int64_t floats = n * c * 2 + (llama_ ? 2 : 4) * nl + 3 * n * cl_ + n * cl_ +
                         rt_.micro_batch * hl_ * rt_.seq + nl * c + (llama_ ? 3 : 2) * n * fl_ +
                         nl * c;  // + the layer input
  // bf16 keeps ln_1, ln_2 and gelu (2NC + N*Fl) in half the bytes.
  return floats * 4 - (bf16() ? (2 * n * c + n * fl_) * 2 : 0);
}

const float* Gpt::OutputActivation(int slot) const {
  return slots_.at(slot)->resid[chunk_.num_layers].data<float>();
}

const float* Gpt::InputGradient() const {
  return dresid_.data<float>();
}

}  // namespace loom
