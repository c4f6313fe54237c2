// Measure-once calibration of this machine for `loom launch`.
#include "cli/launch_calibration.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "coordinator/service/launcher.h"
#include "core/file_util.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

// A whole calibration measures for one to two and a half minutes here; four is a hung one.
constexpr auto kDeadline = std::chrono::minutes(4);

std::string CacheDir() {
  if (const char* d = std::getenv("LOOM_CACHE_DIR"); d != nullptr && *d != '\0') return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0') {
    return std::string(x) + "/loom";
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
    return std::string(h) + "/.cache/loom";
  }
  return "";
}

std::string CpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 1);
  }
  return "?";
}

// What the measurements depend on: the machine, the ranks sharing it, the GEMM shapes, and
// what a calibration holds (kWhat: raised when loom calibrate measures something new, so that
// files cached before are measured again).
constexpr const char* kWhat = "time_sharing";

std::string Key(const JobConfig& job, int ranks) {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const ModelConfig& m = job.model;
  std::string k =
      std::string(host) + "|" + CpuModel() + "|" +
      std::to_string(std::thread::hardware_concurrency()) + "|" + std::to_string(ranks) + "|" +
      ModelFamilyName(m.family) + "|" + std::to_string(m.vocab) + "," + std::to_string(m.layers) +
      "," + std::to_string(m.heads) + "," + std::to_string(m.hidden) + "," +
      std::to_string(m.ffn()) + "," + std::to_string(m.kv()) + "|" + std::to_string(job.data.seq) +
      "," + std::to_string(job.data.micro_batch) + "|" + PrecisionName(job.precision) + "|" + kWhat;
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016zx", std::hash<std::string>{}(k));
  return hex;
}

// Runs argv to completion within the deadline; its output goes to `log`.
Status RunStep(const std::vector<std::string>& argv, const std::string& log,
               const std::string& what) {
  std::vector<std::string> wrapped = {"/bin/sh", "-c", ""};
  // Single-quoted for the shell; a quote inside is closed, escaped and reopened.
  auto quote = [](const std::string& a) {
    std::string q = "'";
    for (char ch : a) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return q + "'";
  };
  std::string cmd = "exec";
  for (const std::string& a : argv) cmd += " " + quote(a);
  wrapped[2] = cmd + " >> " + quote(log) + " 2>&1";
  LOOM_ASSIGN_OR_RETURN(WorkerProcesses p, WorkerProcesses::Start(wrapped, {}));
  const auto until = std::chrono::steady_clock::now() + kDeadline;
  int status = 0;
  while (!p.Exited(&status)) {
    if (std::chrono::steady_clock::now() > until) {
      p.Stop(2000);
      return DeadlineExceeded(what + " did not finish within 4 minutes (its output: " + log + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (status != 0) {
    return Internal(what + " failed, " + DescribeExit(status) + " (its output: " + log + ")");
  }
  return Status::Ok();
}

}  // namespace

Result<LocalCalibration> LocalhostCalibration(const JobConfig& job, const std::string& job_path,
                                              const std::string& loom, int ranks) {
  LocalCalibration out;
  const char* env = std::getenv("LOOM_CALIBRATION");
  if (env != nullptr && std::string(env) == "none") return out;
  if (env != nullptr && *env != '\0') {
    LOOM_ASSIGN_OR_RETURN(out.calibration, LoadCalibration(env));
    out.path = env;
    out.from_env = true;
    return out;
  }
  const std::string dir = CacheDir();
  if (dir.empty()) return out;  // nowhere to keep it: plan uncalibrated
  out.path = dir + "/localhost-" + Key(job, ranks) + ".calibration.json";
  std::error_code ec;
  if (fs::exists(out.path, ec)) {
    Result<Calibration> cached = LoadCalibration(out.path);
    // Before bf16 was measured in bf16, a bf16 job's file held fp32 GEMMs: measured again.
    const Precision want = job.precision;  // what the workers train in, and the key's
    if (cached.ok() && cached->has_precision && cached->precision != want) {
      cached = InvalidArgument(std::string("measured in ") + PrecisionName(cached->precision) +
                               ", the job is " + PrecisionName(want));
    }
    if (cached.ok()) {
      out.calibration = *cached;
      const auto written = fs::last_write_time(out.path, ec);
      if (!ec) {
        out.age_s = std::max(
            0.0, std::chrono::duration<double>(fs::file_time_type::clock::now() - written).count());
      }
      return out;
    }
    std::fprintf(stderr,
                 "loom launch: the cached calibration %s is not usable (%s); measuring again\n",
                 out.path.c_str(), cached.status().message().c_str());
  }
  LOOM_RETURN_IF_ERROR(MakeDirs(dir));
  const std::string tmp = out.path + ".partial", log = out.path + ".log";
  fs::remove(tmp, ec);
  fs::remove(log, ec);
  std::printf(
      "loom launch: measuring this machine for the planner once (loom calibrate, about two minutes "
      "on 2 cores); cached in %s\n",
      out.path.c_str());
  std::fflush(stdout);
  auto cleanup = [&] { fs::remove(tmp, ec); };
  // In the precision the workers train in (the job's, or loom launch's --precision).
  const std::string precision = PrecisionName(job.precision);
  Status st =
      RunStep({loom, "calibrate", "--job", job_path, "--precision", precision, "--output", tmp},
              log, "loom calibrate (one rank)");
  // A rank per core at most: concurrent measurements on time-shared cores are timing noise;
  // the planner scales the per-core rates by the ranks' share of the cores
  // (DeviceType::core_share).
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int measure = std::min(ranks, cores);
  auto mpirun = [&](int np, const char* skip) {
    std::vector<std::string> mpi = {"mpirun", "-np", std::to_string(np)};
    if (np > cores) mpi.push_back("--oversubscribe");
    if (::geteuid() == 0) mpi.push_back("--allow-run-as-root");
    mpi.insert(mpi.end(),
               {loom, "calibrate", "--job", job_path, "--precision", precision, "--merge", tmp});
    if (skip != nullptr) mpi.push_back(skip);
    return RunStep(mpi, log, "mpirun -np " + std::to_string(np) + " loom calibrate --merge");
  };
  if (st.ok() && measure > 1) st = mpirun(measure, ranks > cores ? "--skip-comm" : nullptr);
  // More ranks than cores: their collectives wait for descheduled peers, so they are measured
  // as the job will run them, all ranks sharing the cores.
  if (st.ok() && ranks > cores) st = mpirun(ranks, "--skip-compute");
  if (!st.ok()) {
    cleanup();
    return st;
  }
  Result<Calibration> measured = LoadCalibration(tmp);
  if (measured.ok() && measured->precision != job.precision) {
    measured = Internal(tmp + ": measured in " + PrecisionName(measured->precision) +
                        ", not the job's " + precision);
  }
  if (!measured.ok()) {
    cleanup();
    return measured.status();
  }
  const Calibration c = *measured;
  fs::rename(tmp, out.path, ec);
  if (ec) {
    cleanup();
    return IoError("rename " + tmp + " to " + out.path + ": " + ec.message());
  }
  fs::remove(log, ec);
  out.calibration = c;
  out.measured = true;
  return out;
}

}  // namespace loom
