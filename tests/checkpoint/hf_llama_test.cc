// Hugging Face Llama names and config.json (checkpoint/hf_llama.h), and the export and import
// built on them: every Loom tensor is covered by its Hugging Face slices row for row; config.json
// and the safetensors metadata read back to the same model; what Loom does not compute is refused
// by name; weights go through an import, a sharded export and an import again unchanged, and a
// missing shard, a tied head that differs and weights without a config are named errors.
#include "checkpoint/hf_llama.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/export.h"
#include "checkpoint/format.h"
#include "checkpoint/hf_shards.h"
#include "checkpoint/import.h"
#include "core/file_util.h"
#include "core/safetensors.h"
#include "model/layout.h"
#include "tests/checkpoint/temp_dir_test.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

ModelConfig Llama(int64_t kv, bool tied) {
  ModelConfig m{.vocab = 19, .max_seq = 16, .layers = 2, .heads = 4, .hidden = 16};
  m.family = ModelFamily::kLlama;
  m.kv_heads = kv;
  m.ffn_hidden = 24;
  m.tie_embeddings = tied;
  return m;
}

TEST(HfLlamaNames, LayerZeroAsHuggingFaceNamesIt) {
  const std::vector<HfLlamaTensor> t = HuggingFaceLlamaTensors(Llama(2, false));
  ASSERT_EQ(t.size(), 1 + 9 * 2 + 2u);
  const std::vector<std::tuple<std::string, std::string, int64_t, Shape>> want = {
      {"model.embed_tokens.weight", "wte", 0, {19, 16}},
      {"model.layers.0.input_layernorm.weight", "h.0.ln_1.weight", 0, {16}},
      {"model.layers.0.self_attn.q_proj.weight", "h.0.attn.q.weight", 0, {16, 16}},
      {"model.layers.0.self_attn.k_proj.weight", "h.0.attn.kv.weight", 0, {8, 16}},
      {"model.layers.0.self_attn.v_proj.weight", "h.0.attn.kv.weight", 8, {8, 16}},
      {"model.layers.0.self_attn.o_proj.weight", "h.0.attn.c_proj.weight", 0, {16, 16}},
      {"model.layers.0.post_attention_layernorm.weight", "h.0.ln_2.weight", 0, {16}},
      {"model.layers.0.mlp.gate_proj.weight", "h.0.mlp.c_fc.weight", 0, {24, 16}},
      {"model.layers.0.mlp.up_proj.weight", "h.0.mlp.c_fc.weight", 24, {24, 16}},
      {"model.layers.0.mlp.down_proj.weight", "h.0.mlp.c_proj.weight", 0, {16, 24}},
  };
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& [name, loom, row0, shape] = want[i];
    EXPECT_EQ(t[i].name, name);
    EXPECT_EQ(t[i].loom, loom) << name;
    EXPECT_EQ(t[i].row0, row0) << name;
    EXPECT_EQ(t[i].shape, shape) << name;
  }
  EXPECT_EQ(t[t.size() - 2].name, "model.norm.weight");
  EXPECT_EQ(t.back().name, "lm_head.weight");
  EXPECT_EQ(t.back().loom, "lm_head.weight");
}

// Every Loom tensor is its slices, adjacent and in row order, with its columns; nothing else.
TEST(HfLlamaNames, SlicesCoverEveryLoomTensorExactly) {
  for (const ModelConfig& m : {Llama(2, false), Llama(1, true), Llama(4, false)}) {
    std::map<std::string, std::vector<const HfLlamaTensor*>> by_loom;
    const std::vector<HfLlamaTensor> tensors = HuggingFaceLlamaTensors(m);
    for (const HfLlamaTensor& t : tensors) by_loom[t.loom].push_back(&t);
    const ParamLayout layout = ModelLayout(m, 1);
    ASSERT_EQ(by_loom.size(), layout.params.size());
    for (const ParamInfo& p : layout.params) {
      ASSERT_TRUE(by_loom.count(p.name)) << p.name;
      int64_t row = 0;
      for (const HfLlamaTensor* t : by_loom[p.name]) {
        EXPECT_EQ(t->row0, row) << t->name;
        ASSERT_EQ(t->shape.size(), p.global_shape.size()) << t->name;
        if (t->shape.size() == 2) {
          EXPECT_EQ(t->shape[1], p.global_shape[1]) << t->name;
        }
        row += t->shape[0];
      }
      EXPECT_EQ(row, p.global_shape[0]) << p.name;
    }
    EXPECT_EQ(by_loom.count("lm_head.weight"), m.tie_embeddings ? 0u : 1u);
  }
}

