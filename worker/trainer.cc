// Training loop, evaluation and sampling.
#include "worker/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "core/fault_point.h"
#include "core/file_util.h"
#include "core/logging.h"
#include "core/memory.h"
#include "core/rng.h"
#include "core/stop_signal.h"
#include "core/threads.h"
#include "job/job_overrides.h"
#include "model/layout.h"
#include "parallel/context/ring_attention.h"
#include "parallel/pipeline/simulator.h"
#include "worker/data/token_file.h"
#include "worker/lr_schedule.h"
#include "worker/store_state.h"

namespace loom {

Result<std::unique_ptr<Trainer>> Trainer::Create(const JobConfig& job, const Placement& place,
                                                 const SnapshotSetup* snapshots) {
  std::unique_ptr<Trainer> t(new Trainer(job, place));
  if (Status st = t->Setup(snapshots); !st.ok()) {
    // A timed-out collective may still write into the trainer's buffers (Communicator::Abandoned).
    if (place.world != nullptr && place.world->Abandoned()) (void)t.release();
    return st;
  }
  return t;
}

Status Trainer::SetupSnapshots(const SnapshotSetup& snapshots) {
  if (snapshots.plan.has_recovery()) {
    StoreState state(store_.get());
    const int tp_rank = place_.tp ? place_.tp->rank() : 0;
    LOOM_ASSIGN_OR_RETURN(restored_,
                          RestoreSnapshot(snapshots.plan, job_, place_, &state, layout_, tp_rank));
    if (!restored_.restored && place_.world_rank == 0) {
      LOOM_LOG(WARN, SNAP) << "the in-memory snapshots cannot be restored: " << restored_.why_not
                           << "; resuming from the last checkpoint instead";
    }
  }
  LOOM_ASSIGN_OR_RETURN(snap_, Snapshotter::Create(snapshots, job_, place_, store_.get(), layout_));
  return Status::Ok();
}

Status Trainer::Setup(const SnapshotSetup* snapshots) {
  LOOM_RETURN_IF_ERROR(Init());
  if (snapshots != nullptr) LOOM_RETURN_IF_ERROR(SetupSnapshots(*snapshots));
  int64_t origin_samples = 0;
  if (restored_.restored) {
    start_step_ = restored_.step;
    origin_samples = restored_.consumed_samples;
    train_sampler_->SetOrigin(restored_.step, restored_.consumed_samples);
  }
  const CheckpointConfig& c = job_.checkpoint;
  if (!c.dir.empty() || !c.load.empty() || !c.init_from.empty()) {
    ckpt_ = std::make_unique<Checkpointer>(job_, place_.layout, place_.world_rank, place_.world,
                                           store_.get(), layout_);
    if (!c.dir.empty()) InstallStopSignal(c.stop_signal);  // from here on: save, then stop
    ckpt_->SetTrainData(train_tokens_);
    const ResumePoint snapshot{restored_.step, restored_.consumed_samples, restored_.from};
    LOOM_ASSIGN_OR_RETURN(start_step_, ckpt_->Restore(restored_.restored ? &snapshot : nullptr));
    // The sample stream continues where the checkpoint left it, whatever its global batch.
    train_sampler_->SetOrigin(ckpt_->stats().resumed_step, ckpt_->stats().resumed_samples);
    origin_samples = ckpt_->stats().resumed_samples;
    if (start_step_ > job_.steps) {
      return InvalidArgument(
          (job_.steps_from_flag ? std::string("--steps") : job_.path + ": field 'steps'") +
          ": the checkpoint is at step " + std::to_string(start_step_) + ", past the job's " +
          std::to_string(job_.steps) + " steps");
    }
    if (!c.dir.empty() && place_.world_rank == 0) ckpt_->WarnIfShortOfSpace(start_step_);
    if (!c.dir.empty() && place_.world_rank == 0 && c.every == 0 && !c.final &&
        start_step_ < job_.steps) {
      const bool limit = c.exit_after_minutes > 0;
      LOOM_LOG(WARN, CKPT) << "checkpoint.dir " << c.dir
                           << " is set, but checkpoint.every is 0 and checkpoint.final is false: "
                           << (c.stop_signal != 0 && limit
                                   ? "only a stop signal (checkpoint.signal) or the time limit "
                                     "(checkpoint.exit_after_minutes) saves this run"
                               : c.stop_signal != 0
                                   ? "only a stop signal (checkpoint.signal) saves this run"
                               : limit ? "only the time limit (checkpoint.exit_after_minutes) "
                                         "saves this run"
                                       : "this run saves nothing");
    }
  }
  // Training on past the end of the decay that the job file's `steps` set (`--steps` raised).
  if (place_.world_rank == 0) {
    const std::string past_decay = StepsPastDecayWarning(job_, start_step_);
    if (!past_decay.empty()) {
      LOOM_LOG(WARN, TRAIN) << past_decay;
    }
  }
  if (snap_) snap_->SetOrigin(start_step_, origin_samples);
  return Status::Ok();
}

Status Trainer::Init() {
  // Evaluation is defined by the job alone (as Megatron's eval_iters x global batch): eval.batches
  // global batches, run micro_batch sequences at a time, whatever the layout and micro-batch.
  eval_rows_ = job_.data.global_batch;
  // No data.micro_batch: each data-parallel rank runs its whole share of the batch at once, or,
  // with pipeline stages, one sequence per micro-batch (as many micro-batches as can be, so the
  // stages overlap).
  if (job_.data.micro_batch == 0) {
    job_.data.micro_batch = place_.layout.pp > 1 ? 1 : job_.data.global_batch / place_.layout.dp;
  }
  const DataConfig& d = job_.data;
  if (!d.text.empty()) {
    LOOM_ASSIGN_OR_RETURN(std::string text, ReadFile(d.text));
    if (job_.model.vocab < 256) {
      return InvalidArgument(job_.path +
                             ": field 'model.vocab': byte-level text needs at least "
                             "256, got " +
                             std::to_string(job_.model.vocab));
    }
    std::vector<uint32_t> all = EncodeBytes(text);
    size_t val_n = static_cast<size_t>(static_cast<double>(all.size()) * d.val_fraction);
    train_tokens_.assign(all.begin(), all.end() - static_cast<std::ptrdiff_t>(val_n));
    val_tokens_.assign(all.end() - static_cast<std::ptrdiff_t>(val_n), all.end());
  } else {
    LOOM_ASSIGN_OR_RETURN(TokenData train, ReadTokenFile(d.train, job_.model.vocab));
    train_tokens_ = std::move(train.tokens);
    if (!d.val.empty()) {
      LOOM_ASSIGN_OR_RETURN(TokenData val, ReadTokenFile(d.val, job_.model.vocab));
      val_tokens_ = std::move(val.tokens);
    }
  }
  if (static_cast<int64_t>(train_tokens_.size()) <= d.seq + 1) {
    return InvalidArgument(job_.path + ": field 'data.seq': the training data has " +
                           std::to_string(train_tokens_.size()) + " tokens, expected more than " +
                           std::to_string(d.seq + 1));
  }
  if (!val_tokens_.empty() && static_cast<int64_t>(val_tokens_.size()) <= d.seq + 1) {
    val_tokens_.clear();  // too small to evaluate on; Evaluate() reports NaN
  }
  train_sampler_ = std::make_unique<WindowSampler>(&train_tokens_, d.seq, d.global_batch, job_.seed,
                                                   kTrainStream);
  if (!val_tokens_.empty()) {
    eval_sampler_ =
        std::make_unique<WindowSampler>(&val_tokens_, d.seq, eval_rows_, job_.seed, kEvalStream);
  }
  LOOM_RETURN_IF_ERROR(InitModel());
  batch_in_.resize(static_cast<size_t>(d.global_batch * d.seq));
  batch_tgt_.resize(batch_in_.size());
  return Status::Ok();
}

// This rank's parameter store, chunk models and (with pp > 1) pipeline, initialised from the seed.
Status Trainer::InitModel() {
  const DataConfig& d = job_.data;
  const Layout& lay = place_.layout;
  const std::vector<ChunkSpec> chunks = RankChunks(job_.model.layers, lay, place_.world_rank);
  layout_ = ModelLayout(job_.model, lay.tp, chunks);
  AdamWConfig oc{job_.optim.beta1, job_.optim.beta2, job_.optim.eps, job_.optim.weight_decay,
                 job_.optim.grad_clip};
  // Parameters are replicated over data and context ranks: gradients are summed (and ZeRO shards)
  // over both.
  Communicator* reduce = place_.dpcp ? place_.dpcp : place_.dp;
  ParamStoreOptions so{lay.zero, reduce, place_.tp, lay.sp, job_.parallel.overlap, place_.pp};
  LOOM_ASSIGN_OR_RETURN(store_, MakeParamStore(layout_, oc, so));
  ModelRuntime rt{d.micro_batch, d.seq / lay.cp, job_.runtime.recompute.value_or(Recompute::kNone),
                  job_.runtime.vocab_chunk, job_.runtime.attn_block_q, job_.runtime.attn_block_k,
                  job_.precision,
                  // ZeRO-3 holds a layer's weights only while it runs: so do their bf16 copies.
                  lay.zero < 3};
  TensorParallel tp{place_.tp, lay.sp};
  for (const ChunkSpec& chunk : chunks) {
    LOOM_ASSIGN_OR_RETURN(
        std::unique_ptr<Gpt> g,
        Gpt::Create(job_.model, rt, layout_, store_.get(), tp, chunk, ContextParallel{place_.cp}));
    models_.push_back(std::move(g));
  }
  if (lay.pp > 1) LOOM_RETURN_IF_ERROR(InitPipeline());
  std::vector<float> init(static_cast<size_t>(layout_.total));
  InitParams(layout_, job_.seed, init.data(), tp.rank());
  return store_->LoadParams(init.data());
}

Status Trainer::InitPipeline() {
  const DataConfig& d = job_.data;
  const Layout& lay = place_.layout;
  const int64_t micro = d.global_batch / lay.dp / d.micro_batch;
  ScheduleKind kind = lay.vpp > 1 ? ScheduleKind::kInterleaved : ScheduleKind::k1F1B;
  if (!job_.parallel.schedule.empty()) {
    LOOM_ASSIGN_OR_RETURN(kind, ParseScheduleKind(job_.parallel.schedule));
  }
  Result<Schedule> sched = MakeSchedule(kind, lay.pp, lay.vpp, static_cast<int>(micro));
  if (!sched.ok()) return sched.status().WithContext(job_.path + ": section 'parallel'");
  schedule_ = std::move(*sched);
  std::vector<Gpt*> chunks;
  for (auto& m : models_) chunks.push_back(m.get());
  const float dloss = 1.0f / static_cast<float>(d.global_batch * d.seq);
  stage_ = std::make_unique<GptPipelineStage>(std::move(chunks), store_.get(), layout_,
                                              d.micro_batch, local_seq(), dloss);
  LOOM_ASSIGN_OR_RETURN(executor_, PipelineExecutor::Create(place_.pp, &schedule_));
  return Status::Ok();
}

Result<double> Trainer::ComputeGradients(const int32_t* inputs, const int32_t* targets) {
  const DataConfig& d = job_.data;
  const int dp = place_.layout.dp, dp_rank = place_.layout.CoordOf(place_.world_rank).dp;
  const int64_t per_rank = d.global_batch / dp, micro_tokens = d.micro_batch * local_seq();
  const int64_t micro_batches = per_rank / d.micro_batch;
  const float dloss = 1.0f / static_cast<float>(d.global_batch * d.seq);
  std::vector<int32_t> local_in, local_tgt;
  LocalRows(inputs + dp_rank * per_rank * d.seq, per_rank, &local_in);
  LocalRows(targets + dp_rank * per_rank * d.seq, per_rank, &local_tgt);
  const int32_t* in = local_in.data();
  const int32_t* tgt = local_tgt.data();
  LOOM_RETURN_IF_ERROR(store_->BeginStep());
  double loss_sum = 0;
  if (executor_) {
    stage_->SetBatch(in, tgt);
    LOOM_ASSIGN_OR_RETURN(loss_sum, executor_->RunStep(*stage_, &timings_));
    float l = static_cast<float>(loss_sum);  // only the last stage has a loss
    LOOM_RETURN_IF_ERROR(place_.pp->AllReduce(&l, 1));
    loss_sum = l;
  }
  for (int64_t mb = 0; mb < (executor_ ? 0 : micro_batches); ++mb) {
    LOOM_ASSIGN_OR_RETURN(double l,
                          models_[0]->ForwardLoss(in + mb * micro_tokens, tgt + mb * micro_tokens,
                                                  d.micro_batch, local_seq()));
    loss_sum += l;
    LOOM_RETURN_IF_ERROR(models_[0]->Backward(dloss, mb + 1 == micro_batches));
  }
  if (Communicator* reduce = place_.dpcp ? place_.dpcp : place_.dp) {
    float l = static_cast<float>(loss_sum);
    LOOM_RETURN_IF_ERROR(reduce->AllReduce(&l, 1));
    loss_sum = l;
  }
  return loss_sum / static_cast<double>(d.global_batch * d.seq);
}

void Trainer::LocalRows(const int32_t* full, int64_t count, std::vector<int32_t>* out) const {
  const int64_t seq = job_.data.seq, ls = local_seq();
  out->resize(static_cast<size_t>(count * ls));
  if (place_.layout.cp == 1) {
    std::copy(full, full + count * seq, out->begin());
    return;
  }
  const ContextSplit split{seq, place_.layout.cp};
  const int rank = place_.cp->rank();
  for (int64_t b = 0; b < count; ++b) {
    for (int64_t i = 0; i < ls; ++i) (*out)[b * ls + i] = full[b * seq + split.Position(rank, i)];
  }
}

Result<double> Trainer::ApplyUpdate(double lr) {
  if (ckpt_) LOOM_RETURN_IF_ERROR(ckpt_->BeforeUpdate());
  if (snap_) LOOM_RETURN_IF_ERROR(snap_->BeforeUpdate());
  return store_->Step(lr);
}

Result<StepStats> Trainer::StepOnBatch(const int32_t* inputs, const int32_t* targets, double lr) {
  StepStats st;
  LOOM_ASSIGN_OR_RETURN(st.loss, ComputeGradients(inputs, targets));
  LOOM_ASSIGN_OR_RETURN(st.grad_norm, ApplyUpdate(lr));
  st.lr = lr;
  return st;
}

Result<StepStats> Trainer::Step(int64_t step) {
  const DataConfig& d = job_.data;
  train_sampler_->Fill(step, 0, d.global_batch, batch_in_.data(), batch_tgt_.data());
  double lr = ScheduledLr(job_.optim.lr, job_.optim.min_lr, job_.schedule.warmup_steps,
                          job_.schedule.decay_steps, step);
  return StepOnBatch(batch_in_.data(), batch_tgt_.data(), lr);
}

Result<double> Trainer::Evaluate() {
  if (!eval_sampler_) return std::nan("");
  const DataConfig& d = job_.data;
  std::vector<int32_t> in(static_cast<size_t>(d.micro_batch * d.seq)), tgt(in.size());
  std::vector<int32_t> lin, ltgt;
  if (executor_) return EvaluatePipeline();
  double sum = 0;
  for (int64_t b = 0; b < job_.eval.batches; ++b) {
    for (int64_t first = 0; first < eval_rows_; first += d.micro_batch) {
      eval_sampler_->Fill(b, first, d.micro_batch, in.data(), tgt.data());
      LocalRows(in.data(), d.micro_batch, &lin);
      LocalRows(tgt.data(), d.micro_batch, &ltgt);
      LOOM_ASSIGN_OR_RETURN(
          double l, models_[0]->ForwardLoss(lin.data(), ltgt.data(), d.micro_batch, local_seq()));
      sum += l;
    }
  }
  if (place_.cp) {  // each context rank saw its part of every sequence
    float s = static_cast<float>(sum);
    LOOM_RETURN_IF_ERROR(place_.cp->AllReduce(&s, 1));
    sum = s;
  }
  return sum / static_cast<double>(job_.eval.batches * eval_rows_ * d.seq);
}

Result<double> Trainer::EvaluatePipeline() {
  // Forward only, one micro-batch at a time through the chunks in global order.
  const DataConfig& d = job_.data;
  std::vector<int32_t> in(static_cast<size_t>(d.micro_batch * d.seq)), tgt(in.size()), lin, ltgt;
  const int64_t per_batch = eval_rows_ / d.micro_batch;
  auto load = [&](int64_t e) {
    eval_sampler_->Fill(e / per_batch, e % per_batch * d.micro_batch, d.micro_batch, in.data(),
                        tgt.data());
    LocalRows(in.data(), d.micro_batch, &lin);
    LocalRows(tgt.data(), d.micro_batch, &ltgt);
    stage_->SetBatch(lin.data(), ltgt.data(), static_cast<int>(e));
    return Status::Ok();
  };
  LOOM_ASSIGN_OR_RETURN(double sum,
                        executor_->Evaluate(*stage_, job_.eval.batches * per_batch, load));
  float total = static_cast<float>(sum);
  LOOM_RETURN_IF_ERROR(place_.pp->AllReduce(&total, 1));
  if (place_.cp) LOOM_RETURN_IF_ERROR(place_.cp->AllReduce(&total, 1));
  return total / static_cast<double>(job_.eval.batches * eval_rows_ * d.seq);
}

Result<std::string> Trainer::Sample(const std::string& prompt, int64_t tokens, double temperature,
                                    int64_t top_k, uint64_t seed) {
  const Layout& l = place_.layout;
  if (l.tp == 1 && l.pp == 1 && l.cp == 1) {
    return SampleWith(*models_[0], prompt, tokens, temperature, top_k, seed);
  }
  // Any other layout: gather the weights and sample with a one-process model on world rank 0.
  std::vector<float> full;
  KeepIfAbandoned keep(place_.world);
  keep(full);
  LOOM_RETURN_IF_ERROR(GatherFullParams(&full));  // collective
  if (place_.world_rank != 0) return std::string();
  const ParamLayout layout = ModelLayout(job_.model, 1);
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<ParamStore> store,
                        MakeParamStore(layout, AdamWConfig{}, ParamStoreOptions{}));
  LOOM_RETURN_IF_ERROR(store->LoadParams(full.data()));
  const ModelRuntime rt{1,
                        job_.data.seq,
                        Recompute::kNone,
                        job_.runtime.vocab_chunk,
                        job_.runtime.attn_block_q,
                        job_.runtime.attn_block_k,
                        job_.precision};
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<Gpt> gpt, Gpt::Create(job_.model, rt, layout, store.get()));
  return SampleWith(*gpt, prompt, tokens, temperature, top_k, seed);
}

