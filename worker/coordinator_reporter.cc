// Step reports for the coordinator.
#include "worker/coordinator_reporter.h"

#include "core/memory.h"

namespace loom {
namespace {

// The calls closed since `*cursor`, summed per (op, group) into the report.
void SummariseTrace(Backend* backend, TraceCursor* cursor, proto::StepReport* report) {
  if (backend == nullptr) return;
  for (const CommSummary& c : SummariseCalls(backend->trace().Read(cursor).records)) {
    proto::CollectiveSummary& s = *report->add_collectives();
    s.set_op(c.op);
    s.set_group(c.group);
    s.set_count(c.count);
    s.set_bytes(c.bytes);
    s.set_busy_s(c.busy_s);
    s.set_wait_s(c.wait_s);
    s.set_max_s(c.max_s);
  }
}

}  // namespace

CoordinatorReporter::CoordinatorReporter(CoordinatorClient* client, int rank, Backend* backend)
    : client_(client),
      rank_(rank),
      backend_(backend),
      cursor_(backend != nullptr ? backend->trace().End() : TraceCursor{}) {}

Status CoordinatorReporter::OnStart(const RunStart& start) {
  tokens_per_step_ = start.job.data.global_batch * start.job.data.seq;
  restore_ = start.restore;
  return Status::Ok();
}

Status CoordinatorReporter::OnStep(const StepEvent& e) {
  proto::StepReport r;
  r.set_rank(rank_);
  r.set_step(e.step);
  r.set_loss(e.stats.loss);
  r.set_step_s(e.step_s);
  r.set_tokens_per_s(e.step_s > 0 ? static_cast<double>(tokens_per_step_) / e.step_s : 0);
  int64_t mem = 0, peak = 0;
  for (int t = 0; t < static_cast<int>(MemTag::kCount); ++t) {
    mem += GetMemUsage(static_cast<MemTag>(t)).current;
    peak += GetMemUsage(static_cast<MemTag>(t)).peak;
  }
  r.set_memory_bytes(mem);
  r.set_peak_memory_bytes(peak);
  SummariseTrace(backend_, &cursor_, &r);
  r.set_snapshot_step(e.snapshot_step);
  r.set_snapshot_bytes(static_cast<int64_t>(e.snapshot_bytes));
  if (last_step_ == 0 && (!restore_.from.empty() || !restore_.why_not.empty())) {
    r.set_restored_from(restore_.from);
    r.set_restored_step(restore_.step);
    r.set_restore_s(restore_.seconds);
  }
  client_->ReportStep(std::move(r));
  last_step_ = e.step;
  return client_->status();  // the coordinator is gone: stop instead of training blind
}

}  // namespace loom
