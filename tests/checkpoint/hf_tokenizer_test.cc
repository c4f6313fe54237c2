// The Hugging Face tokenizer and generation files of an export (checkpoint/hf_tokenizer.h). Hugging
// Face's own library reads them in tests/reference/run_hf_tokenizer_check.sh; here, what that
// library relies on: the vocabulary is the 256 bytes, each once, in the byte-level alphabet.
#include "checkpoint/hf_tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

namespace loom {
namespace {

TEST(ByteTokenizer, EveryByteIsOneTokenOfItsOwnValue) {
  const nlohmann::json t = nlohmann::json::parse(ByteTokenizerJson());
  const nlohmann::json& vocab = t["model"]["vocab"];
  ASSERT_EQ(vocab.size(), 256u);
  std::set<int> ids;
  for (const auto& [symbol, id] : vocab.items()) ids.insert(id.get<int>());
  EXPECT_EQ(ids.size(), 256u);
  EXPECT_EQ(*ids.begin(), 0);
  EXPECT_EQ(*ids.rbegin(), 255);
  // Printable ASCII stands for itself; space (0x20) and newline are remapped (GPT-2's Ġ and Ċ).
  EXPECT_EQ(vocab["A"], 'A');
  EXPECT_EQ(vocab["~"], '~');
  EXPECT_EQ(vocab["\xC4\xA0"], ' ');   // U+0120
  EXPECT_EQ(vocab["\xC4\x8A"], '\n');  // U+010A
  EXPECT_EQ(vocab["\xC4\x80"], 0);     // U+0100
  EXPECT_EQ(vocab["\xC3\xBF"], 0xFF);  // U+00FF stands for itself
  EXPECT_TRUE(t["model"]["merges"].empty());
  EXPECT_EQ(t["pre_tokenizer"]["type"], "ByteLevel");
  EXPECT_EQ(t["pre_tokenizer"]["use_regex"], false);
  EXPECT_EQ(t["decoder"]["type"], "ByteLevel");
}

TEST(ByteTokenizer, ItsOwnJsonIsRecognisedAndOthersNamed) {
  std::string what;
  EXPECT_TRUE(IsByteTokenizerJson(ByteTokenizerJson(), &what));

  nlohmann::json t = nlohmann::json::parse(ByteTokenizerJson());
  std::swap(t["model"]["vocab"]["A"], t["model"]["vocab"]["B"]);  // ids no longer the bytes
  EXPECT_FALSE(IsByteTokenizerJson(t.dump(), &what));
  EXPECT_EQ(what, "a BPE model of 256 tokens whose ids are not the bytes' values (byte 65)");

  t = nlohmann::json::parse(ByteTokenizerJson());  // GPT-2's first merge and its token
  t["model"]["merges"].push_back("\xC4\xA0 t");
  t["model"]["vocab"]["\xC4\xA0t"] = 256;
  EXPECT_FALSE(IsByteTokenizerJson(t.dump(), &what));
  EXPECT_EQ(what, "a BPE model of 257 tokens, 1 merge");

  t = nlohmann::json::parse(ByteTokenizerJson());
  t["model"] = {{"type", "Unigram"}, {"vocab", nlohmann::json::array({{"a", -1.0}})}};
  EXPECT_FALSE(IsByteTokenizerJson(t.dump(), &what));
  EXPECT_EQ(what, "a Unigram model of 1 token");

  EXPECT_FALSE(IsByteTokenizerJson("{\"model\": ", &what));
  EXPECT_EQ(what, "not JSON");
}

TEST(ByteTokenizer, ConfigCapsAtTheModelsPositions) {
  const nlohmann::json c = nlohmann::json::parse(ByteTokenizerConfigJson(96));
  EXPECT_EQ(c["tokenizer_class"], "PreTrainedTokenizerFast");
  EXPECT_EQ(c["model_max_length"], 96);
  EXPECT_TRUE(c["eos_token"].is_null());
}

TEST(GenerationConfig, SamplesAsTheJobDid) {
  GenerationDefaults g;
  g.max_length = 128;
  nlohmann::json c = nlohmann::json::parse(GenerationConfigJson(g));
  EXPECT_EQ(c["max_length"], 128);
  EXPECT_FALSE(c.contains("do_sample"));  // no job: transformers' own defaults
  EXPECT_TRUE(c["eos_token_id"].is_null());

  g.temperature = 0.7;
  g.top_k = 13;
  c = nlohmann::json::parse(GenerationConfigJson(g));
  EXPECT_EQ(c["do_sample"], true);
  EXPECT_DOUBLE_EQ(c["temperature"].get<double>(), 0.7);
  EXPECT_EQ(c["top_k"], 13);

  g.temperature = 0;  // Loom's greedy decoding
  c = nlohmann::json::parse(GenerationConfigJson(g));
  EXPECT_EQ(c["do_sample"], false);
  EXPECT_FALSE(c.contains("temperature"));
  EXPECT_FALSE(c.contains("top_k"));
}

}  // namespace
}  // namespace loom