TEST(HfLlamaConfig, RoundTrip) {
  ModelConfig m = Llama(1, true);
  m.rope_theta = 500000;
  m.norm_eps = 1e-6;
  const std::string text = HuggingFaceLlamaConfigJson(m, DType::kBF16);
  for (const char* key :
       {"\"architectures\": [\n    \"LlamaForCausalLM\"\n  ]", "\"model_type\": \"llama\"",
        "\"hidden_act\": \"silu\"", "\"torch_dtype\": \"bfloat16\"", "\"num_key_value_heads\": 1",
        "\"intermediate_size\": 24", "\"tie_word_embeddings\": true", "\"rms_norm_eps\": 1e-06",
        "\"rope_theta\": 500000.0", "\"max_position_embeddings\": 16"}) {
    EXPECT_NE(text.find(key), std::string::npos) << key << " in\n" << text;
  }
  EXPECT_TRUE(DescribesLlama(text));
  Result<ModelConfig> back = ParseHuggingFaceLlamaConfig(text, "config.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->llama());
  EXPECT_EQ(back->vocab, 19);
  EXPECT_EQ(back->max_seq, 16);
  EXPECT_EQ(back->layers, 2);
  EXPECT_EQ(back->heads, 4);
  EXPECT_EQ(back->hidden, 16);
  EXPECT_EQ(back->kv(), 1);
  EXPECT_EQ(back->ffn(), 24);
  EXPECT_EQ(back->rope_theta, 500000.0);
  EXPECT_EQ(back->norm_eps, 1e-6);
  EXPECT_TRUE(back->tie_embeddings);

  EXPECT_FALSE(DescribesLlama("{\"model_type\": \"gpt2\", \"n_head\": 4}"));
  EXPECT_TRUE(DescribesLlama("{\"architectures\": [\"LlamaForCausalLM\"]}"));
  EXPECT_FALSE(DescribesLlama("not json"));
}

TEST(HfLlamaConfig, AbsentFieldsTakeLlamaConfigsDefaults) {
  Result<ModelConfig> m = ParseHuggingFaceLlamaConfig(
      R"({"model_type": "llama", "vocab_size": 32000, "hidden_size": 64, "intermediate_size": 172,
          "num_hidden_layers": 3, "num_attention_heads": 8})",
      "config.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->kv(), 8);
  EXPECT_EQ(m->max_seq, 2048);
  EXPECT_EQ(m->rope_theta, 10000.0);
  EXPECT_EQ(m->norm_eps, 1e-6);
  EXPECT_FALSE(m->tie_embeddings);
}

TEST(HfLlamaConfig, WhatLoomDoesNotComputeIsNamed) {
  const std::string base =
      R"("model_type": "llama", "vocab_size": 19, "hidden_size": 16, "intermediate_size": 24,
         "num_hidden_layers": 2)";
  const std::pair<std::string, std::string> cases[] = {
      {R"({"model_type": "llama", "vocab_size": 19})",
       "dir/config.json: field 'hidden_size': missing"},
      {"{" + base + "}", "field 'num_attention_heads': missing"},
      {"{" + base + R"(, "num_attention_heads": "4"})",
       "field 'num_attention_heads': expected a positive integer, got \"4\""},
      {"{" + base + R"(, "num_attention_heads": 3})",
       "field 'hidden_size': 16 is not a multiple of num_attention_heads (3)"},
      {"{" + base + R"(, "num_attention_heads": 4, "num_key_value_heads": 3})",
       "field 'num_key_value_heads': expected a divisor of num_attention_heads (4), got 3"},
      {"{" + base + R"(, "num_attention_heads": 4, "hidden_act": "gelu"})",
       "field 'hidden_act': expected \"silu\""},
      {"{" + base + R"(, "num_attention_heads": 4, "rope_scaling": {"rope_type": "yarn"}})",
       "field 'rope_scaling.rope_type': expected \"llama3\" (Llama 3.1's frequency scaling; Loom "
       "implements no other), got \"yarn\""},
      {"{" + base + R"(, "num_attention_heads": 4, "rope_scaling": {"type": "linear"}})",
       "field 'rope_scaling.type': expected \"llama3\""},
      {"{" + base + R"(, "num_attention_heads": 4, "rope_scaling": {"rope_type": "llama3"}})",
       "field 'rope_scaling.factor': missing"},
      {"{" + base +
           R"(, "num_attention_heads": 4, "rope_scaling": {"rope_type": "llama3", "factor": 8,
                "beta_fast": 32}})",
       "field 'rope_scaling.beta_fast': not a field of llama3 scaling"},
      {"{" + base +
           R"(, "num_attention_heads": 4, "rope_scaling": {"rope_type": "llama3", "factor": 0.5}})",
       "rope_scaling.factor: expected at least 1, got 0.5"},
      {"{" + base + R"(, "num_attention_heads": 4, "rope_scaling": 8})",
       "field 'rope_scaling': expected null or an object, got 8"},
      {"{" + base + R"(, "num_attention_heads": 4, "attention_bias": true})",
       "field 'attention_bias': expected false"},
      {"{" + base + R"(, "num_attention_heads": 4, "head_dim": 8})",
       "field 'head_dim': expected 4 (hidden_size / num_attention_heads"},
      {"{" + base + R"(, "num_attention_heads": 4, "rms_norm_eps": 0})",
       "field 'rms_norm_eps': expected a positive number, got 0"},
      {"{" + base + R"(, "num_attention_heads": 4, "tie_word_embeddings": 1})",
       "field 'tie_word_embeddings': expected true or false, got 1"},
      {R"({"model_type": "mistral"})", "field 'model_type': expected \"llama\", got \"mistral\""},
      {"[1]", "dir/config.json: not a JSON object"},
      {"{", "dir/config.json: not valid JSON"},
  };
  for (const auto& [text, want] : cases) {
    Result<ModelConfig> r = ParseHuggingFaceLlamaConfig(text, "dir/config.json");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(want), std::string::npos)
        << "expected '" << want << "' in: " << r.status().message();
  }
}

