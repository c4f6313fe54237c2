// Universal checkpoint speed, side by side with the disk in the same run (mpirun -np 2: dp = 2,
// ZeRO-1, so each rank writes half of the model and optimizer state):
//   save    a distributed save (snapshot, write, fsync, commit) vs every rank writing the same
//           number of bytes with plain sequential write() + fsync to the same directory, in
//           alternating rounds; ratio of throughputs.
//   stall   training with an asynchronous save every 2 steps: the time the step loop is blocked
//           per save (snapshot copy, polls) as a fraction of one step's time.
//   load    resuming into one process (every byte read, checked, placed) vs a raw read.
//   reshard `loom ckpt reshard` (a child process: wall time, peak RSS) vs a raw sequential read of
//           the same data files; ratio of throughputs, and peak RSS against the largest tensor.
// Run: mpirun -np 2 build/bench/checkpoint_bench [--dir D] [--rounds N] [--reshard-from CKPT]
// (CKPT: reshard that checkpoint, e.g. a larger model's, instead of the one saved here; the
// outputs, 4 x rounds x its size, are kept on the disk until the end where there is room). Last
// line:
//   save_vs_disk=... stall_fraction=... reshard_vs_read=...
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/format.h"
#include "checkpoint/reader.h"
#include "comm/backend.h"
#include "core/file_util.h"
#include "core/threads.h"
#include "model/config.h"
#include "worker/checkpointer.h"
#include "worker/trainer.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Plain sequential writes of `bytes` bytes in 8 MiB pieces, then fsync: the disk's pace.
loom::Status PlainWrite(const std::string& path, uint64_t bytes) {
  std::vector<char> buf(8 << 20, 1);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return loom::ErrnoError("create " + path, errno);
  for (uint64_t left = bytes; left > 0;) {
    const ssize_t w = ::write(fd, buf.data(), std::min<uint64_t>(left, buf.size()));
    if (w <= 0) return loom::ErrnoError("write " + path, errno);
    left -= static_cast<uint64_t>(w);
  }
  if (::fsync(fd) != 0) return loom::ErrnoError("fsync " + path, errno);
  ::close(fd);
  return loom::Status::Ok();
}

// The same written with O_DIRECT (no page cache; the tail below 4 KiB buffered), the faster way
// on this VM's disk while another thread reads (see docs/BENCHMARKS.md).
loom::Status DirectWrite(const std::string& path, uint64_t bytes) {
  constexpr size_t kBuf = 8 << 20, kAlign = loom::kDataAlignment;
  void* mem = nullptr;
  if (::posix_memalign(&mem, kAlign, kBuf) != 0) return loom::Internal("posix_memalign");
  std::unique_ptr<char, decltype(&std::free)> buf(static_cast<char*>(mem), &std::free);
  std::memset(buf.get(), 1, kBuf);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
  if (fd < 0) return PlainWrite(path, bytes);  // no O_DIRECT here
  const uint64_t bulk = bytes / kAlign * kAlign;
  for (uint64_t at = 0; at < bulk;) {
    const ssize_t w = ::pwrite(fd, buf.get(), std::min<uint64_t>(bulk - at, kBuf), at);
    if (w <= 0) {
      ::close(fd);
      return loom::ErrnoError("write " + path, errno);
    }
    at += static_cast<uint64_t>(w);
  }
  loom::Status st;
  if (bytes > bulk &&
      (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_DIRECT) != 0 ||  // the tail buffered
       ::pwrite(fd, buf.get(), bytes - bulk, bulk) < 0)) {
    st = loom::ErrnoError("write " + path, errno);
  }
  if (st.ok() && ::fsync(fd) != 0) st = loom::ErrnoError("fsync " + path, errno);
  ::close(fd);
  return st;
}

// Reads every file of `dir` sequentially; returns the bytes read.
uint64_t RawRead(const std::string& dir) {
  std::vector<char> buf(8 << 20);
  uint64_t total = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const int fd = ::open(e.path().c_str(), O_RDONLY);
    for (ssize_t r; (r = ::read(fd, buf.data(), buf.size())) > 0;)
      total += static_cast<uint64_t>(r);
    ::close(fd);
  }
  return total;
}

