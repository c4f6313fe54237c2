// `loom ckpt`: universal checkpoints without a cluster (one CPU, memory about twice the largest
// tensor).
//   loom ckpt inspect DIR                       step, model, layout, tensors table
//   loom ckpt verify DIR                        every checksum, every chunk, every tensor
//   loom ckpt reshard DIR --to tp=2,pp=4,dp=2,zero=3 OUT
//   loom ckpt export DIR --safetensors model.safetensors [--names hf|loom] [--dtype f32|bf16|f16]
//   loom ckpt export DIR --hf-dir OUT [--dtype f32|bf16|f16] [--max-shard-size 5GB]
//                    [--tokenizer auto|byte|none]
//                    model.safetensors (or shards + index), config.json, generation_config.json,
//                    the byte-level tokenizer (tokenizer.json, tokenizer_config.json)
//   loom ckpt import FILE.safetensors|HF_DIR OUT [--heads N]   GPT-2 or Llama weights
//   loom ckpt diff A B [--rtol R] [--atol T] [--weights-only] [--all]   any two layouts
// DIR is a step directory or a checkpoint root (its newest checkpoint).
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>

#include "checkpoint/diff.h"
#include "checkpoint/export.h"
#include "checkpoint/format.h"
#include "checkpoint/import.h"
#include "checkpoint/inspect.h"
#include "checkpoint/reshard.h"
#include "cli/commands.h"
#include "cli/validators.h"
#include "core/interrupt.h"
#include "core/logging.h"
#include "core/memory.h"
#include "core/threads.h"
#include "job/job_config.h"
#include "worker/final_export.h"