Result<std::string> Trainer::SampleWith(Gpt& model, const std::string& prompt, int64_t tokens,
                                        double temperature, int64_t top_k, uint64_t seed) {
  std::vector<int32_t> ctx;
  for (uint32_t t : EncodeBytes(prompt.empty() ? "\n" : prompt)) {
    ctx.push_back(
        static_cast<int32_t>(std::min<uint32_t>(t, static_cast<uint32_t>(job_.model.vocab - 1))));
  }
  const int64_t v = job_.model.vocab, window = job_.data.seq;
  std::vector<float> logits(static_cast<size_t>(v));
  std::vector<double> probs(static_cast<size_t>(v));
  std::vector<int32_t> generated;
  for (int64_t i = 0; i < tokens; ++i) {
    const int64_t t = std::min<int64_t>(static_cast<int64_t>(ctx.size()), window);
    LOOM_RETURN_IF_ERROR(model.ForwardLastLogits(ctx.data() + ctx.size() - t, t, logits.data()));
    int32_t next = 0;
    if (temperature <= 0) {
      next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    } else {
      double cutoff = -INFINITY;
      if (top_k > 0 && top_k < v) {
        std::vector<float> sorted(logits);
        std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(),
                         std::greater<float>());
        cutoff = sorted[static_cast<size_t>(top_k - 1)];
      }
      const double mx = *std::max_element(logits.begin(), logits.end());
      double total = 0;
      for (int64_t j = 0; j < v; ++j) {
        probs[j] = logits[j] < cutoff ? 0.0 : std::exp((logits[j] - mx) / temperature);
        total += probs[j];
      }
      double r = UniformAt(seed, 0x73616D70 /* "samp" */, static_cast<uint64_t>(i)) * total;
      for (int64_t j = 0; j < v; ++j) {
        r -= probs[j];
        if (r <= 0 || j == v - 1) {
          next = static_cast<int32_t>(j);
          break;
        }
      }
    }
    ctx.push_back(next);
    generated.push_back(next);
  }
  return DecodeBytes(generated);
}