// Copies every file of `dir` into `out` (created) with sequential reads and writes, then
// fsyncs the copies: the least any tool must do that reads the checkpoint and writes it anew.
void RawCopy(const std::string& dir, const std::string& out) {
  fs::create_directories(out);
  std::vector<char> buf(8 << 20);
  std::vector<int> written;
  for (const auto& e : fs::directory_iterator(dir)) {
    const int in = ::open(e.path().c_str(), O_RDONLY);
    const int to = ::open((out + "/" + e.path().filename().string()).c_str(),
                          O_WRONLY | O_CREAT | O_TRUNC, 0644);
    for (ssize_t r; (r = ::read(in, buf.data(), buf.size())) > 0;) {
      if (::write(to, buf.data(), static_cast<size_t>(r)) != r) break;
    }
    ::close(in);
    written.push_back(to);
  }
  for (int fd : written) {
    ::fsync(fd);
    ::close(fd);
  }
}

// Runs argv as a child with stdout to `out`; returns wall seconds, or -1 on failure.
double RunChild(std::vector<std::string> args, const std::string& out) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const auto t0 = Clock::now();
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? Since(t0) : -1;
}

// Drops the page cache (root only) so the next reads come from the disk.
bool DropCaches() {
  ::sync();
  const int fd = ::open("/proc/sys/vm/drop_caches", O_WRONLY);
  if (fd < 0) return false;
  const bool ok = ::write(fd, "3\n", 2) == 2;
  ::close(fd);
  return ok;
}

// 27M parameters (wte 16384 x 512 is the largest tensor, 33.5 MB): 330 MB of weights and moments.
const loom::ModelConfig kModel{16384, 64, 6, 8, 512};

struct Figures {
  double loom_s = 0, plain_s = 0, save_bytes = 0;
  double step_s = 0, step_saving_s = 0, stall_per_save_s = 0;
  double save_part_s = 0, copy_wait_s = 0, poll_s = 0;
  double reshard_s = 0, read_s = 0, read_bytes = 0;  // from the page cache
  bool cold = false;                                 // the page cache could be dropped
  bool outputs_kept = false;  // reshard outputs kept to the end (else deleted + 15 s settling)
  double cold_reshard_s = 0, cold_read_s = 0;  // from the disk
  double cold_copy_s = 0;                      // read + write + fsync, from the disk
  double cold_floor_s = 0;  // reading the files while writing as many bytes, from the disk
  double cold_other_s = 0;  // reshard from the disk with its output on tmpfs (0: not run)
  int64_t reshard_rss = 0, largest_tensor = 0;
  std::string reshard_src;
  double load_s = 0, load_cold_s = 0, load_read_cold_s = 0;  // resuming into one process
};

loom::JobConfig BenchJob(const std::string& dir) {
  loom::JobConfig job;
  job.path = "checkpoint_bench";
  job.model = kModel;
  job.data.text = LOOM_SOURCE_DIR "/data/tinyshakespeare.txt";
  job.data.val_fraction = 0;
  job.data.seq = 64;
  job.data.global_batch = 4;
  job.data.micro_batch = 2;
  job.optim.lr = 1e-4;
  job.steps = 1000;
  job.checkpoint.dir = dir + "/ckpt";
  job.checkpoint.keep = 0;  // old checkpoints are deleted outside the timed regions
  job.checkpoint.every = 2;
  return job;
}

