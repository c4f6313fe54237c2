// Distributed checkpoint writing and the commit protocol.
#include "checkpoint/writer.h"

#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <limits.h>
#include <signal.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string_view>
#include <thread>

#include "checkpoint/chunk_table.h"
#include "core/fault_point.h"
#include "core/file_util.h"
#include "core/logging.h"
#include "core/tunables.h"
#include "model/layout.h"

namespace loom {

namespace fs = std::filesystem;

namespace {

std::string FragmentName(int rank) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "rank_%05d.index.json", rank);
  return buf;
}

}  // namespace

namespace {

Status CheckDirectIo() {
  const char* v = std::getenv("LOOM_CKPT_DIRECT_IO");
  if (v == nullptr || *v == '\0' || std::string_view(v) == "0" || std::string_view(v) == "1") {
    return Status::Ok();
  }
  return InvalidArgument(std::string("environment variable LOOM_CKPT_DIRECT_IO: expected 0 (no "
                                     "O_DIRECT) or 1 (the default), got '") +
                         v + "'");
}
const bool kDirectIoChecked = RegisterTunableCheck("LOOM_CKPT_DIRECT_IO", &CheckDirectIo);

}  // namespace

bool CheckpointDirectIo() {
  static const bool on = [] {
    const char* v = std::getenv("LOOM_CKPT_DIRECT_IO");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

void CheckpointCrashPoint(int world_rank, const char* where) {
  FaultPoint({FaultSite::kCheckpointCrashPoint, world_rank, 0, where});
}

std::string TempStepDir(const std::string& root, int64_t step) {
  return JoinPath(root, StepDirName(step) + ".tmp");
}

Result<OutputRoot> OutputRoot::Open(const std::string& root, const std::string& reads) {
  LOOM_RETURN_IF_ERROR(CheckOutsideCheckpoints(root, reads, "output directory"));
  LOOM_ASSIGN_OR_RETURN(const bool made, MakeDirHere(root, "output directory"));
  // Held to the end: another reshard or import into the root would remove this one's temporary
  // directory, or this one's failure path its result. One refused the lock leaves the root to
  // its holder, even if it made it.
  LOOM_ASSIGN_OR_RETURN(DirLock lock, DirLock::TryLock(root, "output directory"));
  if (!ListCheckpoints(root).empty()) {
    return FailedPrecondition(root +
                              ": already holds checkpoints; choose an empty or new directory");
  }
  std::error_code ec;
  const bool had_latest = fs::exists(JoinPath(root, kLatestFile), ec);
  return OutputRoot(root, std::move(lock), made, had_latest);
}

void OutputRoot::RemovePartial(int64_t step) const {
  std::error_code ec;
  fs::remove_all(TempStepDir(root_, step), ec);
  fs::remove_all(JoinPath(root_, StepDirName(step)), ec);
  if (!had_latest_) fs::remove(JoinPath(root_, kLatestFile), ec);
  if (made_here_) fs::remove(root_, ec);  // only if empty
}

Result<std::unique_ptr<RankFileWriter>> RankFileWriter::Open(const std::string& tmp_dir, int rank,
                                                             const RankShardPlan& plan) {
  LOOM_RETURN_IF_ERROR(MakeDirs(tmp_dir));
  std::unique_ptr<RankFileWriter> w(new RankFileWriter());
  w->tmp_dir_ = tmp_dir;
  w->rank_ = rank;
  w->plan_ = &plan;
  w->file_ = RankFileName(rank);
  w->path_ = JoinPath(tmp_dir, w->file_);
  // Header first: every chunk's place is known from the plan alone.
  nlohmann::json header = nlohmann::json::object();
  uint64_t at = 0;
  std::vector<uint64_t> rel;
  for (int s = 0; s < kNumStates; ++s) {
    for (size_t k = 0; k < plan.writes.size(); ++k) {
      const Piece& p = plan.writes[k];
      const uint64_t n = static_cast<uint64_t>(p.region.size()) * 4;
      header[plan.layout.params[static_cast<size_t>(p.param)].name + "/" +
             StateName(static_cast<StateKind>(s)) + "/" + std::to_string(k)] = {
          {"dtype", "F32"}, {"shape", {p.region.size()}}, {"data_offsets", {at, at + n}}};
      rel.push_back(at);
      at += n;
    }
  }
  header["__metadata__"] = {{"format", "loom-universal-checkpoint"},
                            {"rank", std::to_string(rank)}};
  // The header is padded with spaces (allowed by safetensors) so the data starts on a
  // kDataAlignment boundary: the data section can then be written with O_DIRECT.
  std::string htext = header.dump();
  htext.append((kDataAlignment - (8 + htext.size()) % kDataAlignment) % kDataAlignment, ' ');
  const uint64_t hlen = htext.size();
  const uint64_t data_start = 8 + hlen;
  for (uint64_t r : rel) w->offset_.push_back(data_start + r);
  w->done_.assign(rel.size(), false);
  w->file_bytes_ = data_start + at;
  w->data_bytes_ = at;
  w->fd_ = ::open(w->path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w->fd_ < 0) return ErrnoError("create '" + w->path_ + "'", errno);
  LOOM_RETURN_IF_ERROR(WriteAll(w->fd_, {reinterpret_cast<const char*>(&hlen), 8}, w->path_));
  LOOM_RETURN_IF_ERROR(WriteAll(w->fd_, htext, w->path_));
  return w;
}

RankFileWriter::~RankFileWriter() {
  (void)EndStaging();  // an error path: the queued writes must end before the file is closed
  if (fd_ >= 0) ::close(fd_);
}

void RankFileWriter::EnableStaging(DirectWritePool* pool) {
  if (!CheckpointDirectIo() || pool_ != nullptr || fd_ < 0) return;
  for (size_t i = 0; i < done_.size(); ++i) {
    if (done_[i]) return;  // only a file not yet written is staged
  }
  const int direct_fd = ::open(path_.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  if (direct_fd < 0) return;
  stage_ = pool->TryAcquire();
  if (stage_ == nullptr) {
    ::close(direct_fd);
    return;
  }
  pool_ = pool;
  direct_.direct_fd = direct_fd;
  direct_.buffered_fd = fd_;
  direct_.path = path_;
  stage_len_ = 0;
  stage_at_ = file_bytes_ - data_bytes_;  // the data section starts kDataAlignment-aligned
}

Status RankFileWriter::EndStaging() {
  if (pool_ == nullptr) return Status::Ok();
  // The aligned bulk with O_DIRECT; an unaligned tail (the file's end) buffered, from this
  // thread before the bulk is queued (the buffer is released once the bulk is written).
  Status st;
  if (stage_ != nullptr) {
    const size_t bulk = stage_len_ / kDataAlignment * kDataAlignment;
    for (size_t at = bulk; at < stage_len_ && st.ok();) {
      const ssize_t w =
          ::pwrite(fd_, stage_ + at, stage_len_ - at, static_cast<off_t>(stage_at_ + at));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) st = ErrnoError("write '" + path_ + "'", w < 0 ? errno : EIO);
      if (w > 0) at += static_cast<size_t>(w);
    }
    if (bulk > 0 && st.ok()) {
      pool_->Write(&direct_, stage_, bulk, stage_at_);
    } else {
      pool_->Release(stage_);
    }
    stage_ = nullptr;
  }
  Status io = pool_->Wait(&direct_);
  ::close(direct_.direct_fd);
  direct_.direct_fd = -1;
  pool_ = nullptr;
  return st.ok() ? io : st;
}

Status RankFileWriter::Emit(uint64_t at, const std::vector<std::pair<const char*, size_t>>& parts) {
  if (pool_ != nullptr && at != stage_at_ + stage_len_) {  // out of order: staging ends
    LOOM_RETURN_IF_ERROR(EndStaging());
  }
  if (pool_ != nullptr) {
    const size_t cap = pool_->buffer_bytes();
    for (const auto& [data, n] : parts) {
      for (size_t done = 0; done < n;) {
        const size_t take = std::min(n - done, cap - stage_len_);
        std::memcpy(stage_ + stage_len_, data + done, take);
        stage_len_ += take;
        done += take;
        if (stage_len_ == cap) {  // full: to an I/O thread, and on with a fresh buffer
          pool_->Write(&direct_, stage_, cap, stage_at_);
          stage_at_ += cap;
          stage_len_ = 0;
          stage_ = pool_->Acquire();
        }
      }
    }
    return Status::Ok();
  }
  std::vector<iovec> iov;
  for (const auto& [data, n] : parts) iov.push_back({const_cast<char*>(data), n});
  size_t first = 0;
  while (first < iov.size()) {
    const int count = static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX));
    const ssize_t w = ::pwritev(fd_, iov.data() + first, count, static_cast<off_t>(at));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return ErrnoError("write '" + path_ + "'", errno);
    at += static_cast<uint64_t>(w);
    // Drop what was written, including part of a vector entry.
    for (size_t left = static_cast<size_t>(w); left > 0 && first < iov.size();) {
      if (left >= iov[first].iov_len) {
        left -= iov[first].iov_len;
        ++first;
      } else {
        iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
        iov[first].iov_len -= left;
        left = 0;
      }
    }
    if (first < iov.size()) CheckpointCrashPoint(rank_, "inside a data write");
  }
  return Status::Ok();
}