Status Trainer::GatherFullParams(std::vector<float>* out) {
  std::vector<float> local(static_cast<size_t>(layout_.total));
  LOOM_RETURN_IF_ERROR(store_->CopyParams(local.data()));
  const ParamLayout full = ModelLayout(job_.model, 1);
  out->assign(static_cast<size_t>(full.total), 0.0f);
  // Every parameter lives in one pipeline stage: the sum over pp assembles the model.
  auto GatherOverPipeline = [&](std::vector<float>* v, int64_t n) -> Status {
    return place_.pp ? place_.pp->AllReduce(v->data(), n) : Status::Ok();
  };
  if (!place_.tp) {
    ScatterToFull(layout_, local.data(), 0, full, out->data());
    return GatherOverPipeline(out, full.total);
  }
  // Each TP rank fills what it holds; replicated tensors come from tp rank 0 only; then sum.
  const int r = place_.tp->rank();
  if (r != 0) {
    for (size_t k = 0; k < layout_.params.size(); ++k) {
      const ParamInfo& p = layout_.params[k];
      if (p.shard == ShardKind::kReplicated) {
        std::fill(local.begin() + p.offset, local.begin() + p.offset + p.numel(), 0.0f);
      }
    }
  }
  ScatterToFull(layout_, local.data(), r, full, out->data());
  LOOM_RETURN_IF_ERROR(place_.tp->AllReduce(out->data(), full.total));
  return GatherOverPipeline(out, full.total);
}