TEST(HfLlamaConfig, MetadataRoundTrip) {
  ModelConfig m = Llama(2, false);
  m.norm_eps = 1e-5;
  const std::map<std::string, std::string> md = HuggingFaceLlamaMetadata(m);
  EXPECT_EQ(md.at("model_type"), "llama");
  EXPECT_EQ(md.at("num_key_value_heads"), "2");
  EXPECT_EQ(md.at("tie_word_embeddings"), "false");
  Result<ModelConfig> back = LlamaConfigFromMetadata(md, "f.safetensors");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->kv(), 2);
  EXPECT_EQ(back->ffn(), 24);
  EXPECT_EQ(back->norm_eps, 1e-5);
  EXPECT_FALSE(back->tie_embeddings);
  EXPECT_EQ(LlamaConfigFromMetadata({{"format", "pt"}}, "f").status().code(),
            StatusCode::kNotFound);
  std::map<std::string, std::string> bad = md;
  bad["num_attention_heads"] = "four";
  Result<ModelConfig> r = LlamaConfigFromMetadata(bad, "f.safetensors");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("f.safetensors metadata: field 'num_attention_heads': "
                                      "expected a positive integer, got \"four\""),
            std::string::npos)
      << r.status().message();
}

TEST(HfLlamaConfig, Llama31RopeScalingBothWays) {
  // Meta-Llama-3.1-8B's config.json fragment.
  Result<ModelConfig> m = ParseHuggingFaceLlamaConfig(
      R"({"model_type": "llama", "vocab_size": 128256, "hidden_size": 4096,
          "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
          "num_key_value_heads": 8, "max_position_embeddings": 131072, "rope_theta": 500000.0,
          "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 8192, "rope_type": "llama3"}})",
      "config.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->rope_scaling, (RopeScaling{8, 1, 4, 8192}));
  // Written back as Hugging Face writes it, and read back the same, from config.json and from a
  // safetensors file's metadata.
  const std::string json = HuggingFaceLlamaConfigJson(*m, DType::kBF16);
  EXPECT_NE(json.find(R"("rope_type": "llama3")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("original_max_position_embeddings": 8192)"), std::string::npos) << json;
  Result<ModelConfig> again = ParseHuggingFaceLlamaConfig(json, "config.json");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->rope_scaling, m->rope_scaling);
  Result<ModelConfig> meta =
      LlamaConfigFromMetadata(HuggingFaceLlamaMetadata(*m), "model.safetensors");
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  EXPECT_EQ(meta->rope_scaling, m->rope_scaling);
  // Without scaling: null, both ways.
  ModelConfig plain = *m;
  plain.rope_scaling = {};
  EXPECT_NE(HuggingFaceLlamaConfigJson(plain, DType::kBF16).find(R"("rope_scaling": null)"),
            std::string::npos);
  EXPECT_FALSE(LlamaConfigFromMetadata(HuggingFaceLlamaMetadata(plain), "m")->rope_scaling.on());
}