void RankFileWriter::Record(StateKind state, size_t k, std::vector<uint32_t> crcs) {
  const size_t slot = static_cast<size_t>(state) * plan_->writes.size() + k;
  AddPieceChunk(*plan_, state, k, file_, offset_[slot], std::move(crcs), &fragment_);
  done_[slot] = true;
}

Status RankFileWriter::Put(StateKind state, size_t k, const float* data) {
  const size_t slot = static_cast<size_t>(state) * plan_->writes.size() + k;
  const size_t n = static_cast<size_t>(plan_->writes[k].region.size()) * 4;
  const char* bytes = reinterpret_cast<const char*>(data);
  // A crash point in the middle of a chunk: a torn write must never be loadable.
  LOOM_RETURN_IF_ERROR(Emit(offset_[slot], {{bytes, n / 2}}));
  CheckpointCrashPoint(rank_, "inside a data write");
  LOOM_RETURN_IF_ERROR(Emit(offset_[slot] + n / 2, {{bytes + n / 2, n - n / 2}}));
  Record(state, k, BlockCrcs(data, n));
  StartWriteback(n);
  return Status::Ok();
}

Status RankFileWriter::PutParts(StateKind state, size_t k,
                                const std::vector<std::pair<const char*, size_t>>& parts) {
  const size_t slot = static_cast<size_t>(state) * plan_->writes.size() + k;
  size_t total = 0;
  for (const auto& part : parts) total += part.second;
  if (total != static_cast<size_t>(plan_->writes[k].region.size()) * 4) {
    return Internal(path_ + ": piece " + std::to_string(k) + " given " + std::to_string(total) +
                    " bytes, expected " + std::to_string(plan_->writes[k].region.size() * 4));
  }
  LOOM_RETURN_IF_ERROR(Emit(offset_[slot], parts));
  Record(state, k, BlockCrcs(parts));
  StartWriteback(total);
  return Status::Ok();
}

