// Importing init_from's weights into checkpoint.dir for the run to load.
#include "worker/init_from.h"

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "checkpoint/format.h"
#include "checkpoint/hf_tokenizer.h"
#include "checkpoint/import.h"
#include "core/file_util.h"
#include "core/logging.h"
#include "model/config.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

std::string DescribeModel(const ModelConfig& m) {
  const std::string d = "vocab " + std::to_string(m.vocab) + ", max_seq " +
                        std::to_string(m.max_seq) + ", " + std::to_string(m.layers) + " layers, " +
                        std::to_string(m.heads) + " heads, hidden " + std::to_string(m.hidden);
  if (!m.llama()) return d;
  char numbers[192];
  std::snprintf(numbers, sizeof(numbers), ", rope_theta %g, norm_eps %g", m.rope_theta, m.norm_eps);
  if (m.rope_scaling.on()) {
    const RopeScaling& r = m.rope_scaling;
    const size_t used = std::strlen(numbers);
    std::snprintf(numbers + used, sizeof(numbers) - used,
                  ", rope_scaling llama3 (factor %g, low %g, high %g, original_max_seq %lld)",
                  r.factor, r.low_freq_factor, r.high_freq_factor,
                  static_cast<long long>(r.original_max_seq));
  }
  return d + "; llama: " + std::to_string(m.kv()) + " key/value heads, ffn_hidden " +
         std::to_string(m.ffn()) + (m.tie_embeddings ? ", tied embeddings" : ", untied head") +
         numbers;
}

// Whether the weights are of the job's model: the sizes, and a Llama's rope_theta, rope scaling
// and norm epsilon too (trained with others, the model would compute something other than the one
// the weights were made for).
bool SameModel(const ModelConfig& a, const ModelConfig& b) {
  if (a.vocab != b.vocab || a.max_seq != b.max_seq || a.layers != b.layers || a.heads != b.heads ||
      a.hidden != b.hidden || a.family != b.family) {
    return false;
  }
  return !a.llama() || (a.kv() == b.kv() && a.ffn() == b.ffn() &&
                        a.tie_embeddings == b.tie_embeddings && a.rope_theta == b.rope_theta &&
                        a.rope_scaling == b.rope_scaling && a.norm_eps == b.norm_eps);
}

// A Hugging Face directory that carries its tokenizer, fine-tuned on `data.text` (tokenised byte
// by byte): unless that tokenizer is the byte-level one, the model would read bytes as its own
// tokens and learn from noise, which training would not say.
Status CheckTokenizer(const JobConfig& job, const std::string& where) {
  const std::string& from = job.checkpoint.init_from;
  std::error_code ec;
  const fs::path file = fs::path(from) / kHfTokenizerFile;
  if (job.data.text.empty() || !fs::is_directory(from, ec) || !fs::exists(file, ec)) {
    return Status::Ok();
  }
  // Hugging Face's largest tokenizer.json files are tens of MB.
  Result<std::string> text = ReadRegularFile(file.string(), uint64_t{256} << 20);
  if (!text.ok()) return text.status().WithContext(where);
  std::string what;
  if (IsByteTokenizerJson(*text, &what)) return Status::Ok();
  return InvalidArgument(
      where + ": '" + from + "' comes with its own tokenizer (" + file.string() + ": " + what +
      "), but the job's data.text is tokenised byte by byte (one token per byte, " + job.data.text +
      "), so the model would read bytes as its tokens: tokenise the text with the model's "
      "tokenizer into token files for data.train (docs/DATA.md), or, if the model was trained "
      "on Loom's byte tokens, remove that tokenizer.json");
}

// Rank 0: imports init_from into `tmp`; another model is named here, not by the loader (its
// errors would name the import). Nothing is left in `tmp` on failure.
Status ImportWeights(const JobConfig& job, const std::string& where, const std::string& tmp) {
  const CheckpointConfig& c = job.checkpoint;
  std::error_code ec;
  fs::remove_all(tmp, ec);
  Result<ImportResult> r =
      ImportSafetensors(c.init_from, tmp, job.model.heads, job.path + ": field 'model.heads'");
  Status imported = r.status().WithContext(where);
  if (r.ok() && !SameModel(r->model, job.model)) {
    imported = InvalidArgument(where + ": '" + c.init_from + "' holds a model of " +
                               DescribeModel(r->model) + "; the job's model has " +
                               DescribeModel(job.model));
  }
  if (imported.ok()) imported = CheckTokenizer(job, where);
  if (imported.ok()) {
    LOOM_LOG(INFO, CKPT) << "imported " << c.init_from << " (" << r->tensors
                         << " tensors) to start from its weights";
  } else {
    fs::remove_all(tmp, ec);
  }
  return imported;
}

}  // namespace

Result<int64_t> InitFromWeights(const JobConfig& job, int world_rank, WorldVote* vote,
                                const std::string& where, const LoadImported& load) {
  const CheckpointConfig& c = job.checkpoint;
  if (c.dir.empty()) {
    return InvalidArgument(where + ": '" + c.init_from +
                           "' holds weights, not a checkpoint: they are imported into "
                           "checkpoint.dir on the way, so set it (or --checkpoint-dir), or make a "
                           "checkpoint first: loom ckpt import " +
                           c.init_from + " OUT, then use OUT");
  }
  // Under checkpoint.dir, which every rank reads.
  const std::string tmp = JoinPath(c.dir, kInitImportDir);
  const Status imported = world_rank == 0 ? ImportWeights(job, where, tmp) : Status::Ok();
  LOOM_ASSIGN_OR_RETURN(int failed, vote->Max(imported.ok() ? 0 : 1));
  if (!imported.ok()) return imported;
  if (failed != 0) {
    return DataLoss(where + ": world rank 0 could not import '" + c.init_from +
                    "' (its error names the file and tensor)");
  }
  // Collective, and the same outcome on every rank: all reach the vote below, which removes the
  // import whatever happened.
  Result<int64_t> step = load(JoinPath(tmp, StepDirName(0)));
  // Every rank has read its part (or failed) before the import goes.
  Result<int> done = vote->Max(step.ok() ? 0 : 1);
  if (world_rank == 0) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
  }
  LOOM_RETURN_IF_ERROR(done.status());
  return step;
}

}  // namespace loom
