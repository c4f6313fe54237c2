// Checkpoint description and full verification.
#include "checkpoint/inspect.h"
#include "checkpoint/metadata_specs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "checkpoint/reader.h"
#include "core/config_reader.h"
#include "core/safetensors.h"
#include "model/layout.h"
#include "parallel/param_layout.h"

namespace loom {
namespace {

// Each data file's own safetensors header lists exactly its chunks, where the metadata puts them:
// tools that open the file by itself (it is a valid safetensors file) must find the same bytes.
Status CheckDataFileHeaders(const std::string& dir, const proto::CheckpointMetadata& m) {
  for (const proto::FileEntry& f : m.files()) {
    const std::string path = JoinPath(dir, f.name());
    Result<SafetensorsHeader> h = ReadSafetensorsHeader(path);
    if (!h.ok()) return DataLoss(h.status().message() + " (a data file's safetensors header)");
    std::map<uint64_t, std::pair<std::string, uint64_t>> by_offset;  // offset -> (name, bytes)
    for (const auto& [name, e] : h->tensors) by_offset[e.offset] = {name, e.bytes};
    size_t chunks = 0;
    for (const proto::TensorEntry& t : m.tensors()) {
      for (int k = 0; k < t.chunks_size(); ++k) {
        const proto::Chunk& c = t.chunks(k);
        if (c.file() != f.name()) continue;
        ++chunks;
        const auto it = by_offset.find(c.offset());
        const std::string prefix = t.name() + "/" + t.state() + "/";
        if (it == by_offset.end() || it->second.second != c.length() ||
            it->second.first.compare(0, prefix.size(), prefix) != 0) {
          return DataLoss(path + ": tensor '" + t.name() + "' state '" + t.state() + "' chunk " +
                          std::to_string(k) + ": the file's safetensors header has no entry '" +
                          prefix + "*' of " + std::to_string(c.length()) + " bytes at byte " +
                          std::to_string(c.offset()) + " (its header was changed or damaged)");
        }
      }
    }
    if (chunks != h->tensors.size()) {
      return DataLoss(path + ": its safetensors header lists " + std::to_string(h->tensors.size()) +
                      " tensors, the metadata " + std::to_string(chunks) + " chunks in this file");
    }
  }
  return Status::Ok();
}

// The precision the run trained in, from its provenance: the last --precision flag, else the
// recorded job's `precision` (fp32 when it has none); "" when neither was recorded.
std::string TrainedPrecision(const proto::Provenance& p) {
  std::string flag;
  for (const std::string& f : p.overrides()) {
    if (f.rfind("--precision ", 0) == 0) flag = f.substr(12);
  }
  if (!flag.empty()) return flag;
  if (p.job_yaml().empty()) return "";
  Result<ConfigSection> job = ConfigSection::LoadString(p.job_yaml(), "<recorded job>");
  std::string precision = "fp32";
  if (!job.ok() || !job->String("precision", &precision, false).ok()) return "";
  return precision;
}

std::string Format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  return buf;
}

std::string Bytes(uint64_t n) {
  if (n >= (1ull << 30)) return Format("%.2f GiB", static_cast<double>(n) / (1ull << 30));
  if (n >= (1ull << 20)) return Format("%.2f MiB", static_cast<double>(n) / (1ull << 20));
  if (n >= (1ull << 10)) return Format("%.1f KiB", static_cast<double>(n) / (1ull << 10));
  return Format("%llu B", static_cast<unsigned long long>(n));
}

ParamLayout CanonicalLayout(const proto::ModelSpec& mo) {
  return ModelLayout(ModelOf(mo), 1);
}

}  // namespace