// Weights under Hugging Face names, distinct everywhere, written as files of a test directory.
class HfLlamaFiles : public TempDirTest {
 protected:
  HfLlamaFiles() : model_(Llama(2, false)) {
    for (const HfLlamaTensor& t : HuggingFaceLlamaTensors(model_)) {
      std::vector<float>& v = values_[t.name];
      v.resize(static_cast<size_t>(NumElements(t.shape)));
      for (size_t i = 0; i < v.size(); ++i) {
        v[i] = static_cast<float>(values_.size()) + 1e-3f * static_cast<float>(i);
      }
    }
  }
  // One file of `names` (all by default) with `metadata`.
  void Write(const std::string& file, const std::map<std::string, std::string>& metadata,
             std::vector<std::string> names = {}) {
    if (names.empty()) {
      for (const HfLlamaTensor& t : HuggingFaceLlamaTensors(model_)) names.push_back(t.name);
    }
    std::vector<NamedTensor> tensors;
    for (const std::string& n : names) {
      Shape shape;
      for (const HfLlamaTensor& t : HuggingFaceLlamaTensors(model_)) {
        if (t.name == n) shape = t.shape;
      }
      if (n == "lm_head.weight" && shape.empty()) shape = {model_.vocab, model_.hidden};
      tensors.push_back({n, Tensor::Borrow(values_.at(n).data(), shape, DType::kF32)});
    }
    const Status st = WriteSafetensors(file, tensors, metadata);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  // Loom's tensor `loom` as an export with Loom's names holds it.
  std::vector<float> LoomTensor(const std::string& root, const std::string& loom) {
    const std::string file = Path("loom_" + PathName(root) + ".safetensors");
    if (!fs::exists(file)) {
      Result<ExportResult> r = ExportSafetensors(root, file, ExportNames::kLoom);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
    }
    Result<SafetensorsFile> f = ReadSafetensors(file);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    const Tensor& t = f->tensors.at(loom);
    return {t.data<float>(), t.data<float>() + t.numel()};
  }

  ModelConfig model_;
  std::map<std::string, std::vector<float>> values_;
};

TEST_F(HfLlamaFiles, ImportShardedExportImportKeepsEveryWeight) {
  Write(Path("one.safetensors"), HuggingFaceLlamaMetadata(model_));
  Result<ImportResult> a = ImportSafetensors(Path("one.safetensors"), Path("a"), 0);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->model.llama());
  EXPECT_EQ(a->tensors, 1 + 9 * 2 + 2);
  // k|v and gate|up are concatenated by rows.
  std::vector<float> kv = values_["model.layers.1.self_attn.k_proj.weight"];
  const std::vector<float>& v = values_["model.layers.1.self_attn.v_proj.weight"];
  kv.insert(kv.end(), v.begin(), v.end());
  EXPECT_EQ(LoomTensor(Path("a"), "h.1.attn.kv.weight"), kv);
  std::vector<float> fc = values_["model.layers.0.mlp.gate_proj.weight"];
  const std::vector<float>& up = values_["model.layers.0.mlp.up_proj.weight"];
  fc.insert(fc.end(), up.begin(), up.end());
  EXPECT_EQ(LoomTensor(Path("a"), "h.0.mlp.c_fc.weight"), fc);

  // Sharded at 4 KiB: every file at most that (no tensor here is larger), an index of them all.
  Result<ExportResult> e = ExportHuggingFaceDir(Path("a"), Path("hf"), DType::kF32, 4096);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_GE(e->files.size(), 3u);
  EXPECT_EQ(e->files[0], ShardFileName(0, e->files.size()));
  EXPECT_FALSE(fs::exists(Path("hf/model.safetensors")));
  ASSERT_TRUE(fs::exists(Path("hf/model.safetensors.index.json")));
  ASSERT_TRUE(fs::exists(Path("hf/config.json")));
  for (const std::string& f : e->files) {
    Result<SafetensorsHeader> h = ReadSafetensorsHeader(Path("hf/" + f));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    uint64_t bytes = 0;
    for (const auto& [name, entry] : h->tensors) bytes += entry.bytes;
    EXPECT_LE(bytes, 4096u) << f;
    EXPECT_EQ(h->metadata.at("format"), "pt");
  }
  Result<ImportResult> b = ImportSafetensors(Path("hf"), Path("b"), 4);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  for (const ParamInfo& p : ModelLayout(model_, 1).params) {
    EXPECT_EQ(LoomTensor(Path("b"), p.name), LoomTensor(Path("a"), p.name)) << p.name;
  }
  // Exported again without a limit: one model.safetensors, and the shards and index are gone
  // (from_pretrained would read model.safetensors and ignore them, or the other way round).
  e = ExportHuggingFaceDir(Path("a"), Path("hf"), DType::kF32);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  std::vector<std::string> left;
  for (const auto& f : fs::directory_iterator(Path("hf"))) {
    left.push_back(f.path().filename().string());
  }
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"config.json", "generation_config.json",
                                            "model.safetensors"}));
}