namespace loom {
namespace {

struct CkptOptions {
  std::string dir, out, to, safetensors, hf_dir, names = "hf", dtype = "f32", max_shard_size,
                                                 tokenizer = "auto";
  int64_t heads = 0;
  bool all = false, weights_only = false, job = false;
  double rtol = 0, atol = 0;
};

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Status RunInspect(const CkptOptions& o) {
  if (o.job) {  // the job file the run was started with, as recorded
    LOOM_ASSIGN_OR_RETURN(std::string dir, ResolveCheckpointDir(o.dir));
    LOOM_ASSIGN_OR_RETURN(const proto::CheckpointMetadata m, ReadMetadata(dir));
    if (m.provenance().job_yaml().empty()) {
      return NotFound(JoinPath(dir, kMetadataFile) + ": no job recorded (" +
                      (!m.has_provenance()
                           ? "saved before format version 3, or resharded from such a checkpoint"
                       : IsImportedCheckpoint(m)
                           ? "an imported checkpoint"
                           : "the run's job text was not available, over 1 MiB or not UTF-8") +
                      ")");
    }
    const proto::Provenance& p = m.provenance();
    std::printf("# %s, as read by the run that saved %s", p.job_path().c_str(), dir.c_str());
    for (size_t i = 0; i < static_cast<size_t>(p.overrides_size()); ++i) {
      std::printf("%s%s", i == 0 ? "; command-line overrides: " : " ", p.overrides(i).c_str());
    }
    std::printf("\n");
    std::fwrite(p.job_yaml().data(), 1, p.job_yaml().size(), stdout);
    return Status::Ok();
  }
  Status files;
  LOOM_ASSIGN_OR_RETURN(std::string text, DescribeCheckpoint(o.dir, &files));
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);  // before the error, which goes to stderr
  return files.WithContext("the checkpoint is damaged (described above from its metadata)");
}

Status VerifyOne(const std::string& dir) {
  const auto t0 = std::chrono::steady_clock::now();
  LOOM_ASSIGN_OR_RETURN(VerifyReport r, VerifyCheckpoint(dir));
  std::printf("OK %s: %d tensor states, %lld chunks, %.2f MiB checksummed in %.2f s\n",
              r.dir.c_str(), r.tensors, static_cast<long long>(r.chunks),
              static_cast<double>(r.bytes) / (1 << 20), Since(t0));
  for (const std::string& f : r.extra) {
    std::printf("note: %s/%s is not part of the checkpoint (metadata.json does not list it)\n",
                r.dir.c_str(), f.c_str());
  }
  if (IsTemporaryName(r.dir)) {
    std::printf("note: %s is named *.tmp: an uncommitted save, never loaded\n", r.dir.c_str());
  }
  return Status::Ok();
}

// The newest checkpoint of DIR, or with --all every committed one under the root (those a
// resume could fall back to), each reported; an error naming the ones that failed.
Status RunVerify(const CkptOptions& o) {
  if (!o.all) return VerifyOne(o.dir);
  if (IsStepDir(o.dir)) {
    return InvalidArgument("--all: '" + o.dir + "' is one checkpoint; give its root");
  }
  LOOM_RETURN_IF_ERROR(ResolveCheckpointDir(o.dir).status());  // names a missing or empty root
  std::string failed;
  int n = 0;
  for (const auto& [step, dir] : ListCheckpoints(o.dir)) {
    ++n;
    if (Status st = VerifyOne(dir); !st.ok()) {
      std::printf("FAILED %s: %s\n", dir.c_str(), ForUser(st, LogSubsys::CLI).c_str());
      failed += (failed.empty() ? "" : ", ") + PathName(dir);
    }
  }
  if (!failed.empty()) {
    return DataLoss(o.dir + ": " + failed + " failed verification (see above)");
  }
  std::printf("all %d checkpoints under %s verified\n", n, o.dir.c_str());
  return Status::Ok();
}

Status RunReshard(const CkptOptions& o) {
  InstallInterruptHandlers();  // an interrupted run removes its partial output
  Result<Layout> to = ParseLayoutSpec(o.to);
  if (!to.ok()) return to.status().WithContext("--to");
  // The resharder keeps every source file open twice (O_DIRECT and buffered) and up to 256
  // target files twice: a checkpoint of hundreds of ranks passes a soft limit of 1024.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);  // best effort: the open that fails says so
  }
  const auto t0 = std::chrono::steady_clock::now();
  LOOM_ASSIGN_OR_RETURN(ReshardResult r, Reshard(o.dir, *to, o.out));
  const double s = Since(t0);
  std::printf(
      "wrote %s for %s (%d ranks): read %.2f MiB, wrote %.2f MiB in %.2f s; peak memory %.1f "
      "MiB\n",
      r.dir.c_str(), to->ToString().c_str(), to->world(),
      static_cast<double>(r.bytes_read) / (1 << 20),
      static_cast<double>(r.bytes_written) / (1 << 20), s,
      static_cast<double>(PeakRssBytes()) / (1 << 20));
  if (!r.note.empty()) std::printf("note: %s\n", r.note.c_str());
  return Status::Ok();
}

const char* HfClass(ModelFamily f) {
  return f == ModelFamily::kLlama ? "LlamaForCausalLM" : "GPT2LMHeadModel";
}

// --tokenizer: auto follows the job the checkpoint recorded (worker/final_export.h).
Result<HfExtras> ExportExtras(const CkptOptions& o) {
  if (o.tokenizer != "auto" && o.tokenizer != "byte" && o.tokenizer != "none") {
    return InvalidArgument("--tokenizer: expected 'auto', 'byte' or 'none', got '" + o.tokenizer +
                           "'");
  }
  LOOM_ASSIGN_OR_RETURN(std::string dir, ResolveCheckpointDir(o.dir));
  LOOM_ASSIGN_OR_RETURN(const proto::CheckpointMetadata m, ReadMetadata(dir));
  std::optional<JobConfig> job;
  const proto::Provenance& p = m.provenance();
  if (!p.job_yaml().empty()) {
    // Read for its data source and sampling only: a job whose files have moved since still says.
    Result<JobConfig> j = ParseJobConfig(p.job_yaml(), p.job_path(), JobUse::kPlan);
    if (j.ok()) job = std::move(*j);
  }
  HfExtras e = HfExtrasFor(job ? &*job : nullptr, m.model().vocab());
  if (o.tokenizer != "auto") e.byte_tokenizer = o.tokenizer == "byte";
  return e;
}

