// The run's own export of its final weights.
#include "worker/final_export.h"

#include <filesystem>

#include "checkpoint/export.h"
#include "checkpoint/format.h"
#include "core/file_util.h"
#include "core/logging.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

// checkpoint.export: a .safetensors path is one file, anything else a Hugging Face directory.
bool ExportsOneFile(const CheckpointConfig& c) {
  return fs::path(c.export_path).extension() == ".safetensors";
}

}  // namespace

HfExtras HfExtrasFor(const JobConfig* job, int64_t vocab) {
  HfExtras e;
  e.byte_tokenizer =
      vocab == kByteVocab || (job != nullptr && !job->data.text.empty() && vocab >= kByteVocab);
  if (job != nullptr) {
    e.generation.temperature = job->sample.temperature;
    e.generation.top_k = job->sample.top_k;
  }
  return e;
}

Status CheckExportDestination(const JobConfig& job) {
  const CheckpointConfig& c = job.checkpoint;
  const std::string field = job.path + ": field 'checkpoint.export'";
  LOOM_RETURN_IF_ERROR(CheckOutsideCheckpoints(c.export_path, "", field));
  std::error_code ec;
  const fs::path parent = fs::absolute(c.export_path, ec).parent_path();
  if (!fs::is_directory(parent, ec)) {
    return InvalidArgument(field + ": '" + parent.string() +
                           "' is not a directory (the export goes in it)");
  }
  if (ExportsOneFile(c)) return CheckOutputFile(c.export_path, "", field);
  if (fs::exists(c.export_path, ec) && !fs::is_directory(c.export_path, ec)) {
    return InvalidArgument(field + ": '" + c.export_path +
                           "' exists and is not a directory (without the .safetensors "
                           "extension the export is a Hugging Face model directory)");
  }
  return Status::Ok();
}

Status ExportFinalWeights(const JobConfig& job, int64_t step) {
  const CheckpointConfig& c = job.checkpoint;
  RemoveExportLeftovers(c.export_path);  // of an export a crash cut short
  const std::string src = JoinPath(c.dir, StepDirName(step));
  Result<DType> dtype = ParseFloatDType(c.export_dtype, "checkpoint.export_dtype");
  const bool file = ExportsOneFile(c);
  Result<ExportResult> r =
      !dtype.ok() ? Result<ExportResult>(dtype.status())
      : file      ? ExportSafetensors(src, c.export_path, ExportNames::kHuggingFace, *dtype)
                  : ExportHuggingFaceDir(src, c.export_path, *dtype, kDefaultMaxShardBytes,
                                         HfExtrasFor(&job, job.model.vocab));
  if (r.ok()) {
    LOOM_LOG(INFO, CKPT) << "exported " << src << " to " << c.export_path << " ("
                         << (file ? "" : "a Hugging Face model directory, ") << r->tensors
                         << " tensors, " << c.export_dtype << ", Hugging Face "
                         << (r->family == ModelFamily::kLlama ? "Llama" : "GPT-2") << " names"
                         << (r->tokenizer ? ", the byte-level tokenizer)" : ")");
  }
  return r.status().WithContext(job.path + ": field 'checkpoint.export'");
}

}  // namespace loom