std::string Trainer::RestoredFrom() const {
  if (restored_.restored && start_step_ != restored_.step && ckpt_) {  // a newer checkpoint won
    return "checkpoint " + ckpt_->stats().resumed_from + " (newer than the " + restored_.from + ")";
  }
  if (restored_.restored || restored_.why_not.empty()) return restored_.from;
  const std::string ckpt = ckpt_ ? ckpt_->stats().resumed_from : "";
  return (ckpt.empty() ? std::string("a fresh start") : "checkpoint " + ckpt) +
         " (the in-memory snapshots could not be restored: " + restored_.why_not + ")";
}

RunStart Trainer::Start() const {
  return RunStart{job_,
                  place_.layout,
                  start_step_,
                  static_cast<double>(ModelLayout(job_.model, 1).total),
                  NumThreads(),
                  models_[0]->ActivationBytesPerLayer(),
                  ckpt_ ? &ckpt_stats_ : nullptr,
                  {RestoredFrom(), restored_.why_not, start_step_, restored_.seconds}};
}

Status Trainer::EvaluateIfDue(int64_t step, TrainSummary* summary) {
  if (job_.eval.every == 0 || step % job_.eval.every != 0 || step == job_.steps) {
    return Status::Ok();
  }
  LOOM_ASSIGN_OR_RETURN(const double val_loss, Evaluate());
  summary->evals.emplace_back(step, val_loss);
  for (StepObserver* o : observers_) LOOM_RETURN_IF_ERROR(o->OnEval(step, val_loss));
  return Status::Ok();
}