loom::Status Run(loom::Backend& rt, const std::string& dir, int rounds, Figures* f) {
  const int rank = rt.world_rank();
  LOOM_ASSIGN_OR_RETURN(const loom::Placement place,
                        loom::ProcessGroups::Create(rt, loom::Layout{.dp = 2, .zero = 1}));
  loom::Communicator* world = place.world;
  const loom::JobConfig job = BenchJob(dir);
  LOOM_ASSIGN_OR_RETURN(auto trainer, loom::Trainer::Create(job, place));
  int64_t step = 0;
  for (; step < 2; ++step) LOOM_RETURN_IF_ERROR(trainer->Step(step).status());  // warm-up

  loom::Checkpointer& ck = *trainer->checkpointer();
  // Save throughput, alternating with plain writes of the same size.
  std::vector<double> loom_t, plain_t;
  for (int r = 0; r < rounds; ++r) {
    const uint64_t bytes_before = ck.stats().bytes;
    LOOM_RETURN_IF_ERROR(world->Barrier());
    auto t0 = Clock::now();
    LOOM_RETURN_IF_ERROR(ck.AfterStep(2 * (step + r)));  // starts a save (every 2 steps)
    LOOM_RETURN_IF_ERROR(ck.Finish(2 * (step + r)));     // waits until committed everywhere
    LOOM_RETURN_IF_ERROR(world->Barrier());
    loom_t.push_back(Since(t0));
    if (rank == 0) {  // retention, untimed: deleting old files is not part of saving
      auto list = loom::ListCheckpoints(job.checkpoint.dir);
      for (size_t i = 1; i < list.size(); ++i) fs::remove_all(list[i].second);
    }
    const uint64_t mine = ck.stats().bytes - bytes_before;
    float bytes = static_cast<float>(mine);
    LOOM_RETURN_IF_ERROR(world->AllReduce(&bytes, 1));
    f->save_bytes = bytes;
    const std::string plain = dir + "/plain_" + std::to_string(rank);
    LOOM_RETURN_IF_ERROR(world->Barrier());
    t0 = Clock::now();
    LOOM_RETURN_IF_ERROR(PlainWrite(plain, mine));
    LOOM_RETURN_IF_ERROR(world->Barrier());
    plain_t.push_back(Since(t0));
    fs::remove(plain);
  }
  f->loom_s = Median(loom_t);
  f->plain_s = Median(plain_t);

  // Stall: steps without saving, then with an asynchronous save every 2 steps (the update of the
  // step after a save waits for the state copy; that wait and the polls are the stall).
  step = 2 * (step + rounds);
  std::vector<double> plain_steps, saving_steps;
  for (int s = 0; s < 6; ++s, ++step) {
    auto t0 = Clock::now();
    LOOM_RETURN_IF_ERROR(trainer->Step(step).status());
    plain_steps.push_back(Since(t0));
  }
  const loom::CheckpointStats before = ck.stats();
  for (int s = 0; s < 8; ++s, ++step) {
    auto t0 = Clock::now();
    LOOM_RETURN_IF_ERROR(trainer->Step(step).status());
    LOOM_RETURN_IF_ERROR(ck.AfterStep(step + 1));
    saving_steps.push_back(Since(t0));
  }
  const loom::CheckpointStats& after = ck.stats();
  const int saves = after.saves - before.saves;
  f->stall_per_save_s = (after.stall_s - before.stall_s) / saves;
  f->save_part_s = (after.save_s - before.save_s) / saves;
  f->copy_wait_s = (after.copy_wait_s - before.copy_wait_s) / saves;
  f->poll_s = (after.poll_s - before.poll_s) / saves;
  LOOM_RETURN_IF_ERROR(ck.Finish(step));
  f->step_s = Median(plain_steps);
  f->step_saving_s = Median(saving_steps);

  return world->Barrier();
}

// Resuming into one process (tp1, dp1: every saved byte is read, checked and placed, with the
// intersection work of another layout than the saved dp2 zero1) vs a raw read of the same
// files; after MPI is shut down, like the reshard.
loom::Status RunLoad(const std::string& dir, int rounds, Figures* f) {
  const loom::JobConfig job = BenchJob(dir);
  const std::string src = job.checkpoint.dir + "/" + loom::ReadLatest(job.checkpoint.dir);
  loom::Placement one;                                                   // one process
  LOOM_ASSIGN_OR_RETURN(auto trainer, loom::Trainer::Create(job, one));  // loads once, untimed
  loom::Checkpointer& ck = *trainer->checkpointer();
  std::vector<double> warm, cold, cold_read;
  auto load = [&]() -> loom::Result<double> {
    const auto t0 = Clock::now();
    LOOM_ASSIGN_OR_RETURN(const int64_t step, ck.Restore());
    if (step == 0) return loom::Internal("the benchmark's checkpoint was not resumed");
    return Since(t0);
  };
  for (int r = 0; r < rounds; ++r) {
    for (int turn = 0; turn < 2; ++turn) {  // taking turns going first
      if ((turn == 0) == (r % 2 == 0)) {
        if (DropCaches()) {
          LOOM_ASSIGN_OR_RETURN(const double t, load());
          cold.push_back(t);
        }
      } else if (DropCaches()) {
        const auto t0 = Clock::now();
        RawRead(src);
        cold_read.push_back(Since(t0));
      }
    }
    LOOM_ASSIGN_OR_RETURN(const double t, load());
    warm.push_back(t);
  }
  f->load_s = Median(warm);
  if (!cold.empty() && !cold_read.empty()) {
    f->load_cold_s = Median(cold);
    f->load_read_cold_s = Median(cold_read);
  }
  return loom::Status::Ok();
}

