// The parameter side of ZeRO: where each bucket's parameters live, how the model gets the full
// (TP-local) bucket it computes with, and how the parameters become consistent again after the
// optimizer updated this rank's part of them.
//
// One implementation per ZeRO parameter scheme (the stage picks one; see param_store.h):
//   replicated   stage 0: every rank holds and updates every parameter; nothing to gather.
//   re-gathered  stages 1-2: every rank holds every parameter but updates only its chunks; after
//                the step the chunks are all-gathered in the background, and the next forward
//                waits for each bucket just before it uses it (Acquire).
//   gathered     stage 3: a rank holds only its chunks; Acquire all-gathers a bucket into a
//                temporary (kComm) buffer, prefetching the next one, and Release frees it.
//                Buckets without layers (embeddings, final norm) stay gathered for the whole step
//                and are dropped after the update.
// Memory is tagged kParams (kept) and kComm (gathered copies).
//
// Not thread-safe (one caller). Buffers an unfinished gather may still write are kept, never
// freed, when communication was abandoned (KeepIfAbandoned); Drain first waits for the rest.
#pragma once

#include <memory>

#include "comm/communicator.h"
#include "core/status.h"
#include "parallel/zero/buckets.h"

namespace loom {

class ParamBuffers {
 public:
  virtual ~ParamBuffers() = default;

  // Full parameters of bucket b (padded, bucket-relative); valid from Acquire until Release.
  virtual float* Params(int b) = 0;
  // Makes Params(b) valid; `next` (or -1) is the bucket needed after it (prefetched by stage 3).
  virtual Status Acquire(int b, int next) = 0;
  virtual Status Release(int b) = 0;
  // The parameters of bucket b's optimizer domain (BucketGeometry), updated in place.
  virtual float* Domain(int b) = 0;
  // Around the optimizer's update: wait for gathers still running; after it, make the parameters
  // consistent again (or drop copies that are now stale).
  virtual Status BeforeUpdate() { return Status::Ok(); }
  virtual Status AfterUpdate() { return Status::Ok(); }
  // Waits for background gathers.
  virtual Status Quiesce() { return Status::Ok(); }
  // From another thread: waits for bucket b's gather, if one runs (ParamStore::Settled).
  virtual Status Settled(int /*b*/) { return Status::Ok(); }
  // ParamStore::CopyParams / LoadParams (layout.total floats, canonical order).
  virtual Status CopyParams(float* out) = 0;
  virtual Status LoadParams(const float* in) = 0;
  // ParamStore::StateData for the parameters.
  virtual float* State(int b, int64_t* lo, int64_t* hi) = 0;
  // Drops gathered copies built from old values.
  virtual void StateLoaded() {}
  // Waits for running gathers until `deadline` (nothing once communication is abandoned).
  virtual void Drain(Deadline /*deadline*/) {}
};

// Stage 0, stages 1-2 (`overlap` false: each re-gather is waited for at once) and stage 3.
// `geo` must outlive the buffers; `dp` is the data-parallel group (null with one rank), whose
// abandonment decides whether the buffers are kept (a pipeline send may read the parameters).
Result<std::unique_ptr<ParamBuffers>> MakeReplicatedParams(const BucketGeometry& geo,
                                                           Communicator* dp);
Result<std::unique_ptr<ParamBuffers>> MakeRegatheredParams(const BucketGeometry& geo,
                                                           Communicator* dp, bool overlap);
Result<std::unique_ptr<ParamBuffers>> MakeGatheredParams(const BucketGeometry& geo,
                                                         Communicator* dp);

}  // namespace loom
