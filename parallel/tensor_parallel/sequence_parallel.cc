// Sequence-parallel gather/scatter over the tensor-parallel group.
#include "parallel/tensor_parallel/sequence_parallel.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace loom {

Status GatherTokens(const TensorParallel& tp, const TokenRows& rows, const float* local,
                    float* full, int64_t width) {
  if (tp.size() == 1 || !tp.sp) {
    if (local != full) std::memcpy(full, local, static_cast<size_t>(rows.full * width) * 4);
    return Status::Ok();
  }
  return tp.comm->AllGather(local, full, rows.local * width);
}

Status GatherTokens(const TensorParallel& tp, const TokenRows& rows, const Bf16* local, Bf16* full,
                    int64_t width) {
  if (tp.size() == 1 || !tp.sp) {
    if (local != full) std::memcpy(full, local, static_cast<size_t>(rows.full * width) * 2);
    return Status::Ok();
  }
  return tp.comm->AllGather(ConstCommBuffer(local, rows.local * width, DType::kBF16),
                            CommBuffer{full, rows.full * width, DType::kBF16});
}

Status ReduceTokens(const TensorParallel& tp, const TokenRows& rows, float* partial_full,
                    float* local, int64_t width) {
  if (tp.size() > 1) {
    if (tp.sp) return tp.comm->ReduceScatter(partial_full, local, rows.local * width);
    LOOM_RETURN_IF_ERROR(tp.comm->AllReduce(partial_full, rows.full * width));
  }
  if (partial_full != local) {
    std::memcpy(local, partial_full, static_cast<size_t>(rows.local * width) * 4);
  }
  return Status::Ok();
}

Status SumSequenceParallelGrads(const TensorParallel& tp, const ParamLayout& layout, int bucket,
                                float* grads) {
  if (tp.size() == 1) return Status::Ok();
  // Under SP every replicated parameter; without it only those marked tp_partial_grad.
  auto partial = [&](const ParamInfo& p) {
    return p.bucket == bucket && p.shard == ShardKind::kReplicated &&
           (tp.sequence_parallel() || p.tp_partial_grad);
  };
  std::vector<float> packed;
  KeepIfAbandoned keep(tp.comm);
  keep(packed);
  for (const ParamInfo& p : layout.params) {
    if (partial(p)) {
      packed.insert(packed.end(), grads + p.bucket_offset, grads + p.bucket_offset + p.numel());
    }
  }
  if (packed.empty()) return Status::Ok();
  LOOM_RETURN_IF_ERROR(tp.comm->AllReduce(packed.data(), static_cast<int64_t>(packed.size())));
  size_t at = 0;
  for (const ParamInfo& p : layout.params) {
    if (partial(p)) {
      std::copy(packed.begin() + at, packed.begin() + at + p.numel(), grads + p.bucket_offset);
      at += p.numel();
    }
  }
  return Status::Ok();
}

}  // namespace loom