TEST_F(HfLlamaFiles, BadInputsAreNamedAndLeaveNothing) {
  Write(Path("one.safetensors"), HuggingFaceLlamaMetadata(model_));
  ASSERT_TRUE(ImportSafetensors(Path("one.safetensors"), Path("a"), 0).ok());
  ASSERT_TRUE(ExportHuggingFaceDir(Path("a"), Path("hf"), DType::kF32, 4096).ok());
  auto expect_error = [&](const std::string& input, const std::string& want, int64_t heads = 0) {
    const std::string out = Path("out");
    Result<ImportResult> r = ImportSafetensors(input, out, heads);
    ASSERT_FALSE(r.ok()) << input;
    EXPECT_NE(r.status().message().find(want), std::string::npos)
        << "expected '" << want << "' in: " << r.status().message();
    EXPECT_FALSE(fs::exists(Path("out/step_00000000")));
    fs::remove_all(out);
  };
  expect_error(Path("hf"),
               Path("hf/config.json") + ": --heads 2 contradicts field 'num_attention_heads' 4", 2);
  // No config: neither config.json beside the file nor Loom's metadata.
  fs::create_directories(Path("bare"));
  Write(Path("bare/w.safetensors"), {{"format", "pt"}});
  expect_error(Path("bare/w.safetensors"),
               Path("bare/w.safetensors") +
                   ": Llama weights without a config: expected a "
                   "config.json (model_type \"llama\") beside the file");
  // ... but with one beside it, the same file imports.
  const std::string config = HuggingFaceLlamaConfigJson(model_, DType::kF32);
  ASSERT_TRUE(WriteFileAtomic(Path("bare/config.json"), config).ok());
  EXPECT_TRUE(ImportSafetensors(Path("bare/w.safetensors"), Path("bare_ok"), 0).ok());
  // A tied config with an lm_head that differs from the embedding.
  fs::create_directories(Path("tied"));
  ModelConfig tied = model_;
  tied.tie_embeddings = true;
  ASSERT_TRUE(
      WriteFileAtomic(Path("tied/config.json"), HuggingFaceLlamaConfigJson(tied, DType::kF32))
          .ok());
  Write(Path("tied/model.safetensors"), {{"format", "pt"}});
  expect_error(Path("tied"), Path("tied/model.safetensors") +
                                 ": tensor 'lm_head.weight' differs from "
                                 "'model.embed_tokens.weight': the config ties the head");
  // An untied config without lm_head.
  std::vector<std::string> names;
  for (const HfLlamaTensor& t : HuggingFaceLlamaTensors(model_)) {
    if (t.name != "lm_head.weight") names.push_back(t.name);
  }
  Write(Path("bare/w.safetensors"), {{"format", "pt"}}, names);
  expect_error(Path("bare/w.safetensors"), Path("bare/w.safetensors") +
                                               ": tensor 'lm_head.weight' [19, 16] is missing (a "
                                               "Llama of 2 layers with a head of its own");
  // The index names a shard that is not there.
  std::string shard;
  for (const auto& f : fs::directory_iterator(Path("hf"))) {
    const std::string n = f.path().filename().string();
    if (n.rfind("model-00002-of-", 0) == 0) shard = n;
  }
  ASSERT_FALSE(shard.empty());
  fs::rename(Path("hf/" + shard), Path("moved.safetensors"));
  expect_error(Path("hf"),
               Path("hf/model.safetensors.index.json") + ": field 'weight_map': tensor '");
  expect_error(Path("hf"), "is in '" + shard + "', which does not exist");
  // A shard that does not hold what the index places in it (another shard under its name).
  fs::copy_file(Path("hf/model-00001-of-") + shard.substr(15), Path("hf/" + shard));
  expect_error(Path("hf"), Path("hf/" + shard) + ": tensor '");
}

}  // namespace
}  // namespace loom
