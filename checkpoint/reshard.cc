// Offline resharding through the shard plan of the target layout.
#include "checkpoint/reshard.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include "checkpoint/direct_stream.h"
#include "checkpoint/direct_writes.h"
#include "checkpoint/reader.h"
#include "checkpoint/shard_plan.h"
#include "checkpoint/writer.h"
#include "core/file_util.h"
#include "core/interrupt.h"

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
    int* field = key == "tp"     ? &l.tp
                 : key == "cp"   ? &l.cp
                 : key == "pp"   ? &l.pp
                 : key == "vpp"  ? &l.vpp
                 : key == "dp"   ? &l.dp
                 : key == "zero" ? &l.zero
                                 : nullptr;
    if (eq == std::string::npos || (field == nullptr && key != "sp")) {
      return InvalidArgument("layout '" + spec + "': item '" + item +
                             "': expected key=value with key tp, cp, pp, vpp, dp, zero or sp");
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

Result<ReshardResult> Reshard(const std::string& src, const Layout& to,
                              const std::string& out_root) {
  LOOM_ASSIGN_OR_RETURN(std::string dir, ResolveCheckpointDir(src));
  LOOM_RETURN_IF_ERROR(CheckNotTemporary(dir));
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader, CheckpointReader::Open(dir));
  const proto::CheckpointMetadata& meta = reader->meta();
  const proto::ModelSpec& mo = meta.model();
  const ModelConfig model{mo.vocab(), mo.max_seq(), mo.layers(), mo.heads(), mo.hidden()};
  // The model decides which layouts can hold it; the data settings can change on resume (a
  // larger dp with a larger global_batch), so they only earn a note.
  LayoutConstraints c{model.heads, model.layers, model.vocab, 0, model.hidden, 0, 0};
  LOOM_RETURN_IF_ERROR_CTX(to.Validate(0, c), "target layout (" + to.ToString() + ")");
  ReshardResult out;
  c.seq = meta.data().seq();
  c.global_batch = meta.data().global_batch();
  if (Status fits = to.Validate(0, c); !fits.ok()) {
    std::string why = fits.message();
    const std::string prefix = "parallel layout: ";
    if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
    out.note = "the checkpoint's data settings do not fit this layout (" + why +
               "): a job resuming it with " + to.ToString() + " must change them";
  }
  LOOM_ASSIGN_OR_RETURN(const OutputRoot root, OutputRoot::Open(out_root, dir));
  std::error_code ec;
  proto::CheckpointMetadata base = meta;
  base.clear_tensors();
  base.clear_files();
  proto::LayoutSpec* l = base.mutable_saved_layout();
  l->set_tp(to.tp);
  l->set_cp(to.cp);
  l->set_pp(to.pp);
  l->set_vpp(to.vpp);
  l->set_dp(to.dp);
  l->set_zero(to.zero);
  l->set_sp(to.sp);
  const std::string tmp = TempStepDir(out_root, meta.step());
  std::filesystem::remove_all(tmp, ec);  // a previous interrupted reshard
  Status st;
  // Target ranks are written a group at a time, tensor by tensor: each saved tensor state is read
  // once per group, and at most kGroup files are open.
  constexpr int kGroup = 256;
  const ParamLayout canonical = ParamLayout::ForModel(model, 1);
  // One buffer of the largest tensor, allocated once and never zero-filled. With the read-ahead
  // and the write buffers below (each at most half of it), the tool's memory is about twice the
  // largest tensor.
  int64_t largest = 1;
  for (const ParamInfo& p : canonical.params) largest = std::max(largest, p.numel());
  const size_t largest_bytes = static_cast<size_t>(largest) * sizeof(float);
  // In whole 2 MiB pages: first touching 4 KiB pages costs ~0.5 ms per MiB here, 2 MiB ones
  // ~0.1 (the first tensor's copy waits for it).
  const size_t buffer_bytes = (largest_bytes + kIoPageBytes - 1) / kIoPageBytes * kIoPageBytes;
  std::unique_ptr<float, void (*)(void*)> buffer(
      reinterpret_cast<float*>(AllocateIoBuffer(buffer_bytes)), std::free);
  constexpr int kIoThreads = 2;  // for the reads and for the writes
  std::vector<proto::CheckpointMetadata> fragments(static_cast<size_t>(to.world()));
  for (int g0 = 0; g0 < to.world() && st.ok(); g0 += kGroup) {
    const int g1 = std::min(to.world(), g0 + kGroup);
    std::vector<RankShardPlan> plans;
    std::vector<std::unique_ptr<RankFileWriter>> writers;
    std::map<std::string, std::vector<std::pair<int, size_t>>> users;  // name -> (rank, piece)
    for (int r = g0; r < g1; ++r) {
      const RankShardPlan& plan = plans.emplace_back(PlanRank(model, to, r));
      for (size_t k = 0; k < plan.writes.size(); ++k) {
        users[plan.layout.params[static_cast<size_t>(plan.writes[k].param)].name].push_back(
            {r - g0, k});
      }
    }
    // The (state, tensor) pairs this group needs, in the order they are processed (the saved
    // files' order: tensor by tensor within a state; going through a tensor's states one after
    // the other was tried and made the reads from the disk slower than the overlap it gained).
    std::vector<std::pair<StateKind, const ParamInfo*>> order;
    for (int s = 0; s < kNumStates; ++s) {
      for (const ParamInfo& p : canonical.params) {
        if (users.count(p.name)) order.emplace_back(static_cast<StateKind>(s), &p);
      }
    }
    // Every byte range the reads below take, in their order, is read ahead with O_DIRECT, several
    // pieces in flight, into a ring of half the largest tensor (at least 8, at most 32 MiB).
    // While this thread copies a tensor out to the write buffers, the ring fills and the
    // queued writes drain: the disk reads and writes at once with one tensor buffer. (Buffered
    // reads, one request at a time, made the tool 1.3-1.7x slower while the writes ran:
    // docs/BENCHMARKS.md.)
    std::unique_ptr<DirectStream> stream;
    if (st.ok()) {
      std::vector<FileRange> ranges;
      for (const auto& [state, p] : order)
        reader->PlanReads(p->name, state, WholeRegion(*p), &ranges);
      const int slots = static_cast<int>(
          std::clamp<size_t>(largest_bytes / 2 / kIoPageBytes, 4, (32 << 20) / kIoPageBytes));
      Result<std::unique_ptr<DirectStream>> s = DirectStream::Open(
          reader->dir(), std::move(ranges), kIoPageBytes, slots, kIoThreads, CheckpointDirectIo());
      if (s.ok()) stream = std::move(*s);
      if (!s.ok()) st = s.status();
      reader->SetStream(stream.get());
    }
    // The target files are created once the reads have started.
    for (int r = g0; r < g1 && st.ok(); ++r) {
      Result<std::unique_ptr<RankFileWriter>> w =
          RankFileWriter::Open(tmp, r, plans[static_cast<size_t>(r - g0)]);
      if (!w.ok()) st = w.status();
      if (w.ok()) writers.push_back(std::move(*w));
    }
    // The output goes to the disk with O_DIRECT, through a pool of buffers: one being filled per
    // file and kInFlight being written. They share a budget of half the largest tensor (at least
    // 8, at most 64 MiB); with more files than that allows buffers of kMinStage, buffered writes.
    // (Buffered writes, whose writeback competes with the reads, made the tool up to 2.5x
    // slower on this VM's disk: docs/BENCHMARKS.md.) Buffers of whole 2 MiB pages where the
    // budget allows: see AllocateIoBuffer.
    constexpr size_t kInFlight = 4, kMinStage = 1 << 20;
    const size_t budget = std::clamp<size_t>(largest_bytes / 2, 8 << 20, 64 << 20);
    size_t stage = budget / (writers.size() + kInFlight);
    stage = stage >= kIoPageBytes ? stage / kIoPageBytes * kIoPageBytes
                                  : stage / kDataAlignment * kDataAlignment;
    std::unique_ptr<DirectWritePool> pool;
    if (st.ok() && stage >= kMinStage) {
      pool = std::make_unique<DirectWritePool>(stage, static_cast<int>(writers.size() + kInFlight),
                                               kIoThreads);
      for (auto& w : writers) w->EnableStaging(pool.get());
    }
    std::vector<CopySegment> segs;
    std::vector<std::pair<const char*, size_t>> parts;
    for (size_t o = 0; o < order.size() && st.ok(); ++o) {
      st = CheckInterrupted("the resharded checkpoint");
      if (!st.ok()) break;
      const StateKind state = order[o].first;
      const ParamInfo& p = *order[o].second;
      const Region whole = WholeRegion(p);
      st = reader->Read(p.name, state, whole, buffer.get());
      const float* data = buffer.get();
      for (const auto& [i, k] : users[p.name]) {
        if (!st.ok()) break;
        const Region& region = plans[static_cast<size_t>(i)].writes[k].region;
        segs.clear();
        Intersect(whole, region, &segs);
        if (segs.size() == 1) {  // one run of the tensor (a row block)
          st = writers[static_cast<size_t>(i)]->Put(state, k, data + segs[0].src);
        } else {  // a column slab: one vectored write of its rows
          parts.clear();
          for (const CopySegment& c : segs) {
            parts.emplace_back(reinterpret_cast<const char*>(data + c.src),
                               static_cast<size_t>(c.count) * sizeof(float));
          }
          st = writers[static_cast<size_t>(i)]->PutParts(state, k, parts);
        }
      }
    }
    if (st.ok() && stream != nullptr) st = stream->Done();
    reader->SetStream(nullptr);
    stream.reset();
    for (size_t i = 0; i < writers.size() && st.ok(); ++i) {
      Result<uint64_t> bytes = writers[i]->Finish(&fragments[static_cast<size_t>(g0) + i]);
      if (!bytes.ok()) st = bytes.status();
      if (bytes.ok()) out.bytes_written += *bytes;
    }
    writers.clear();  // before the pool: an unfinished writer waits for its queued writes
  }
  if (st.ok()) st = CommitCheckpoint(out_root, tmp, model, base, std::move(fragments));
  if (!st.ok()) {  // never leave a partial output behind
    root.RemovePartial(meta.step());
    return st;
  }
  out.bytes_read = reader->bytes_read();
  out.dir = JoinPath(out_root, StepDirName(meta.step()));
  return out;
}

}  // namespace loom
