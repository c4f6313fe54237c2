// Writes what the PyTorch reference test compares against (tests/reference/check_reference.py):
//   config.json, init.safetensors (initial weights), batch.safetensors (inputs, targets),
//   loom.safetensors (loss per step, step-1 gradients before clipping, parameters after the steps)
// The batch is global step 0 of the shipped corpus; every step trains on that same batch through
// the real Trainer (micro-batch accumulation, clipping, AdamW) at a constant learning rate.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "core/safetensors.h"
#include "core/threads.h"
#include "worker/data/sampler.h"
#include "worker/trainer.h"

namespace loom {
namespace {

std::vector<NamedTensor> Params(const ParamLayout& layout, const float* data,
                                const std::string& prefix) {
  std::vector<NamedTensor> out;
  for (const ParamInfo& p : layout.params) {
    out.push_back({prefix + p.name,
                   Tensor::Borrow(const_cast<float*>(data) + p.offset, p.shape, DType::kF32)});
  }
  return out;
}

Status Dump(JobConfig job, const std::string& dir) {
  LOOM_RETURN_IF_ERROR(MakeDirs(dir));
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::Create(job));
  const ParamLayout& layout = trainer->layout();
  std::vector<float> params(static_cast<size_t>(layout.total)), grads1(params.size());
  LOOM_RETURN_IF_ERROR(trainer->store().CopyParams(params.data()));
  LOOM_RETURN_IF_ERROR(
      WriteSafetensors(dir + "/init.safetensors", Params(layout, params.data(), "")));

  const int64_t n = job.data.global_batch * job.data.seq;
  auto inputs = *Tensor::Zeros({job.data.global_batch, job.data.seq}, DType::kI32, MemTag::kOther);
  auto targets = *Tensor::Zeros({job.data.global_batch, job.data.seq}, DType::kI32, MemTag::kOther);
  LOOM_ASSIGN_OR_RETURN(std::string text, ReadFile(job.data.text));
  std::vector<int32_t> corpus(text.begin(), text.end());
  for (int32_t& t : corpus) t &= 0xFF;
  WindowSampler sampler(&corpus, job.data.seq, job.data.global_batch, job.seed, kTrainStream);
  sampler.Fill(0, 0, job.data.global_batch, inputs.data<int32_t>(), targets.data<int32_t>());
  LOOM_RETURN_IF_ERROR(
      WriteSafetensors(dir + "/batch.safetensors", {{"inputs", inputs}, {"targets", targets}}));

  auto losses = *Tensor::Zeros({job.steps}, DType::kF32, MemTag::kOther);
  for (int64_t s = 0; s < job.steps; ++s) {
    LOOM_ASSIGN_OR_RETURN(
        double loss, trainer->ComputeGradients(inputs.data<int32_t>(), targets.data<int32_t>()));
    losses.data<float>()[s] = static_cast<float>(loss);
    if (s == 0) LOOM_RETURN_IF_ERROR(trainer->store().CopyGrads(grads1.data()));
    LOOM_ASSIGN_OR_RETURN(double norm, trainer->ApplyUpdate(job.optim.lr));
    std::printf("loom step %lld loss %.7f grad_norm %.6f\n", (long long)s + 1,
                losses.data<float>()[s], norm);
  }
  (void)n;
  std::vector<NamedTensor> out{{"loss", losses}};
  LOOM_RETURN_IF_ERROR(trainer->store().CopyParams(params.data()));
  for (auto& t : Params(layout, grads1.data(), "grad.")) out.push_back(t);
  for (auto& t : Params(layout, params.data(), "final.")) out.push_back(t);
  LOOM_RETURN_IF_ERROR(WriteSafetensors(dir + "/loom.safetensors", out));