Status RunExport(const CkptOptions& o) {
  ExportNames names;
  if (o.names == "hf") {
    names = ExportNames::kHuggingFace;
  } else if (o.names == "loom") {
    names = ExportNames::kLoom;
  } else {
    return InvalidArgument("--names: expected 'hf' or 'loom', got '" + o.names + "'");
  }
  LOOM_ASSIGN_OR_RETURN(DType dtype, ParseFloatDType(o.dtype, "--dtype"));
  if (o.safetensors.empty() == o.hf_dir.empty()) {
    return InvalidArgument("expected one of --safetensors FILE or --hf-dir DIR");
  }
  if (!o.max_shard_size.empty() && o.hf_dir.empty()) {
    return InvalidArgument("--max-shard-size: only with --hf-dir (--safetensors is one file)");
  }
  if (o.tokenizer != "auto" && o.hf_dir.empty()) {
    return InvalidArgument("--tokenizer: only with --hf-dir (--safetensors holds weights only)");
  }
  InstallInterruptHandlers();  // an interrupted export removes its partial files
  if (!o.hf_dir.empty()) {
    if (names != ExportNames::kHuggingFace) {
      return InvalidArgument("--names " + o.names + ": --hf-dir writes Hugging Face names only");
    }
    uint64_t max_shard = kDefaultMaxShardBytes;
    if (!o.max_shard_size.empty()) {
      LOOM_ASSIGN_OR_RETURN(max_shard, ParseByteSize(o.max_shard_size, "--max-shard-size"));
    }
    LOOM_ASSIGN_OR_RETURN(HfExtras extras, ExportExtras(o));
    LOOM_ASSIGN_OR_RETURN(ExportResult r,
                          ExportHuggingFaceDir(o.dir, o.hf_dir, dtype, max_shard, extras));
    const std::string weights = r.files.size() == 1
                                    ? JoinPath(o.hf_dir, r.files[0])
                                    : JoinPath(o.hf_dir, r.files.front()) + " ... " +
                                          r.files.back() + " (" + std::to_string(r.files.size()) +
                                          " shards), " + kHfIndexFile;
    std::printf(
        "wrote %s and config.json from %s: %d tensors, %.2f MiB (%s); load it with "
        "%s.from_pretrained\n",
        weights.c_str(), r.dir.c_str(), r.tensors, static_cast<double>(r.bytes) / (1 << 20),
        DTypeName(dtype), HfClass(r.family));
    std::printf("  and generation_config.json%s\n",
                r.tokenizer ? "; tokenizer.json and tokenizer_config.json: the byte-level "
                              "tokenizer (256 tokens), for AutoTokenizer.from_pretrained"
                            : " (no tokenizer: --tokenizer byte writes Loom's byte-level one)");
    return Status::Ok();
  }
  LOOM_ASSIGN_OR_RETURN(ExportResult r, ExportSafetensors(o.dir, o.safetensors, names, dtype));
  const std::string naming = names == ExportNames::kLoom       ? "Loom"
                             : r.family == ModelFamily::kLlama ? "Hugging Face Llama"
                                                               : "Hugging Face GPT-2";
  std::printf("wrote %s from %s: %d tensors, %.2f MiB (%s names, %s)\n", o.safetensors.c_str(),
              r.dir.c_str(), r.tensors, static_cast<double>(r.bytes) / (1 << 20), naming.c_str(),
              DTypeName(dtype));
  return Status::Ok();
}

