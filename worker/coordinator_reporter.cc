// Step reports for the coordinator.
#include "worker/coordinator_reporter.h"

#include <algorithm>
#include <map>
#include <thread>

#include "core/logging.h"
#include "core/memory.h"
#include "core/threads.h"

namespace loom {
namespace {

// The calls `read`, summed per (op, group) into the report.
void SummariseTrace(const TraceRead& read, proto::StepReport* report) {
  for (const CommSummary& c : SummariseCalls(read.records)) {
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

void CoordinatorReporter::AddEvidence(const TraceRead& read, int64_t end_ns, double step_s,
                                      proto::StepReport* report) {
  const int64_t off = client_->clock_offset_ns();
  proto::StepEvidence& ev = *report->mutable_evidence();
  const auto step_ns = static_cast<int64_t>(step_s * 1e9);
  ev.set_start_ns(end_ns - step_ns + off);
  ev.set_end_ns(end_ns + off);
  ev.set_clock_offset_ns(off);
  ev.set_lost(static_cast<int64_t>(read.lost));
  std::map<std::pair<std::string, int>, int> index;  // group -> its place in ev.groups
  int64_t waited = 0;
  for (const TraceRecord& rec : read.records) {
    const std::pair<std::string, int> key{rec.group, rec.group_root};
    auto [it, added] = index.emplace(key, ev.groups_size());
    if (added) {
      proto::TraceGroupRef& g = *ev.add_groups();
      g.set_name(rec.group);
      g.set_root(rec.group_root);
      if (described_.insert(key).second) {  // its members, the first time only
        for (const TraceGroup& tg : backend_->trace().Groups()) {
          if (tg.name == rec.group && !tg.members.empty() && tg.members.front() == rec.group_root) {
            for (int m : tg.members) g.add_members(m);
            break;
          }
        }
      }
    }
    proto::TraceCall& c = *ev.add_calls();
    c.set_op(CommOpName(rec.op));
    c.set_group(it->second);
    c.set_seq(rec.seq);
    c.set_issue_ns(rec.enqueue_ns + off);
    c.set_enter_ns(rec.start_ns + off);
    c.set_exit_ns(rec.end_ns != 0 ? rec.end_ns + off : 0);
    c.set_bytes(rec.bytes);
    c.set_peer(rec.peer);
    c.set_tag(rec.tag);
    c.set_wait_ns(rec.wait_ns);
    if (rec.main_thread_wait) waited += rec.wait_ns;
  }
  ev.set_compute_ns(std::max<int64_t>(0, step_ns - waited));
  const int64_t cpu = ThreadCpuNs();
  if (last_cpu_ns_ > 0) ev.set_compute_cpu_ns(cpu - last_cpu_ns_);
  last_cpu_ns_ = cpu;
  if (!cpus_.empty()) ev.set_cpus(cpus_);
}

Status CoordinatorReporter::OnFinish(int64_t /*steps*/) {
  if (rank_ == 0 && evidence_steps_ > 0 && step_ns_ > 0) {
    // What the detector's evidence costs the training thread (the client thread sends it).
    LOOM_LOG(DEBUG, COORD) << "detector evidence: " << evidence_ns_ / evidence_steps_ / 1000
                           << " us per step on the "
                           << "training thread ("
                           << 100.0 * static_cast<double>(evidence_ns_) /
                                  static_cast<double>(step_ns_)
                           << "% of step time), " << evidence_bytes_ / evidence_steps_
                           << " bytes per report";
  }
  return Status::Ok();
}

CoordinatorReporter::CoordinatorReporter(CoordinatorClient* client, int rank, Backend* backend)
    : client_(client),
      rank_(rank),
      backend_(backend),
      cursor_(backend != nullptr ? backend->trace().End() : TraceCursor{}) {}

Status CoordinatorReporter::OnStart(const RunStart& start) {
  tokens_per_step_ = start.job.data.global_batch * start.job.data.seq;
  if (backend_ != nullptr) backend_->trace().SetMainThread(std::this_thread::get_id());
  last_cpu_ns_ = ThreadCpuNs();
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
    const MemUsage use = GetMemUsage(static_cast<MemTag>(t));
    mem += use.current;
    peak += use.peak;
    proto::MemoryUse& m = *r.add_memory();
    m.set_category(MemTagName(static_cast<MemTag>(t)));
    m.set_bytes(use.current);
    m.set_peak_bytes(use.peak);
  }
  r.set_memory_bytes(mem);
  r.set_peak_memory_bytes(peak);
  if (backend_ != nullptr) {
    const int64_t end_ns = NowNs();
    const TraceRead read = backend_->trace().Read(&cursor_);
    SummariseTrace(read, &r);
    if (client_->plan().detect()) {
      const int64_t t0 = NowNs();
      AddEvidence(read, end_ns, e.step_s, &r);
      evidence_ns_ += NowNs() - t0;
      evidence_bytes_ += static_cast<int64_t>(r.evidence().ByteSizeLong());
      step_ns_ += static_cast<int64_t>(e.step_s * 1e9);
      ++evidence_steps_;
    }
  }
  r.set_snapshot_step(e.snapshot_step);
  r.set_snapshot_bytes(static_cast<int64_t>(e.snapshot_bytes));
  r.set_snapshot_s(e.snapshot_s);
  r.set_snapshot_stall_s(e.snapshot_stall_s);
  r.set_checkpoint_step(e.checkpoint_step);
  r.set_checkpoint_s(e.checkpoint_s);
  r.set_checkpoint_stall_s(e.checkpoint_stall_s);
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