// Collective: the largest reason any observer gives (each of them votes, every step).
Result<int> Trainer::StopAfter(int64_t step) {
  int reason = 0;
  for (StepObserver* o : observers_) {
    LOOM_ASSIGN_OR_RETURN(const int r, o->StopReason(step));
    reason = std::max(reason, r);
  }
  return step < job_.steps ? reason : 0;  // the last step ends the run anyway
}

Result<ActivationReport> Trainer::Activations() const {
  ActivationReport a;
  const Gpt& g = *models_[0];
  a.peak = GetMemUsage(MemTag::kActivations).peak;
  a.scratch = g.ScratchBytes();
  a.slot = g.SlotBytes();
  const int64_t slot = std::max<int64_t>(1, a.slot);
  a.in_flight = (a.peak - a.scratch) / slot;
  a.remainder = (a.peak - a.scratch) % slot;
  if (place_.pp && place_.layout.vpp == 1) {
    LOOM_ASSIGN_OR_RETURN(const SimResult sim, Simulate(schedule_, PipelineCosts{}));
    a.pp_rank = place_.pp->rank();
    a.simulated_in_flight = sim.peak_in_flight[static_cast<size_t>(a.pp_rank)];
    a.schedule = ScheduleKindName(schedule_.kind);
  }
  return a;
}