Status RunImport(const CkptOptions& o) {
  InstallInterruptHandlers();  // an interrupted run removes its partial output
  LOOM_ASSIGN_OR_RETURN(ImportResult r, ImportSafetensors(o.dir, o.out, o.heads));
  const ModelConfig& m = r.model;
  std::string model = std::string(m.llama() ? "Llama" : "GPT-2") + " of " +
                      std::to_string(m.layers) + " layers, " + std::to_string(m.heads) + " heads" +
                      (m.llama() ? " (" + std::to_string(m.kv()) + " key/value)" : "") +
                      ", hidden " + std::to_string(m.hidden) +
                      (m.llama() ? ", ffn_hidden " + std::to_string(m.ffn()) : "") + ", vocab " +
                      std::to_string(m.vocab) + ", max_seq " + std::to_string(m.max_seq);
  if (m.llama()) model += m.tie_embeddings ? ", tied embeddings" : ", untied head";
  std::printf(
      "wrote %s: %s; %d tensors (%d buffers or tied head skipped), AdamW moments zero, step 0\n"
      "start a run from it with: loom train --config JOB --init-from %s\n",
      r.dir.c_str(), model.c_str(), r.tensors, r.skipped, o.out.c_str());
  return Status::Ok();
}

// "element 1033 (row 4, col 9)" of a [rows, cols] tensor.
std::string ElementText(const StateDiff& d) {
  std::string t = "element " + std::to_string(d.worst);
  if (d.rows > 1 && d.cols > 1) {
    t += " (row " + std::to_string(d.worst / d.cols) + ", col " + std::to_string(d.worst % d.cols) +
         ")";
  }
  return t;
}

// Two checkpoints, tensor by tensor: the differing tensor states (every one with --all) and a
// verdict. *same: no element differs (bit for bit), or, with a tolerance given, none beyond it.
Status RunDiff(const CkptOptions& o, bool tolerance, bool* same) {
  InstallInterruptHandlers();
  LOOM_ASSIGN_OR_RETURN(DiffReport r,
                        DiffCheckpoints(o.dir, o.out, o.rtol, o.atol, o.weights_only));
  std::printf("A: %s%s\nB: %s%s\n", r.a.c_str(),
              r.a_imported ? " (imported: weights only, no training state)" : "", r.b.c_str(),
              r.b_imported ? " (imported: weights only, no training state)" : "");
  for (const std::string& n : r.notes) std::printf("metadata differs: %s\n", n.c_str());
  int differing_states = 0;
  bool header = false;
  const StateDiff* worst = nullptr;      // the largest |a-b|
  const StateDiff* worst_rel = nullptr;  // the largest ||a-b||/||b||
  for (const StateDiff& d : r.states) {
    if (d.differing > 0) ++differing_states;
    if (d.worst >= 0 && (worst == nullptr || d.max_abs > worst->max_abs)) worst = &d;
    if (d.worst >= 0 && (worst_rel == nullptr || RelativeNorm(d) > RelativeNorm(*worst_rel))) {
      worst_rel = &d;
    }
    if (d.differing == 0 && !o.all) continue;
    if (!header) {
      std::printf("%-28s %-10s %12s %12s %12s %14s%s\n", "tensor", "state", "elements", "differing",
                  "max |a-b|", "||a-b||/||b||", tolerance ? " beyond tolerance" : "");
      header = true;
    }
    std::printf("%-28s %-10s %12lld %12lld %12.4g %14.4g", d.tensor.c_str(), StateName(d.state),
                static_cast<long long>(d.elements), static_cast<long long>(d.differing), d.max_abs,
                RelativeNorm(d));
    if (tolerance) std::printf(" %16lld", static_cast<long long>(d.beyond_tol));
    std::printf("\n");
  }
  const int states = static_cast<int>(r.states.size());
  const std::string what = o.weights_only ? "weights" : "tensor states";
  if (r.differing == 0) {
    std::printf("identical: all %d %s, %lld elements, bit for bit\n", states, what.c_str(),
                static_cast<long long>(r.elements));
    *same = true;
  } else {
    std::string detail = std::to_string(differing_states) + " of " + std::to_string(states) + " " +
                         what + ", " + std::to_string(r.differing) + " of " +
                         std::to_string(r.elements) + " elements differ in their bits";
    if (r.unequal < r.differing) {
      detail += " (" + std::to_string(r.differing - r.unequal) +
                " only as -0/+0 or NaN payloads, equal in value)";
    }
    if (worst != nullptr) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.4g", worst->max_abs);
      detail += "; largest |a-b| " + std::string(buf) + " in " + worst->tensor + " " +
                StateName(worst->state) + " at " + ElementText(*worst);
      std::snprintf(buf, sizeof(buf), "%.4g", RelativeNorm(*worst_rel));
      detail += "; largest ||a-b||/||b|| " + std::string(buf) + " in " + worst_rel->tensor + " " +
                StateName(worst_rel->state);
    }
    char tol[96];
    std::snprintf(tol, sizeof(tol), "rtol %g, atol %g", o.rtol, o.atol);
    if (!tolerance) {
      *same = false;
      std::printf("differ: %s\n", detail.c_str());
    } else if (r.beyond_tol == 0) {
      *same = true;
      std::printf("close: every element within %s (|a-b| <= atol + rtol*|b|); %s\n", tol,
                  detail.c_str());
    } else {
      *same = false;
      std::printf("differ: %lld elements beyond %s (|a-b| <= atol + rtol*|b|); %s\n",
                  static_cast<long long>(r.beyond_tol), tol, detail.c_str());
    }
  }
  // The verdict is the exit status: a report that could not be written is trouble (2), not
  // "they differ" (1).
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    return IoError("could not write the report to standard output");
  }
  return Status::Ok();
}