void RankFileWriter::StartWriteback(size_t n) {
  if (pool_ != nullptr) return;  // staged writes go straight to the disk
  // Start the writeback of what has accumulated, so the final fsync finds little left to do
  // and the disk works while the next pieces are produced.
  unflushed_ += n;
  if (unflushed_ >= kWritebackBytes) {
    (void)::sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WRITE);
    unflushed_ = 0;
  }
}

Status RankFileWriter::PutImage(const char* image) {
  return StreamImage(image, [](uint64_t) { return Status::Ok(); });
}

Status RankFileWriter::StreamImage(const char* image,
                                   const std::function<Status(uint64_t end)>& fill) {
  if (reinterpret_cast<uintptr_t>(image) % kDataAlignment != 0) {
    return Internal(path_ + ": the data image must be aligned to " +
                    std::to_string(kDataAlignment) + " bytes");
  }
  const uint64_t start = file_bytes_ - data_bytes_;
  if (::lseek(fd_, static_cast<off_t>(start), SEEK_SET) < 0) {
    return ErrnoError("seek '" + path_ + "'", errno);
  }
  // The aligned bulk goes straight to the device (O_DIRECT: no second copy into the page
  // cache), part by part on an I/O thread as soon as `fill` has produced each part; the
  // unaligned tail, and everything on file systems without O_DIRECT, is buffered.
  const uint64_t bulk = data_bytes_ / kDataAlignment * kDataAlignment;
  constexpr uint64_t kPart = 8 << 20;
  std::mutex mu;
  std::condition_variable cv;
  uint64_t ready = 0;      // GUARDED_BY(mu): bytes of the image filled
  bool stop = false;       // GUARDED_BY(mu): the producer failed
  bool io_failed = false;  // GUARDED_BY(mu): the writer failed
  Status io;
  std::thread writer([&] {
    const int flags = ::fcntl(fd_, F_GETFL);
    bool direct = bulk > 0 && flags >= 0 && CheckpointDirectIo() &&
                  ::fcntl(fd_, F_SETFL, flags | O_DIRECT) == 0;
    for (uint64_t at = 0; at < bulk;) {
      const uint64_t end = std::min(at + kPart, bulk);
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return ready >= end || stop; });
        if (ready < end) break;
      }
      const ssize_t w = ::write(fd_, image + at, end - at);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && errno == EINVAL && direct) {  // O_DIRECT refused at write time: buffered
        direct = false;
        (void)::fcntl(fd_, F_SETFL, flags);
        if (::lseek(fd_, static_cast<off_t>(start + at), SEEK_SET) < 0) {
          io = ErrnoError("seek '" + path_ + "'", errno);
          break;
        }
        continue;
      }
      if (w < 0) {
        io = ErrnoError("write '" + path_ + "'", errno);
        break;
      }
      if (at == 0) CheckpointCrashPoint(rank_, "inside a data write");
      at += static_cast<uint64_t>(w);
    }
    if (direct) (void)::fcntl(fd_, F_SETFL, flags);
    std::lock_guard<std::mutex> lock(mu);
    io_failed = !io.ok();
  });
  // Produce the image part by part; record each piece (CRCs of bytes still in cache) once whole.
  Status st;
  size_t slot = 0;
  const size_t slots = offset_.size();
  for (uint64_t end = 0; end < data_bytes_ && st.ok();) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (io_failed) break;  // the disk refused: no point copying the rest
    }
    end = std::min(end + kPart, data_bytes_);
    st = fill(end);
    if (!st.ok()) break;
    for (; slot < slots; ++slot) {
      const size_t k = slot % plan_->writes.size();
      const uint64_t begin = offset_[slot] - start;
      if (begin + static_cast<uint64_t>(plan_->writes[k].region.size()) * 4 > end) break;
      const size_t bytes = static_cast<size_t>(plan_->writes[k].region.size()) * 4;
      Record(static_cast<StateKind>(slot / plan_->writes.size()), k,
             BlockCrcs(image + begin, bytes));
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      ready = end;
    }
    cv.notify_all();
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = !st.ok();
  }
  cv.notify_all();
  writer.join();
  LOOM_RETURN_IF_ERROR(st);
  LOOM_RETURN_IF_ERROR(io);
  LOOM_RETURN_IF_ERROR(WriteAll(fd_, {image + bulk, data_bytes_ - bulk}, path_));
  if (bulk == 0) CheckpointCrashPoint(rank_, "inside a data write");
  return Status::Ok();
}