// After every step: the final evaluation, the train loss, the sample; then the observers' end.
Status Trainer::Conclude(double total_s, TrainSummary* summary) {
  const int64_t steps_run = job_.steps - start_step_;
  summary->tokens_per_second =
      static_cast<double>(steps_run * job_.data.global_batch * job_.data.seq) / total_s;
  LOOM_ASSIGN_OR_RETURN(const double val_loss, Evaluate());
  summary->evals.emplace_back(job_.steps, val_loss);
  const size_t tail = std::min<size_t>(10, summary->losses.size());
  summary->train_loss = 0;
  for (size_t i = summary->losses.size() - tail; i < summary->losses.size(); ++i) {
    summary->train_loss += summary->losses[i] / static_cast<double>(tail);
  }
  if (job_.sample.tokens > 0) {
    LOOM_ASSIGN_OR_RETURN(summary->sample,
                          Sample(job_.sample.prompt, job_.sample.tokens, job_.sample.temperature,
                                 job_.sample.top_k, job_.seed));
  }
  LOOM_ASSIGN_OR_RETURN(const ActivationReport activations, Activations());
  if (ckpt_) ckpt_stats_ = ckpt_->stats();
  const RunEnd end{*summary, total_s, activations};
  for (StepObserver* o : observers_) LOOM_RETURN_IF_ERROR(o->OnEnd(end));
  return Status::Ok();
}