Result<std::string> DescribeCheckpoint(const std::string& path, Status* files) {
  LOOM_ASSIGN_OR_RETURN(std::string dir, ResolveCheckpointDir(path));
  // The description needs the metadata only; the data files are checked apart, so a damaged
  // checkpoint is still described.
  LOOM_ASSIGN_OR_RETURN(const proto::CheckpointMetadata m, ReadMetadata(dir));
  *files = CheckpointReader::Open(dir).status();
  const proto::ModelSpec& mo = m.model();
  const proto::LayoutSpec& l = m.saved_layout();
  const proto::OptimizerState& o = m.optimizer();
  std::string out;
  out += "checkpoint   " + dir + "\n";
  if (IsTemporaryName(dir)) {
    out += "             (*.tmp: an uncommitted save or a deletion in progress; never loaded)\n";
  }
  if (dir != path) {  // a root: what else it holds
    std::string others, aside;
    bool latest_listed = false;
    const std::string latest = ReadLatest(path);
    for (const auto& [step, d] : ListCheckpoints(path)) {
      if (d != dir) others += (others.empty() ? "" : ", ") + PathName(d);
      latest_listed = latest_listed || PathName(d) == latest;
    }
    std::error_code ec;
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path, ec)) {
      const std::string n = e.path().filename().string();
      if (n.rfind("step_", 0) == 0 && n.find('.') != std::string::npos) names.push_back(n);
    }
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) aside += (aside.empty() ? "" : ", ") + n;
    // Loads go by the directories (the newest valid one), not by this pointer: say when it is
    // stale rather than let it suggest which checkpoint a resume takes.
    out += "root         " + path + ": latest " +
           (latest.empty()  ? "(none)"
            : latest_listed ? latest
                            : latest + " (not a checkpoint here; resumes ignore the pointer)") +
           "; older checkpoints " + (others.empty() ? "none" : others) +
           (aside.empty() ? "" : "; set aside or unfinished (never loaded): " + aside) + "\n";
  }
  out += Format("step         %lld (format version %d)\n", static_cast<long long>(m.step()),
                m.format_version());
  if (m.has_provenance()) {  // format version 3
    const proto::Provenance& p = m.provenance();
    std::string by = "by loom " + p.loom_version() + " at " + p.saved_at();
    if (!p.source().empty()) by += ", imported from " + p.source();
    if (!p.job_path().empty()) {
      by += ", from " + p.job_path();
      std::string flags;
      for (const std::string& f : p.overrides()) flags += (flags.empty() ? "" : " ") + f;
      if (!flags.empty()) by += " with " + flags;
      if (!p.job_yaml().empty()) by += " (job text recorded: loom ckpt inspect --job)";
      if (std::isfinite(p.train_loss())) by += Format("; loss %.4f", p.train_loss());
    }
    out += "saved        " + by + "\n";
  }
  const ParamLayout canonical = CanonicalLayout(mo);
  out += Format(
      "model        %s: vocab %lld, max_seq %lld, layers %lld, heads %lld, hidden %lld (%.2fM "
      "parameters)\n",
      mo.arch().c_str(), static_cast<long long>(mo.vocab()), static_cast<long long>(mo.max_seq()),
      static_cast<long long>(mo.layers()), static_cast<long long>(mo.heads()),
      static_cast<long long>(mo.hidden()), static_cast<double>(canonical.total) / 1e6);
  if (mo.arch() == "llama") {
    out +=
        Format("             kv_heads %lld, ffn_hidden %lld, rope_theta %g, norm_eps %g, %s head\n",
               static_cast<long long>(mo.kv_heads()), static_cast<long long>(mo.ffn_hidden()),
               mo.rope_theta(), mo.norm_eps(), mo.untied() ? "untied" : "tied");
    if (mo.has_rope_scaling()) {
      const proto::RopeScalingSpec& r = mo.rope_scaling();
      out += Format(
          "             rope_scaling %s: factor %g, low_freq_factor %g, high_freq_factor %g, "
          "original_max_seq %lld\n",
          r.type().c_str(), r.factor(), r.low_freq_factor(), r.high_freq_factor(),
          static_cast<long long>(r.original_max_seq()));
    }
  }
  if (l.first_stage_layers() > 0 || l.last_stage_layers() > 0) {
    out += Format("             uneven stages: first %d, last %d layers\n", l.first_stage_layers(),
                  l.last_stage_layers());
  }
  const long long ranks = static_cast<long long>(l.tp()) * std::max(1, l.cp()) * l.pp() * l.dp();
  out += Format("saved with   tp=%d cp=%d pp=%d vpp=%d dp=%d zero=%d sp=%s (%lld rank%s)\n", l.tp(),
                l.cp(), l.pp(), l.vpp(), l.dp(), l.zero(), l.sp() ? "on" : "off", ranks,
                ranks == 1 ? "" : "s");
  if (const std::string p = m.has_provenance() ? TrainedPrecision(m.provenance()) : "";
      !p.empty()) {
    out += "trained in   " + p +
           (p == "bf16" ? " compute (the checkpoint holds the fp32 master weights and moments; it "
                          "resumes in either precision)\n"
                        : " (resumes in either precision)\n");
  }
  // An imported checkpoint (loom ckpt import) was never trained: it has no settings to show.
  if (IsImportedCheckpoint(m)) {
    out += Format("optimizer    %s, 0 updates; no settings recorded (zero moments: %s)\n",
                  o.name().c_str(), m.rng().generator().c_str());
    out += "data         none recorded (the job that trains from it sets them)\n";
  } else {
    out += Format(
        "optimizer    %s, %lld updates; lr %g (min %g, warmup %lld, decay to step %lld), betas "
        "(%g, %g), eps %g, weight decay %g, clip %g\n",
        o.name().c_str(), static_cast<long long>(o.step_count()), o.lr(), o.min_lr(),
        static_cast<long long>(o.warmup_steps()), static_cast<long long>(o.decay_steps()),
        o.beta1(), o.beta2(), o.eps(), o.weight_decay(), o.grad_clip());
    out += Format("data         seed %llu, seq %lld, global batch %lld, %lld samples consumed\n",
                  static_cast<unsigned long long>(m.data().seed()),
                  static_cast<long long>(m.data().seq()),
                  static_cast<long long>(m.data().global_batch()),
                  static_cast<long long>(m.data().consumed_samples()));
    if (!m.data().source().empty()) {
      out += Format("             from %s (%lld training tokens)\n", m.data().source().c_str(),
                    static_cast<long long>(m.data().train_tokens()));
    }
  }
  uint64_t file_bytes = 0;
  for (const proto::FileEntry& f : m.files()) file_bytes += f.bytes();
  out += Format("files        %d data files, %s; checksums: CRC-32C per %s block\n", m.files_size(),
                Bytes(file_bytes).c_str(), Bytes(m.checksum_block_bytes()).c_str());
  out += "\n";
  out += Format("%-28s %-14s %12s %10s %10s %10s %12s\n", "tensor", "shape", "elements", "param",
                "exp_avg", "exp_avg_sq", "bytes");
  std::map<std::string, std::map<std::string, int>> chunks;
  std::map<std::string, uint64_t> bytes;
  for (const proto::TensorEntry& t : m.tensors()) {
    chunks[t.name()][t.state()] = t.chunks_size();
    for (const proto::Chunk& c : t.chunks()) bytes[t.name()] += c.length();
  }
  uint64_t total = 0;
  for (const ParamInfo& p : canonical.params) {
    std::string shape = "[";
    for (size_t d = 0; d < p.global_shape.size(); ++d) {
      shape += (d ? ", " : "") + std::to_string(p.global_shape[d]);
    }
    shape += "]";
    auto& c = chunks[p.name];
    out += Format("%-28s %-14s %12lld %10d %10d %10d %12s\n", p.name.c_str(), shape.c_str(),
                  static_cast<long long>(p.numel()), c["param"], c["exp_avg"], c["exp_avg_sq"],
                  Bytes(bytes[p.name]).c_str());
    total += bytes[p.name];
  }
  out += Format("%-28s %-14s %12lld %10s %10s %10s %12s\n", "total", "",
                static_cast<long long>(canonical.total), "", "", "", Bytes(total).c_str());
  out += "(columns param/exp_avg/exp_avg_sq: chunks per state)\n";
  return out;
}

Result<VerifyReport> VerifyCheckpoint(const std::string& path) {
  LOOM_ASSIGN_OR_RETURN(std::string dir, ResolveCheckpointDir(path));
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader, CheckpointReader::Open(dir));
  const proto::CheckpointMetadata& m = reader->meta();
  const std::string meta_path = JoinPath(dir, kMetadataFile);
  VerifyReport rep;
  rep.dir = dir;
  // Opening checked that every tensor of the model is there with its three states and its
  // shape, and nothing else (ReadMetadata).
  for (const proto::TensorEntry& t : m.tensors()) {
    ++rep.tensors;
    rep.chunks += t.chunks_size();
  }
  LOOM_RETURN_IF_ERROR(reader->VerifyAll());
  LOOM_RETURN_IF_ERROR(CheckDataFileHeaders(dir, m));
  rep.bytes = reader->bytes_read();
  std::set<std::string> listed = {kMetadataFile};
  for (const proto::FileEntry& f : m.files()) listed.insert(f.name());
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (!listed.count(n)) rep.extra.push_back(n);
  }
  std::sort(rep.extra.begin(), rep.extra.end());
  return rep;
}

}  // namespace loom