Result<uint64_t> RankFileWriter::Finish(proto::CheckpointMetadata* fragment) {
  for (size_t i = 0; i < done_.size(); ++i) {
    if (!done_[i]) {
      return Internal(path_ + ": piece " + std::to_string(i % plan_->writes.size()) + " of state " +
                      StateName(static_cast<StateKind>(i / plan_->writes.size())) +
                      " was never written");
    }
  }
  LOOM_RETURN_IF_ERROR(EndStaging());
  Status st;
  if (::fsync(fd_) != 0) st = ErrnoError("fsync '" + path_ + "'", errno);
  if (::close(fd_) != 0 && st.ok()) st = ErrnoError("close '" + path_ + "'", errno);
  fd_ = -1;
  LOOM_RETURN_IF_ERROR(st);
  CheckpointCrashPoint(rank_, "after the data file's fsync");
  proto::FileEntry* f = fragment_.add_files();
  f->set_name(file_);
  f->set_bytes(file_bytes_);
  f->set_rank(rank_);
  if (fragment != nullptr) {
    *fragment = std::move(fragment_);
    return data_bytes_;
  }
  LOOM_ASSIGN_OR_RETURN(std::string json, MetadataToJson(fragment_));
  LOOM_RETURN_IF_ERROR(WriteFileAtomic(JoinPath(tmp_dir_, FragmentName(rank_)), json));
  CheckpointCrashPoint(rank_, "after the index fragment");
  return data_bytes_;
}

Result<uint64_t> WriteRankFiles(const std::string& tmp_dir, int rank, const RankShardPlan& plan,
                                const PieceSource& source) {
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<RankFileWriter> w,
                        RankFileWriter::Open(tmp_dir, rank, plan));
  std::vector<float> scratch;
  for (int s = 0; s < kNumStates; ++s) {
    for (size_t k = 0; k < plan.writes.size(); ++k) {
      const StateKind state = static_cast<StateKind>(s);
      LOOM_ASSIGN_OR_RETURN(const float* data, source(state, k, &scratch));
      LOOM_RETURN_IF_ERROR(w->Put(state, k, data));
    }
  }
  return w->Finish();
}

