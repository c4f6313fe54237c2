// `loom calibrate`: measures this machine for the planner and writes (or merges into) a
// calibration file (coordinator/calibration.h, docs/PLANNER.md): what the runtime pays for the
// job's GEMMs, attention, element-wise work and optimizer step, and under mpirun for its
// collectives and for transfers overlapping compute (cli/calibrate_measure.h).
// Every rank measures compute at the same time with cores / ranks threads, as `loom train` runs;
// so calibrating once alone and once under `mpirun -np N` (with --merge) gives samples for both
// thread counts.
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/calibrate_measure.h"
#include "cli/commands.h"
#include "cli/validators.h"
#include "comm/backend.h"
#include "coordinator/calibration.h"
#include "coordinator/plan_job.h"
#include "core/file_util.h"
#include "core/threads.h"

namespace loom {
namespace {

struct CalibrateOptions {
  std::string job, output = "calibration.json", merge;
  double seconds = 0.3;  // minimum measuring time per sample, over all passes
  int passes = 3;        // passes over the compute samples (the median pass counts)
  int64_t max_bytes = 64 << 20;
  // Measure only one half: `loom launch` measures compute with a rank per core at most and, when
  // it runs more ranks than cores, the collectives with all of them (cli/launch_calibration.h).
  bool skip_compute = false, skip_comm = false;
  std::string precision;  // --precision: the job's overridden ("": the job's `precision`)
};

bool UnderMpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_RANK");
}

std::string Source(int world, int threads) {
  char host[256] = "unknown";
  gethostname(host, sizeof(host) - 1);
  std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M", std::localtime(&now));
  return std::string("loom calibrate on ") + host + " at " + date + ", " + std::to_string(world) +
         " rank(s) x " + std::to_string(threads) + " thread(s)";
}

// Runs of the communication measurements a calibration holds (one smallest two-rank all-reduce
// sample per run).
int CommRuns(const Calibration& c) {
  return static_cast<int>(std::count_if(
      c.collectives.begin(), c.collectives.end(),
      [](const auto& s) { return s.op == "all_reduce" && s.ranks == 2 && s.bytes == 4096; }));
}

// Adds `fresh` to `base`: samples appended (the planner takes the median of repeated ones), the
// link fit replaced, the overlap slowdown averaged over the runs that measured it.
void Merge(const Calibration& fresh, Calibration* base) {
  const int runs = CommRuns(*base);
  if (!fresh.collectives.empty()) {
    base->overlap_slowdown = (base->overlap_slowdown * runs + fresh.overlap_slowdown) / (runs + 1);
  }
  base->source += "; " + fresh.source;
  if (!fresh.gemm.empty() || !base->has_precision) {  // the precision of the compute samples
    base->has_precision = true;
    base->precision = fresh.precision;
  }
  for (const GemmSample& s : fresh.gemm) base->gemm.push_back(s);
  for (const AttentionSample& s : fresh.attention) base->attention.push_back(s);
  for (const CollectiveSample& s : fresh.collectives) base->collectives.push_back(s);
  for (const MemorySample& s : fresh.memory) base->memory.push_back(s);
  for (const MemorySample& s : fresh.optimizer) base->optimizer.push_back(s);
  for (const TimeSharingSample& s : fresh.time_sharing) base->time_sharing.push_back(s);
  base->op_overhead = std::min(base->op_overhead, fresh.op_overhead);
  if (fresh.intra.bandwidth > 0) base->intra = fresh.intra;
}

// One file, one precision: the planner keeps or drops a file's GEMM samples together.
Status SamePrecision(const Calibration& base, Precision measured, const CalibrateOptions& o) {
  if (!base.has_precision || base.precision == measured) return Status::Ok();
  return InvalidArgument(
      o.merge + ": field 'precision': the file was measured in " + PrecisionName(base.precision) +
      ", this run measures " + PrecisionName(measured) +
      (!o.precision.empty() ? std::string(" (--precision)")
       : o.job.empty()      ? std::string(" (no --job)")
                            : " (the precision of " + o.job + ")") +
      ": merge into a file of " + PrecisionName(measured) + " or write a new one with --output");
}

Status RunCalibrate(const CalibrateOptions& o, std::shared_ptr<Backend>* backend) {
  std::unique_ptr<PlanJob> job;
  if (!o.job.empty()) {
    LOOM_ASSIGN_OR_RETURN(JobConfig config, LoadJobConfig(o.job, JobUse::kPlan));
    job = std::make_unique<PlanJob>(PlanJobOf(config));
    // What the runtime pays: the precision the job trains in (plan.precision, loom plan's
    // what-if, is priced from the manifest's peak unless a calibration of it is given).
    job->precision = config.precision;
  }
  if (!o.precision.empty()) {  // CLI11 checked the name; loom launch passes its --precision
    if (!job) return InvalidArgument("--precision: needs --job (the GEMM shapes measured)");
    LOOM_ASSIGN_OR_RETURN(job->precision, ParsePrecision(o.precision));
  }
  int world = 1, rank = 0, local = 1;
  if (UnderMpirun()) {
    LOOM_ASSIGN_OR_RETURN(*backend, CreateBackend(BackendKind::kMpi));
    world = (*backend)->world_size();
    rank = (*backend)->world_rank();
    local = (*backend)->local_size();
  }
  const int threads = DefaultThreads(local);
  ConfigureThreads(threads);
  const int cores = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  Calibration cal;
  cal.source = Source(world, threads);
  cal.has_precision = true;
  cal.precision = job ? job->precision : Precision::kFp32;  // what the GEMMs are measured in
  std::error_code ec;
  // Refused before measuring; a run of the collectives alone (--skip-compute) adds no samples
  // of a precision.
  if (!o.merge.empty() && !o.skip_compute && std::filesystem::exists(o.merge, ec)) {
    LOOM_ASSIGN_OR_RETURN(Calibration base, LoadCalibration(o.merge));
    LOOM_RETURN_IF_ERROR(SamePrecision(base, cal.precision, o));
  }
  if (rank == 0) {
    std::fprintf(stderr, "loom calibrate: %d rank(s) x %d thread(s): GEMMs, attention, memory\n",
                 world, threads);
  }
  if (!o.skip_compute) {
    LOOM_RETURN_IF_ERROR(
        MeasureCompute(job.get(), threads, std::max(world, cores), o.seconds, o.passes, &cal));
  }
  if (world > 1 && !o.skip_comm) {
    if (rank == 0) std::fprintf(stderr, "loom calibrate: collectives over 2..%d ranks\n", world);
    LOOM_RETURN_IF_ERROR(MeasureComm(**backend, o.max_bytes, job.get(), &cal));
  }
  if (rank != 0) return Status::Ok();
  std::string output = o.output;
  if (!o.merge.empty()) {
    LOOM_ASSIGN_OR_RETURN(Calibration base, LoadCalibration(o.merge));  // its precision checked
    Merge(cal, &base);
    cal = base;
    if (output == "calibration.json") output = o.merge;
  }
  LOOM_RETURN_IF_ERROR(WriteFileAtomic(output, CalibrationToJson(cal)));
  std::printf("wrote %s: %zu GEMM, %zu attention, %zu collective samples", output.c_str(),
              cal.gemm.size(), cal.attention.size(), cal.collectives.size());
  if (!cal.memory.empty()) {
    std::printf("; memory-bound kernels %.1f GB/s per rank, %.1f us per kernel",
                cal.memory.back().bandwidth / 1e9, cal.op_overhead * 1e6);
  }
  if (cal.intra.bandwidth > 0) {
    std::printf("; link %.2f GB/s, %.1f us", cal.intra.bandwidth / 1e9, cal.intra.latency * 1e6);
  }
  // The waits per synchronisation this run measured: the last samples (a merge appends, and
  // MeasureComm measures them last).
  std::string waits;
  int wait_ranks = 0;
  for (auto s = cal.collectives.rbegin(); s != cal.collectives.rend() && s->op == "sync_wait";
       ++s) {
    wait_ranks = s->ranks;
    char one[64];
    std::snprintf(one, sizeof(one), "%.0f us at %lld KiB", s->seconds * 1e6,
                  static_cast<long long>(s->bytes / 1024));
    waits = waits.empty() ? one : std::string(one) + ", " + waits;
  }
  if (!waits.empty()) {
    std::printf("; a synchronisation of %d ranks waits for the latest %s", wait_ranks,
                waits.c_str());
  }
  if (!cal.time_sharing.empty()) {
    const TimeSharingSample& t = cal.time_sharing.back();
    std::printf("; %d ranks sharing %d cores keep %.0f%% of their compute", t.ranks, t.cores,
                100 * t.efficiency);
  }
  std::printf("\n");
  return Status::Ok();
}

}  // namespace

void AddCalibrateCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<CalibrateOptions>();
  CLI::App* cmd = app.add_subcommand("calibrate", "Measure this machine for the planner");
  cmd->add_option("--job", o->job, "Job file: measure the GEMM shapes of its model");
  cmd->add_option("--output", o->output, "Calibration file to write (JSON)");
  cmd->add_option("--merge", o->merge, "Add the measurements to this calibration file");
  cmd->add_option("--passes", o->passes, "Passes over the compute samples (median kept)")
      ->check(CLI::Range(1, 99));
  cmd->add_option("--seconds", o->seconds, "Minimum measuring time per sample (all passes)")
      ->check(CLI::Range(0.01, 60.0));
  cmd->add_option("--max-bytes", o->max_bytes, "Largest collective message")
      ->check(CLI::Range(int64_t{4096}, int64_t{1} << 32));
  cmd->add_option("--precision", o->precision,
                  "fp32 or bf16: measure the GEMMs in this precision (overrides the job's "
                  "`precision`)")
      ->check(PrecisionFlag());
  cmd->add_flag("--skip-compute", o->skip_compute, "Measure the collectives only");
  cmd->add_flag("--skip-comm", o->skip_comm, "Measure the compute only")
      ->excludes("--skip-compute");
  cmd->callback([o, exit_code] {
    std::shared_ptr<Backend> backend;
    Status st = RunCalibrate(*o, &backend);
    *exit_code = st.ok() ? 0 : ReportError("calibrate", st);
  });
}

}  // namespace loom