  nlohmann::json cfg = {{"vocab", job.model.vocab},
                        {"max_seq", job.model.max_seq},
                        {"layers", job.model.layers},
                        {"heads", job.model.heads},
                        {"hidden", job.model.hidden},
                        {"batch", job.data.global_batch},
                        {"seq", job.data.seq},
                        {"steps", job.steps},
                        {"lr", job.optim.lr},
                        {"beta1", job.optim.beta1},
                        {"beta2", job.optim.beta2},
                        {"eps", job.optim.eps},
                        {"weight_decay", job.optim.weight_decay},
                        {"grad_clip", job.optim.grad_clip},
                        {"precision", PrecisionName(job.precision)},
                        {"family", ModelFamilyName(job.model.family)}};
  if (job.model.llama()) {
    cfg["kv_heads"] = job.model.kv();
    cfg["ffn_hidden"] = job.model.ffn();
    cfg["rope_theta"] = job.model.rope_theta;
    cfg["norm_eps"] = job.model.norm_eps;
    cfg["tie_embeddings"] = job.model.tie_embeddings;
    if (job.model.rope_scaling.on()) {
      const RopeScaling& r = job.model.rope_scaling;
      cfg["rope_scaling"] = {{"factor", r.factor},
                             {"low_freq_factor", r.low_freq_factor},
                             {"high_freq_factor", r.high_freq_factor},
                             {"original_max_seq", r.original_max_seq}};
    }
  }
  return WriteFileAtomic(dir + "/config.json", cfg.dump(2));
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) {
  CLI::App app{"Dump a Loom training run for the PyTorch reference test"};
  loom::JobConfig job;
  std::string out;
  job.data.text = LOOM_SOURCE_DIR "/data/tinyshakespeare.txt";
  job.data.val_fraction = 0.0;
  job.steps = 5;
  job.optim = {3e-4, 3e-4, 0.9, 0.95, 1e-8, 0.1, 1.0};
  app.add_option("--out", out)->required();
  app.add_option("--vocab", job.model.vocab);
  app.add_option("--max-seq", job.model.max_seq);
  app.add_option("--layers", job.model.layers);
  app.add_option("--heads", job.model.heads);
  app.add_option("--hidden", job.model.hidden);
  app.add_option("--batch", job.data.global_batch);
  app.add_option("--micro-batch", job.data.micro_batch);
  app.add_option("--seq", job.data.seq);
  app.add_option("--steps", job.steps);
  app.add_option("--lr", job.optim.lr);
  app.add_option("--grad-clip", job.optim.grad_clip);
  app.add_option("--attn-block-q", job.runtime.attn_block_q);
  app.add_option("--attn-block-k", job.runtime.attn_block_k);
  app.add_option("--vocab-chunk", job.runtime.vocab_chunk);
  app.add_option("--seed", job.seed);
  std::string family = "gpt2";
  app.add_option("--family", family, "gpt2 | llama")->check(CLI::IsMember({"gpt2", "llama"}));
  app.add_option("--kv-heads", job.model.kv_heads);
  app.add_option("--ffn-hidden", job.model.ffn_hidden);
  app.add_option("--rope-theta", job.model.rope_theta);
  app.add_option("--norm-eps", job.model.norm_eps);
  loom::RopeScaling& rs = job.model.rope_scaling;
  app.add_option("--rope-scaling-factor", rs.factor, "llama: Llama 3.1's rope scaling (0: none)");
  app.add_option("--rope-low-freq-factor", rs.low_freq_factor);
  app.add_option("--rope-high-freq-factor", rs.high_freq_factor);
  app.add_option("--rope-original-max-seq", rs.original_max_seq);
  bool untied = false;
  app.add_flag("--untied", untied, "llama: an lm_head of its own");
  std::string precision = "fp32";
  app.add_option("--precision", precision, "fp32 | bf16")->check(CLI::IsMember({"fp32", "bf16"}));
  CLI11_PARSE(app, argc, argv);
  if (job.data.micro_batch == 0) job.data.micro_batch = job.data.global_batch;
  job.model.family = *loom::ParseModelFamily(family);  // checked above
  job.model.tie_embeddings = !untied;
  job.precision = *loom::ParsePrecision(precision);  // checked above
  loom::ConfigureThreads(2);
  loom::Status st = loom::Dump(job, out);
  if (!st.ok()) {
    std::fprintf(stderr, "reference_dump: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