// The exit code: 0, 1 on an error, 128 + the signal when interrupted (the shell's convention).
int Finish(const std::string& command, const Status& st) {
  if (st.ok()) return 0;
  const int code = ReportError(command, st);
  return InterruptSignal() != 0 ? 128 + InterruptSignal() : code;
}

}  // namespace

void AddCkptCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<CkptOptions>();
  CLI::App* cmd = app.add_subcommand(
      "ckpt", "Inspect, verify, reshard, compare, export and import checkpoints");
  cmd->require_subcommand(1);
  auto add = [&](const char* name, const char* help, Status (*run)(const CkptOptions&)) {
    CLI::App* sub = cmd->add_subcommand(name, help);
    sub->add_option("dir", o->dir, "A step directory or a checkpoint root (its newest)")
        ->required()
        ->check(NonEmptyPath());
    sub->callback([o, exit_code, run, name] {
      ConfigureThreads(1);  // one thread of I/O and copies; no idle BLAS or OpenMP workers
      *exit_code = Finish(std::string("ckpt ") + name, run(*o));
    });
    return sub;
  };
  add("inspect", "Print the step, model, saved layout and a table of tensors", RunInspect)
      ->add_flag("--job", o->job,
                 "Print the job file the run that saved it was started with, as recorded");
  add("verify", "Check every checksum, chunk and tensor", RunVerify)
      ->add_flag("--all", o->all,
                 "Every committed checkpoint under the root (those a resume may fall back to)");
  CLI::App* reshard =
      add("reshard", "Rewrite a checkpoint laid out for another parallel layout", RunReshard);
  reshard->add_option("--to", o->to, "Target layout, e.g. tp=2,pp=4,vpp=1,cp=1,dp=2,zero=3")
      ->required();
  reshard->add_option("out", o->out, "Output root (must not hold checkpoints)")
      ->required()
      ->check(NonEmptyPath());
  CLI::App* exp =
      add("export",
          "Write the consolidated model weights to safetensors (a file, or a Hugging Face "
          "model directory)",
          RunExport);
  CLI::Option* file =
      exp->add_option("--safetensors", o->safetensors, "Output file")->check(NonEmptyPath());
  exp->add_option("--hf-dir", o->hf_dir,
                  "Output directory for Hugging Face: model.safetensors (or shards and "
                  "model.safetensors.index.json) and config.json (GPT2LMHeadModel or "
                  "LlamaForCausalLM .from_pretrained)")
      ->check(NonEmptyPath())
      ->excludes(file);
  exp->add_option("--max-shard-size", o->max_shard_size,
                  "With --hf-dir: the largest shard, as save_pretrained's max_shard_size (bytes, "
                  "or 5GB, 200MiB, ...; default 5GB); larger weights are written as "
                  "model-0000i-of-0000n.safetensors shards with an index");
  exp->add_option("--tokenizer", o->tokenizer,
                  "With --hf-dir: byte: write the byte-level tokenizer Loom trains with "
                  "(tokenizer.json, tokenizer_config.json); none: no tokenizer; auto (default): "
                  "byte when the run read text or the vocabulary is 256 tokens");
  exp->add_option("--names", o->names,
                  "hf: Hugging Face names and layouts of the model's family, GPT-2 or Llama "
                  "(default); loom: Loom's");
  exp->add_option("--dtype", o->dtype,
                  "f32: the fp32 master weights, exact (default); bf16 or f16: rounded to "
                  "nearest-even, half the size");
  CLI::App* diff = cmd->add_subcommand(
      "diff",
      "Compare two checkpoints tensor by tensor, whatever their layouts (exit 0: the same, 1: "
      "they differ, 2: an error)");
  diff->add_option("a", o->dir, "A step directory or a checkpoint root (its newest)")
      ->required()
      ->check(NonEmptyPath());
  diff->add_option("b", o->out, "The other one")->required()->check(NonEmptyPath());
  CLI::Option* rtol =
      diff->add_option("--rtol", o->rtol,
                       "Relative tolerance: the same when |a-b| <= atol + rtol*|b| everywhere, B "
                       "the reference as in numpy's allclose (default: bit for bit)")
          ->check(NonNegativeNumber());
  CLI::Option* atol = diff->add_option("--atol", o->atol, "Absolute tolerance (see --rtol)")
                          ->check(NonNegativeNumber());
  diff->add_flag("--weights-only", o->weights_only,
                 "Compare the fp32 weights only, not the Adam moments (e.g. against an import)");
  diff->add_flag("--all", o->all, "List every tensor state, not only those that differ");
  diff->callback([o, exit_code, rtol, atol] {
    ConfigureThreads(1);
    bool same = false;
    const Status st = RunDiff(*o, rtol->count() > 0 || atol->count() > 0, &same);
    if (!st.ok()) {
      // 2, as diff(1) and cmp(1) report trouble (1 means the checkpoints differ).
      const int code = Finish("ckpt diff", st);
      *exit_code = code == 1 ? 2 : code;
      return;
    }
    *exit_code = same ? 0 : 1;
  });
  CLI::App* imp = cmd->add_subcommand(
      "import", "Make a checkpoint from GPT-2 or Llama weights in safetensors (to fine-tune from)");
  imp->add_option("file", o->dir,
                  "Safetensors file, or a Hugging Face model directory holding model.safetensors "
                  "or shards with model.safetensors.index.json (and config.json): Hugging Face "
                  "GPT-2 or Llama names (as the hub ships them, or as export writes them) or "
                  "Loom's")
      ->required();
  imp->add_option("out", o->out, "Output root (must not hold checkpoints)")
      ->required()
      ->check(NonEmptyPath());
  imp->add_option("--heads", o->heads,
                  "Attention heads (default: the file's n_head metadata, or config.json's n_head "
                  "or num_attention_heads; given, it must agree with them)")
      ->check(PositiveInteger());
  imp->callback([o, exit_code] {
    ConfigureThreads(1);
    *exit_code = Finish("ckpt import", RunImport(*o));
  });
}

}  // namespace loom
