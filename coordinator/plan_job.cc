// The planner's view of a job.
#include "coordinator/plan_job.h"

namespace loom {

PlanJob PlanJobOf(const JobConfig& job) {
  PlanJob p;
  p.file = job.path;
  p.model = job.model;
  p.seq = job.data.seq;
  p.global_batch = job.data.global_batch;
  p.precision = job.plan.precision;
  p.headroom = job.plan.headroom;
  p.devices = job.plan.devices;
  p.selective_recompute = job.plan.selective_recompute;
  p.dropout = job.plan.dropout;
  const ParallelConfig& par = job.parallel;
  p.overlap = par.overlap;
  if (job.data.micro_batch > 0) p.micro_batch = job.data.micro_batch;
  p.tp = par.tp;
  p.cp = par.cp;
  p.pp = par.pp;
  p.vpp = par.vpp;
  p.dp = par.dp;
  p.zero = par.zero;
  p.sp = par.sp;
  p.first_stage_layers = par.first_stage_layers;
  p.last_stage_layers = par.last_stage_layers;
  if (!par.schedule.empty()) {
    Result<ScheduleKind> kind = ParseScheduleKind(par.schedule);
    if (kind.ok()) p.schedule = *kind;
  }
  p.recompute = job.runtime.recompute;
  p.vocab_chunk = job.runtime.vocab_chunk;
  return p;
}

Result<PlanJob> LoadPlanJob(const std::string& path) {
  LOOM_ASSIGN_OR_RETURN(JobConfig job, LoadJobConfig(path, JobUse::kPlan));
  return PlanJobOf(job);
}

}  // namespace loom
