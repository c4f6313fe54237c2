// Hugging Face's shard layout: the plan save_pretrained makes, the file names, the index both ways
// and the size strings of --max-shard-size.
#include "checkpoint/hf_shards.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace loom {
namespace {

TEST(HfShards, PlanOpensAShardWhenTheNextTensorWouldNotFit) {
  // 40 + 50 = 90 fits in 100; 90 + 20 does not: a new shard.
  EXPECT_EQ(PlanShards({40, 50, 20, 30, 60}, 100), (std::vector<size_t>{0, 2, 4}));
  // Exactly the limit still fits.
  EXPECT_EQ(PlanShards({50, 50, 1}, 100), (std::vector<size_t>{0, 2}));
  // A tensor above the limit gets a shard of its own, and the next one starts another.
  EXPECT_EQ(PlanShards({10, 250, 10}, 100), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(PlanShards({250, 10}, 100), (std::vector<size_t>{0, 1}));
  // Everything fits: one shard (model.safetensors).
  EXPECT_EQ(PlanShards({1, 2, 3}, kDefaultMaxShardBytes), (std::vector<size_t>{0}));
  EXPECT_TRUE(PlanShards({}, 100).empty());
}

TEST(HfShards, FileNames) {
  EXPECT_EQ(ShardFileName(0, 3), "model-00001-of-00003.safetensors");
  EXPECT_EQ(ShardFileName(11, 12), "model-00012-of-00012.safetensors");
  for (const char* ours :
       {"model.safetensors", "model.safetensors.index.json", "model-00002-of-00003.safetensors"}) {
    EXPECT_TRUE(IsHfWeightsFileName(ours)) << ours;
  }
  for (const char* other :
       {"config.json", "model-2-of-3.safetensors", "model-00002-of-00003.safetensors.tmp.5",
        "xmodel.safetensors", "model-00002-of-00003.safetensorsx", "tokenizer.json"}) {
    EXPECT_FALSE(IsHfWeightsFileName(other)) << other;
  }
}

TEST(HfShards, IndexRoundTrip) {
  const std::map<std::string, std::string> map = {
      {"model.norm.weight", "model-00002-of-00002.safetensors"},
      {"model.embed_tokens.weight", "model-00001-of-00002.safetensors"}};
  const std::string text = ShardIndexJson(1234, map);
  // save_pretrained's layout: metadata.total_size, then weight_map with sorted keys.
  EXPECT_NE(text.find("\"metadata\": {\n    \"total_size\": 1234\n  },\n  \"weight_map\": {\n"
                      "    \"model.embed_tokens.weight\": \"model-00001-of-00002.safetensors\",\n"),
            std::string::npos)
      << text;
  Result<ShardIndex> back = ParseShardIndex(text, "idx.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->total_size, 1234u);
  EXPECT_EQ(back->weight_map, map);
}

TEST(HfShards, BadIndexesAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"[1]", "idx.json: not a JSON object"},
      {"{\"metadata\": {}}", "idx.json: field 'weight_map': expected an object"},
      {"{\"weight_map\": {}}", "idx.json: field 'weight_map': expected an object"},
      {"{\"weight_map\": {\"a\": 3}}",
       "idx.json: field 'weight_map': tensor 'a': expected the "
       "name of a file beside the index, got 3"},
      {"{\"weight_map\": {\"a\": \"../x.safetensors\"}}",
       "tensor 'a': expected the name of a file beside the index, got \"../x.safetensors\""},
      {"{\"metadata\": {\"total_size\": -1}, \"weight_map\": {\"a\": \"f\"}}",
       "idx.json: field 'metadata.total_size': expected a byte count, got -1"},
  };
  for (const auto& [text, want] : cases) {
    Result<ShardIndex> r = ParseShardIndex(text, "idx.json");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
}

TEST(HfShards, ByteSizes) {
  const std::pair<const char*, uint64_t> cases[] = {
      {"1000000", 1000000}, {"5GB", 5000000000}, {"5gb", 5000000000},  {"200MB", 200000000},
      {"100KB", 100000},    {"2MiB", 2097152},   {"1GiB", 1073741824}, {"1.5GB", 1500000000},
      {"64kib", 65536},     {"7B", 7},
  };
  for (const auto& [text, want] : cases) {
    Result<uint64_t> r = ParseByteSize(text, "--max-shard-size");
    ASSERT_TRUE(r.ok()) << text << ": " << r.status().ToString();
    EXPECT_EQ(*r, want) << text;
  }
  for (const char* bad : {"", "0", "-5MB", "5 MB", "MB", "5XB", "inf", "nan", "0.1B"}) {
    Result<uint64_t> r = ParseByteSize(bad, "--max-shard-size");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--max-shard-size: expected a size in bytes"),
              std::string::npos)
        << r.status().message();
  }
}

}  // namespace
}  // namespace loom