void RemoveRankFiles(const std::string& tmp_dir, int rank) {
  ::unlink(JoinPath(tmp_dir, RankFileName(rank)).c_str());
  ::unlink(JoinPath(tmp_dir, FragmentName(rank)).c_str());
  ::rmdir(tmp_dir.c_str());  // fails while another rank's files are there
}

Status CommitCheckpoint(const std::string& root, const std::string& tmp_dir, int world,
                        const ModelConfig& model, proto::CheckpointMetadata base) {
  std::vector<proto::CheckpointMetadata> fragments(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    const std::string path = JoinPath(tmp_dir, FragmentName(r));
    LOOM_ASSIGN_OR_RETURN(std::string json, ReadFile(path));
    auto st = google::protobuf::util::JsonStringToMessage(json, &fragments[static_cast<size_t>(r)]);
    if (!st.ok()) return DataLoss(path + ": bad index fragment: " + std::string(st.message()));
  }
  // Read: the metadata will hold them (its write fsyncs the directory, with these unlinks).
  for (int r = 0; r < world; ++r) ::unlink(JoinPath(tmp_dir, FragmentName(r)).c_str());
  return CommitCheckpoint(root, tmp_dir, model, std::move(base), std::move(fragments));
}

Status CommitCheckpoint(const std::string& root, const std::string& tmp_dir,
                        const ModelConfig& model, proto::CheckpointMetadata base,
                        std::vector<proto::CheckpointMetadata> fragments) {
  const int rank = 0;
  LOOM_ASSIGN_OR_RETURN(base,
                        MergeFragments(model, std::move(base), std::move(fragments), tmp_dir));
  CheckpointCrashPoint(rank, "before the metadata");
  LOOM_RETURN_IF_ERROR(WriteMetadata(tmp_dir, base));  // fsyncs tmp_dir too
  CheckpointCrashPoint(rank, "before the rename");
  const std::string final_dir = JoinPath(root, StepDirName(base.step()));
  std::error_code ec;
  if (fs::exists(final_dir, ec)) {
    // Re-saving a step: swap the two directories in one atomic step, so at every moment
    // step_<N> is one complete checkpoint, then drop the old one (now under the .tmp name).
    if (::renameat2(AT_FDCWD, tmp_dir.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) != 0) {
      return ErrnoError("exchange '" + tmp_dir + "' and '" + final_dir + "'", errno);
    }
    LOOM_RETURN_IF_ERROR(FsyncDir(root));
    CheckpointCrashPoint(rank, "after exchanging a re-saved step");
    fs::remove_all(tmp_dir, ec);
  } else if (::rename(tmp_dir.c_str(), final_dir.c_str()) != 0) {
    return ErrnoError("rename '" + tmp_dir + "' to '" + final_dir + "'", errno);
  }
  LOOM_RETURN_IF_ERROR(FsyncDir(root));
  CheckpointCrashPoint(rank, "after the rename");
  LOOM_RETURN_IF_ERROR(
      WriteFileAtomic(JoinPath(root, kLatestFile), StepDirName(base.step()) + "\n"));
  CheckpointCrashPoint(rank, "after replacing latest");
  return Status::Ok();
}

Status ApplyRetention(const std::string& root, int keep, int64_t keep_every, int64_t newest) {
  // A checkpoint is renamed out of the way before it is deleted, so a crash while deleting never
  // leaves a step_<N> directory with files missing.
  std::error_code ec;
  auto list = ListCheckpoints(root);
  for (size_t i = static_cast<size_t>(keep); keep > 0 && i < list.size(); ++i) {
    if (list[i].first >= newest) continue;
    if (keep_every > 0 && list[i].first % keep_every == 0) continue;  // a milestone
    const std::string doomed = list[i].second + ".deleting.tmp";
    if (::rename(list[i].second.c_str(), doomed.c_str()) != 0) {
      return ErrnoError("rename '" + list[i].second + "' to '" + doomed + "'", errno);
    }
  }
  LOOM_RETURN_IF_ERROR(FsyncDir(root));
  for (const auto& e : fs::directory_iterator(root, ec)) {
    // Leftovers of interrupted saves and deletions. Other ranks may already be writing the next
    // save: only directories of steps up to `newest` are leftovers.
    const std::string name = e.path().filename().string();
    long long step = -1;
    char dot = 0;
    if (std::sscanf(name.c_str(), "step_%lld%c", &step, &dot) == 2 && dot == '.' &&
        step <= newest && name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0) {
      fs::remove_all(e.path(), ec);
    }
  }
  return Status::Ok();
}

}  // namespace loom
