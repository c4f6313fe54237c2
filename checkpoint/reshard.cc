// Offline resharding through the shard plan of the target layout.
#include "checkpoint/reshard.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include "checkpoint/direct_stream.h"
#include "checkpoint/direct_writes.h"
#include "checkpoint/metadata_specs.h"
#include "checkpoint/reader.h"
#include "checkpoint/shard_plan.h"
#include "checkpoint/writer.h"
#include "core/file_util.h"
#include "core/interrupt.h"
#include "model/layout.h"

namespace loom {

Result<Layout> ParseLayoutSpec(const std::string& spec) {
  Layout l;
  if (spec.empty()) {
    return InvalidArgument("layout '': expected key=value items, e.g. tp=2,pp=2,dp=2,zero=1");
  }
  std::vector<std::string> items;
  for (size_t start = 0;;) {
    const size_t comma = spec.find(',', start);
    items.push_back(spec.substr(start, comma == std::string::npos ? comma : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::vector<std::string> seen;
  for (size_t n = 0; n < items.size(); ++n) {
    const std::string& item = items[n];
    if (item.empty()) {
      return InvalidArgument("layout '" + spec + "': item " + std::to_string(n + 1) +
                             " is empty; expected key=value items separated by single commas");
    }
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    int* field = key == "tp"                   ? &l.tp
                 : key == "cp"                 ? &l.cp
                 : key == "pp"                 ? &l.pp
                 : key == "vpp"                ? &l.vpp
                 : key == "dp"                 ? &l.dp
                 : key == "zero"               ? &l.zero
                 : key == "first_stage_layers" ? &l.first_stage_layers
                 : key == "last_stage_layers"  ? &l.last_stage_layers
                                               : nullptr;
    if (eq == std::string::npos || (field == nullptr && key != "sp")) {
      return InvalidArgument("layout '" + spec + "': item '" + item +
                             "': expected key=value with key tp, cp, pp, vpp, dp, zero, sp, "
                             "first_stage_layers or last_stage_layers");
    }
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      return InvalidArgument("layout '" + spec + "': '" + key + "' is given twice");
    }
    seen.push_back(key);
    const std::string value = item.substr(eq + 1);
    // Digits only (stoi would take " 2" and "+2"), and a size a layout can have.
    int v = 0;
    bool digits = !value.empty() && value.size() <= 6;
    for (char ch : value) {
      digits = digits && ch >= '0' && ch <= '9';
      if (digits) v = v * 10 + (ch - '0');
    }
    if (!digits) {
      return InvalidArgument("layout '" + spec + "': item '" + item +
                             "': expected a whole number from 0 to 999999, got '" + value + "'");
    }
    if (key == "sp") {
      if (v > 1) {
        return InvalidArgument("layout '" + spec + "': item '" + item +
                               "': expected 0 (off) or 1 (on), got '" + value + "'");
      }
      l.sp = v == 1;
    } else {
      *field = v;
    }
  }
  return l;
}

namespace {

// The target layout must hold the checkpoint's model; the data settings can change on resume (a
// larger dp with a larger global_batch), so they only earn a note (*note).
Status CheckTarget(const proto::CheckpointMetadata& meta, const Layout& to, std::string* note) {
  const ModelConfig model = ModelOf(meta.model());
  LayoutConstraints c{model.heads, model.layers, model.vocab, 0, model.hidden, 0, 0};
  LOOM_RETURN_IF_ERROR_CTX(to.Validate(0, c), "target layout (" + to.ToString() + ")");
  c.seq = meta.data().seq();
  c.global_batch = meta.data().global_batch();
  if (Status fits = to.Validate(0, c); !fits.ok()) {
    std::string why = fits.message();
    const std::string prefix = "parallel layout: ";
    if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
    *note = "the checkpoint's data settings do not fit this layout (" + why +
            "): a job resuming it with " + to.ToString() + " must change them";
  }
  return Status::Ok();
}

// The source's metadata but its tensors and files, with the target layout.
proto::CheckpointMetadata TargetBase(const proto::CheckpointMetadata& meta, const Layout& to) {
  proto::CheckpointMetadata base = meta;
  base.clear_tensors();
  base.clear_files();
  SetLayoutSpec(to, base.mutable_saved_layout());
  return base;
}

// Writes the target ranks' files a group at a time, tensor by tensor: each saved tensor state is
// read once per group, and at most kGroup files are open. Memory: one buffer of the largest
// tensor, allocated once and never zero-filled; with the read-ahead and the write buffers (each
// at most half of it), about twice the largest tensor.
class Resharder {
 public:
  static constexpr int kGroup = 256;

  Resharder(CheckpointReader* reader, const ModelConfig& model, const Layout& to, std::string tmp)
      : reader_(reader),
        model_(model),
        to_(to),
        tmp_(std::move(tmp)),
        canonical_(ModelLayout(model, 1)),
        buffer_(nullptr, std::free),
        fragments_(static_cast<size_t>(to.world())) {
    int64_t largest = 1;
    for (const ParamInfo& p : canonical_.params) largest = std::max(largest, p.numel());
    largest_bytes_ = static_cast<size_t>(largest) * sizeof(float);
    // In whole 2 MiB pages: first touching 4 KiB pages costs ~0.5 ms per MiB here, 2 MiB ones
    // ~0.1 (the first tensor's copy waits for it).
    const size_t bytes = (largest_bytes_ + kIoPageBytes - 1) / kIoPageBytes * kIoPageBytes;
    buffer_.reset(reinterpret_cast<float*>(AllocateIoBuffer(bytes)));
  }

  // Every target rank's data file and index fragment (kept in memory for the commit).
  Status WriteAll(uint64_t* bytes_written) {
    for (int g0 = 0; g0 < to_.world(); g0 += kGroup) {
      LOOM_RETURN_IF_ERROR(WriteGroup(g0, std::min(to_.world(), g0 + kGroup), bytes_written));
    }
    return Status::Ok();
  }
  std::vector<proto::CheckpointMetadata> TakeFragments() { return std::move(fragments_); }

 private:
  static constexpr int kIoThreads = 2;  // for the reads and for the writes

  // Target ranks [g0, g1): plans, reads, writers, the copies, then each file finished.
  Status WriteGroup(int g0, int g1, uint64_t* bytes_written) {
    PlanGroup(g0, g1);
    Status st = OpenStream();
    for (int r = g0; r < g1 && st.ok(); ++r) {  // created once the reads have started
      Result<std::unique_ptr<RankFileWriter>> w =
          RankFileWriter::Open(tmp_, r, plans_[static_cast<size_t>(r - g0)]);
      if (!w.ok()) st = w.status();
      if (w.ok()) writers_.push_back(std::move(*w));
    }
    std::unique_ptr<DirectWritePool> pool = st.ok() ? MakePool() : nullptr;
    for (size_t o = 0; o < order_.size() && st.ok(); ++o) {
      st = CheckInterrupted("the resharded checkpoint");
      if (st.ok()) st = CopyTensor(order_[o].first, *order_[o].second);
    }
    if (st.ok() && stream_ != nullptr) st = stream_->Done();
    reader_->SetStream(nullptr);
    stream_.reset();
    for (size_t i = 0; i < writers_.size() && st.ok(); ++i) {
      Result<uint64_t> bytes = writers_[i]->Finish(&fragments_[static_cast<size_t>(g0) + i]);
      if (!bytes.ok()) st = bytes.status();
      if (bytes.ok()) *bytes_written += *bytes;
    }
    writers_.clear();  // before the pool: an unfinished writer waits for its queued writes
    return st;
  }

  // The group's shard plans, who writes which pieces of each tensor, and the (state, tensor)
  // pairs it needs in the order they are processed (the saved files' order: tensor by tensor
  // within a state; going through a tensor's states one after the other was tried and made the
  // reads from the disk slower than the overlap it gained).
  void PlanGroup(int g0, int g1) {
    plans_.clear();
    users_.clear();
    order_.clear();
    for (int r = g0; r < g1; ++r) {
      const RankShardPlan& plan = plans_.emplace_back(PlanRank(model_, to_, r));
      for (size_t k = 0; k < plan.writes.size(); ++k) {
        users_[plan.layout.params[static_cast<size_t>(plan.writes[k].param)].name].push_back(
            {r - g0, k});
      }
    }
    for (int s = 0; s < kNumStates; ++s) {
      for (const ParamInfo& p : canonical_.params) {
        if (users_.count(p.name)) order_.emplace_back(static_cast<StateKind>(s), &p);
      }
    }
  }

  // Every byte range the reads take, in their order, is read ahead with O_DIRECT, several pieces
  // in flight, into a ring of half the largest tensor (at least 8, at most 32 MiB). While this
  // thread copies a tensor out to the write buffers, the ring fills and the queued writes drain:
  // the disk reads and writes at once with one tensor buffer. (Buffered reads, one request at a
  // time, made the tool 1.3-1.7x slower while the writes ran: docs/BENCHMARKS.md.)
  Status OpenStream() {
    std::vector<FileRange> ranges;
    for (const auto& [state, p] : order_) {
      reader_->PlanReads(p->name, state, WholeRegion(*p), &ranges);
    }
    const int slots = static_cast<int>(
        std::clamp<size_t>(largest_bytes_ / 2 / kIoPageBytes, 4, (32 << 20) / kIoPageBytes));
    LOOM_ASSIGN_OR_RETURN(stream_,
                          DirectStream::Open(reader_->dir(), std::move(ranges), kIoPageBytes, slots,
                                             kIoThreads, CheckpointDirectIo()));
    reader_->SetStream(stream_.get());
    return Status::Ok();
  }

  // The output goes to the disk with O_DIRECT, through a pool of buffers: one being filled per
  // file and kInFlight being written. They share a budget of half the largest tensor (at least
  // 8, at most 64 MiB); with more files than that allows buffers of kMinStage, buffered writes
  // (null). (Buffered writes, whose writeback competes with the reads, made the tool up to 2.5x
  // slower on this VM's disk: docs/BENCHMARKS.md.) Buffers of whole 2 MiB pages where the budget
  // allows: see AllocateIoBuffer.
  std::unique_ptr<DirectWritePool> MakePool() {
    constexpr size_t kInFlight = 4, kMinStage = 1 << 20;
    const size_t budget = std::clamp<size_t>(largest_bytes_ / 2, 8 << 20, 64 << 20);
    size_t stage = budget / (writers_.size() + kInFlight);
    stage = stage >= kIoPageBytes ? stage / kIoPageBytes * kIoPageBytes
                                  : stage / kDataAlignment * kDataAlignment;
    if (stage < kMinStage) return nullptr;
    auto pool = std::make_unique<DirectWritePool>(
        stage, static_cast<int>(writers_.size() + kInFlight), kIoThreads);
    for (auto& w : writers_) w->EnableStaging(pool.get());
    return pool;
  }

  // Reads tensor `p`'s `state` whole and puts every piece of it that the group's ranks write.
  Status CopyTensor(StateKind state, const ParamInfo& p) {
    const Region whole = WholeRegion(p);
    LOOM_RETURN_IF_ERROR(reader_->Read(p.name, state, whole, buffer_.get()));
    const float* data = buffer_.get();
    for (const auto& [i, k] : users_[p.name]) {
      const Region& region = plans_[static_cast<size_t>(i)].writes[k].region;
      RankFileWriter& w = *writers_[static_cast<size_t>(i)];
      segs_.clear();
      Intersect(whole, region, &segs_);
      if (segs_.size() == 1) {  // one run of the tensor (a row block)
        LOOM_RETURN_IF_ERROR(w.Put(state, k, data + segs_[0].src));
        continue;
      }
      parts_.clear();  // a column slab: one vectored write of its rows
      for (const CopySegment& c : segs_) {
        parts_.emplace_back(reinterpret_cast<const char*>(data + c.src),
                            static_cast<size_t>(c.count) * sizeof(float));
      }
      LOOM_RETURN_IF_ERROR(w.PutParts(state, k, parts_));
    }
    return Status::Ok();
  }

  CheckpointReader* reader_;
  const ModelConfig model_;
  const Layout to_;
  const std::string tmp_;
  const ParamLayout canonical_;
  size_t largest_bytes_ = 0;
  std::unique_ptr<float, void (*)(void*)> buffer_;
  std::vector<proto::CheckpointMetadata> fragments_;  // per target rank
  // The group being written.
  std::vector<RankShardPlan> plans_;
  std::vector<std::unique_ptr<RankFileWriter>> writers_;
  std::map<std::string, std::vector<std::pair<int, size_t>>> users_;  // name -> (rank, piece)
  std::vector<std::pair<StateKind, const ParamInfo*>> order_;
  std::unique_ptr<DirectStream> stream_;
  std::vector<CopySegment> segs_;
  std::vector<std::pair<const char*, size_t>> parts_;
};

}  // namespace

Result<ReshardResult> Reshard(const std::string& src, const Layout& to,
                              const std::string& out_root) {
  LOOM_ASSIGN_OR_RETURN(std::string dir, ResolveCheckpointDir(src));
  LOOM_RETURN_IF_ERROR(CheckNotTemporary(dir));
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader, CheckpointReader::Open(dir));
  const proto::CheckpointMetadata& meta = reader->meta();
  ReshardResult out;
  LOOM_RETURN_IF_ERROR(CheckTarget(meta, to, &out.note));
  LOOM_ASSIGN_OR_RETURN(const OutputRoot root, OutputRoot::Open(out_root, dir));
  const proto::CheckpointMetadata base = TargetBase(meta, to);
  const std::string tmp = TempStepDir(out_root, meta.step());
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);  // a previous interrupted reshard
  const ModelConfig model = ModelOf(meta.model());
  Resharder resharder(reader.get(), model, to, tmp);
  Status st = resharder.WriteAll(&out.bytes_written);
  if (st.ok()) st = CommitCheckpoint(out_root, tmp, model, base, resharder.TakeFragments());
  if (!st.ok()) {  // never leave a partial output behind
    root.RemovePartial(meta.step());
    return st;
  }
  out.bytes_read = reader->bytes_read();
  out.dir = JoinPath(out_root, StepDirName(meta.step()));
  return out;
}

}  // namespace loom