// Reshard (the offline tool, after MPI is shut down so nothing else runs) vs a raw read of the
// same files, from the disk (page cache dropped before each, where this process may) and from
// the page cache.
// `from`: another checkpoint to reshard instead of the one saved here (e.g. a larger model's).
loom::Status RunReshard(const std::string& dir, const std::string& from, int rounds, Figures* f) {
  const std::string ckpt_dir = dir + "/ckpt";
  std::string src_dir = ckpt_dir + "/" + loom::ReadLatest(ckpt_dir);
  if (!from.empty()) {
    LOOM_ASSIGN_OR_RETURN(src_dir, loom::ResolveCheckpointDir(from));
  }
  {
    LOOM_ASSIGN_OR_RETURN(std::unique_ptr<loom::CheckpointReader> reader,
                          loom::CheckpointReader::Open(src_dir));
    for (const loom::proto::TensorEntry& t : reader->meta().tensors()) {
      int64_t n = 4;
      for (int64_t d : t.shape()) n *= d;
      f->largest_tensor = std::max<int64_t>(f->largest_tensor, n);
    }
  }
  f->reshard_src = src_dir;
  const std::string log = dir + "/reshard.log";
  // Every run writes into a directory of its own; all are deleted at the end. Deleting gigabytes
  // right before a timed run slows it: the file system discards the freed blocks (mounted with
  // `discard` here) and the VM's disk serves them for the next 10-20 s (a raw read of 1.6 GB took
  // 1.62 s right after deleting 1.6 GB, 0.99 s before, 0.86 s 20 s later). Where the disk has no
  // room for all outputs, each is deleted after its run and the disk left to settle.
  f->read_bytes = static_cast<double>(RawRead(src_dir));  // the size; nothing timed yet
  const uint64_t outputs = static_cast<uint64_t>(rounds) * 4 * static_cast<uint64_t>(f->read_bytes);
  std::error_code ec;
  const bool keep = fs::space(dir, ec).available > outputs + (2ull << 30) && !ec;
  f->outputs_kept = keep;
  std::vector<std::string> outs;
  auto next_out = [&] {
    if (!keep && !outs.empty()) {
      fs::remove_all(outs.back());
      ::sync();
      std::this_thread::sleep_for(std::chrono::seconds(15));
    }
    outs.push_back(dir + "/resharded/" + std::to_string(outs.size()));
    return outs.back();
  };
  auto reshard_to = [&](const std::string& out) -> double {
    const double t =
        RunChild({LOOM_BINARY, "ckpt", "reshard", src_dir, "--to", "tp=2,pp=2,dp=1", out}, log);
    auto text = loom::ReadFile(log);
    double mib = 0;
    const size_t at = text.ok() ? text->find("peak memory ") : std::string::npos;
    if (at != std::string::npos) mib = std::atof(text->c_str() + at + 12);
    f->reshard_rss = std::max<int64_t>(f->reshard_rss, static_cast<int64_t>(mib * 1048576));
    return t;
  };
  auto reshard = [&] { return reshard_to(next_out()); };
  // For reference: the output on another device (tmpfs), so that the writes do not compete with
  // the reads for the one disk; shows what the resharder does where reading is the only cost.
  const std::string shm = "/dev/shm/loom-checkpoint-bench-" + std::to_string(::getpid());
  const bool other_device = fs::is_directory("/dev/shm", ec) &&
                            fs::space("/dev/shm", ec).available > 2 * outputs / rounds / 4 && !ec;
  auto raw_read = [&] {
    const auto t0 = Clock::now();
    f->read_bytes = static_cast<double>(RawRead(src_dir));
    return Since(t0);
  };
  auto raw_copy = [&] {
    const std::string out = next_out();
    const auto t0 = Clock::now();
    RawCopy(src_dir, out);
    return Since(t0);
  };
  // The least time any tool that reads the checkpoint and writes it anew takes with plain
  // reads: a raw read of the files and a sequential write of as many bytes (O_DIRECT, the
  // faster way here), at the same time.
  auto read_while_writing = [&] {
    const std::string out = next_out();
    fs::create_directories(out);
    const auto t0 = Clock::now();
    std::thread reader([&] { RawRead(src_dir); });
    const loom::Status st = DirectWrite(out + "/plain", static_cast<uint64_t>(f->read_bytes));
    reader.join();
    return st.ok() ? Since(t0) : -1.0;
  };
  std::vector<double> cold_reshard, cold_read, cold_copy, cold_floor, warm_reshard, warm_read;
  std::vector<double> cold_other;  // output on tmpfs
  // After the page cache is dropped the program is loaded once before the timed run, so that
  // only the checkpoint's bytes come from the disk (the raw read loads no program either).
  auto load_program = [&] { RunChild({LOOM_BINARY, "--version"}, log); };
  auto cold_reshard_run = [&] {
    if (!DropCaches()) return;
    load_program();
    cold_reshard.push_back(reshard());
  };
  auto cold_read_run = [&] {
    if (DropCaches()) cold_read.push_back(raw_read());
  };
  f->cold = DropCaches();
  for (int r = 0; r < rounds; ++r) {
    // The reshard and the raw read take turns going first: a run after another's writes finds
    // the disk busier (the host flushes them).
    if (r % 2 == 0) {
      cold_reshard_run();
      cold_read_run();
    } else {
      cold_read_run();
      cold_reshard_run();
    }
    if (f->cold && DropCaches()) cold_copy.push_back(raw_copy());
    if (f->cold && other_device && DropCaches()) {
      load_program();
      cold_other.push_back(reshard_to(shm));
      fs::remove_all(shm, ec);
    }
    // The floor last: its plain reads leave the source in the page cache for the warm runs.
    if (f->cold && DropCaches()) cold_floor.push_back(read_while_writing());
    warm_read.push_back(raw_read());  // the source back in the page cache
    warm_reshard.push_back(reshard());
    warm_read.push_back(raw_read());
    if (warm_reshard.back() < 0 || (f->cold && !cold_reshard.empty() && cold_reshard.back() < 0) ||
        (!cold_other.empty() && cold_other.back() < 0)) {
      return loom::Internal("loom ckpt reshard failed (see " + log + ")");
    }
  }
  fs::remove_all(dir + "/resharded", ec);
  f->reshard_s = Median(warm_reshard);
  f->read_s = Median(warm_read);
  if (f->cold) {
    f->cold_reshard_s = Median(cold_reshard);
    f->cold_read_s = Median(cold_read);
    f->cold_copy_s = Median(cold_copy);
    f->cold_floor_s = Median(cold_floor);
    if (!cold_other.empty()) f->cold_other_s = Median(cold_other);
  }
  return loom::Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  auto rt = loom::CreateBackend(loom::BackendKind::kMpi, {.argc = &argc, .argv = &argv});
  if (!rt.ok() || (*rt)->world_size() != 2) {
    std::fprintf(stderr, "checkpoint_bench: run with mpirun -np 2\n");
    return 1;
  }
  std::string dir = "/tmp/loom_checkpoint_bench";
  int rounds = 3;
  std::string reshard_from;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--dir") == 0) dir = argv[i + 1];
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--reshard-from") == 0) reshard_from = argv[i + 1];
  }
  if ((*rt)->world_rank() == 0) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  loom::ConfigureThreads(1);  // one core per rank
  Figures f;
  loom::Status st = Run(**rt, dir, rounds, &f);
  const int rank = (*rt)->world_rank();
  rt->reset();  // MPI finalized: the reshard runs alone
  if (st.ok() && rank == 0) st = RunLoad(dir, rounds, &f);
  if (st.ok() && rank == 0) st = RunReshard(dir, reshard_from, rounds, &f);
  if (!st.ok()) {
    std::fprintf(stderr, "checkpoint_bench: %s\n", st.ToString().c_str());
    return 1;
  }
  if (rank == 0) {
    const double mb = 1e6;
    std::printf(
        "model 6 layers x 512 hidden, vocab 16384 (27M params; weights + Adam moments %.0f MB), "
        "dp=2 zero=1, "
        "2 ranks x 1 thread on 2 cores, directory %s, median of %d rounds\n",
        f.save_bytes / mb, dir.c_str(), rounds);
    std::printf(
        "save:    Loom %.3f s (%.0f MB/s) | plain write+fsync of the same bytes %.3f s "
        "(%.0f MB/s)\n",
        f.loom_s, f.save_bytes / f.loom_s / mb, f.plain_s, f.save_bytes / f.plain_s / mb);
    std::printf(
        "stall:   step %.1f ms without saving, %.1f ms with a save every 2 steps; loop "
        "blocked %.2f ms per save (%.2f%% of a step)\n",
        f.step_s * 1e3, f.step_saving_s * 1e3, f.stall_per_save_s * 1e3,
        100 * f.stall_per_save_s / f.step_s);
    std::printf(
        "         blocked per save: starting it %.2f ms, update waiting for the copy %.2f ms, "
        "completion polls %.2f ms\n",
        f.save_part_s * 1e3, f.copy_wait_s * 1e3, f.poll_s * 1e3);
    if (f.load_cold_s > 0) {
      std::printf(
          "load:    resuming into one process (tp1 dp1 from dp2 zero1), every byte read and "
          "checked: from the disk %.3f s vs raw read %.3f s (%.2fx its speed); from the page "
          "cache %.3f s\n",
          f.load_cold_s, f.load_read_cold_s, f.load_read_cold_s / f.load_cold_s, f.load_s);
    }
    std::printf(
        "reshard: %s to tp=2,pp=2 (4 ranks), %.0f MB | from the page cache %.3f s (%.0f MB/s) "
        "vs raw read %.3f s (%.0f MB/s)\n",
        f.reshard_src.c_str(), f.read_bytes / mb, f.reshard_s, f.read_bytes / f.reshard_s / mb,
        f.read_s, f.read_bytes / f.read_s / mb);
    std::printf("         %s\n",
                f.outputs_kept
                    ? "each run's output kept until the end (no deletion before a run)"
                    : "each run's output deleted after it, then 15 s for the disk to settle");
    if (f.cold) {
      std::printf(
          "         from the disk (page cache dropped) %.3f s (%.0f MB/s) vs raw read %.3f s "
          "(%.0f MB/s)\n",
          f.cold_reshard_s, f.read_bytes / f.cold_reshard_s / mb, f.cold_read_s,
          f.read_bytes / f.cold_read_s / mb);
      std::printf(
          "         for reference, from the disk: copying the same files (read, write, fsync) "
          "%.3f s (reshard %.2fx its speed); reading them while writing as many bytes "
          "(the disk's floor for any resharder) %.3f s (reshard %.2fx its speed)\n",
          f.cold_copy_s, f.cold_copy_s / f.cold_reshard_s, f.cold_floor_s,
          f.cold_floor_s / f.cold_reshard_s);
      std::printf(
          "         the disk's floor vs raw read: %.2f (no resharder that writes its output "
          "to this disk can do better)\n",
          f.cold_read_s / f.cold_floor_s);
      if (f.cold_other_s > 0) {
        std::printf(
            "         output on another device (tmpfs; reads from the disk only): %.3f s "
            "(%.0f MB/s), %.2fx raw read\n",
            f.cold_other_s, f.read_bytes / f.cold_other_s / mb, f.cold_read_s / f.cold_other_s);
      }
    }
    std::printf("         peak memory of loom ckpt reshard %.1f MB; largest tensor %.1f MB\n",
                f.reshard_rss / mb, f.largest_tensor / mb);
    const double reshard_vs_read =
        f.cold ? f.cold_read_s / f.cold_reshard_s : f.read_s / f.reshard_s;
    std::printf("save_vs_disk=%.2f stall_fraction=%.4f reshard_vs_read=%.2f%s\n",
                f.plain_s / f.loom_s, f.stall_per_save_s / f.step_s, reshard_vs_read,
                f.cold ? "" : " (page cache: could not drop it)");
  }
  return 0;
}