Result<TrainSummary> Trainer::Run(const std::vector<StepObserver*>& observers) {
  observers_.clear();
  for (StepObserver* o : observers) {
    if (o != nullptr) observers_.push_back(o);
  }
  if (ckpt_ && std::find(observers_.begin(), observers_.end(), ckpt_.get()) == observers_.end()) {
    return Internal(
        "Trainer::Run: the job saves checkpoints, but the checkpointer is not observing");
  }
  if (snap_ && std::find(observers_.begin(), observers_.end(), snap_.get()) == observers_.end()) {
    return Internal("Trainer::Run: the job takes snapshots, but the snapshotter is not observing");
  }
  Result<TrainSummary> summary = RunLoop();
  if (!summary.ok()) {
    for (StepObserver* o : observers_) o->OnFail(summary.status());
  }
  observers_.clear();
  return summary;
}

Result<TrainSummary> Trainer::RunLoop() {
  TrainSummary summary;
  summary.first_step = start_step_;
  if (ckpt_) ckpt_stats_ = ckpt_->stats();
  const RunStart start = Start();
  for (StepObserver* o : observers_) LOOM_RETURN_IF_ERROR(o->OnStart(start));
  const auto t0 = Clock::now();
  auto last = t0;
  for (int64_t step = start_step_ + 1; step <= job_.steps; ++step) {
    FaultPoint({FaultSite::kBeforeStep, place_.world_rank, step});  // fault/inject.h
    LOOM_ASSIGN_OR_RETURN(const StepStats stats, Step(step - 1));
    if (!std::isfinite(stats.loss)) {
      return Internal("loss is " + std::to_string(stats.loss) + " at step " + std::to_string(step) +
                      " (diverged; lower optimizer.lr or check the data)");
    }
    summary.losses.push_back(stats.loss);
    const auto now = Clock::now();
    StepEvent event{step, job_.steps, stats, std::chrono::duration<double>(now - last).count()};
    if (snap_) {
      event.snapshot_step = snap_->committed_step();
      event.snapshot_bytes = snap_->image_bytes();
      event.snapshot_s = snap_->stats().stored_s;
      event.snapshot_stall_s = snap_->stats().stall_s;
    }
    if (ckpt_) {
      const CheckpointStats cs = ckpt_->stats();
      event.checkpoint_step = cs.stored_step;
      event.checkpoint_s = cs.stored_s;
      event.checkpoint_stall_s = cs.stall_s;
    }
    last = now;
    for (StepObserver* o : observers_) LOOM_RETURN_IF_ERROR(o->OnStep(event));
    LOOM_RETURN_IF_ERROR(EvaluateIfDue(step, &summary));
    LOOM_ASSIGN_OR_RETURN(const int reason, StopAfter(step));
    if (reason != 0) {  // preemption or time limit: every rank agrees, saves this step and stops
      summary.stopped_by_signal = reason;
      summary.stopped_at = step;
      for (StepObserver* o : observers_) LOOM_RETURN_IF_ERROR(o->OnStop(step, reason));
      return summary;
    }
  }
  for (StepObserver* o : observers_) LOOM_RETURN_IF_ERROR(o->OnFinish(job_.steps));
  const double total_s = std::chrono::duration<double>(Clock::now() - t0).count();
  LOOM_RETURN_IF_ERROR(Conclude(total_s, &summary));
  return summary;
}

}  // namespace loom
