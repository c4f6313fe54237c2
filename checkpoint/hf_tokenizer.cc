// Hugging Face tokenizer and generation files for an export.
#include "checkpoint/hf_tokenizer.h"

#include <nlohmann/json.hpp>

namespace loom {
namespace {

// The byte-level pre-tokenizer's alphabet (as GPT-2's `bytes_to_unicode`): printable Latin-1
// bytes stand for themselves, the other 68 for the code points from U+0100 on, in byte order.
// tokenizer.json's vocabulary is written in these characters.
bool Printable(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
}

std::string ByteSymbol(int b) {
  int code = b;
  if (!Printable(b)) {
    code = 256;  // plus how many non-printable bytes come before b
    for (int x = 0; x < b; ++x) code += !Printable(x);
  }
  std::string utf8;  // code < 0x800: one or two bytes
  if (code < 0x80) {
    utf8 += static_cast<char>(code);
  } else {
    utf8 += static_cast<char>(0xC0 | (code >> 6));
    utf8 += static_cast<char>(0x80 | (code & 0x3F));
  }
  return utf8;
}

}  // namespace

std::string ByteTokenizerJson() {
  // No regex split and no prefix space: the text is one word of byte symbols, and with no merges
  // BPE leaves each symbol a token of its own.
  const nlohmann::ordered_json byte_level = {{"type", "ByteLevel"},
                                             {"add_prefix_space", false},
                                             {"trim_offsets", false},
                                             {"use_regex", false}};
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (int b = 0; b < kByteVocab; ++b) vocab[ByteSymbol(b)] = b;
  const nlohmann::ordered_json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", nlohmann::ordered_json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer", byte_level},
      {"post_processor", nullptr},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"vocab", vocab},
        {"merges", nlohmann::ordered_json::array()}}},
  };
  return tokenizer.dump(2) + "\n";
}

bool IsByteTokenizerJson(const std::string& text, std::string* what) {
  const nlohmann::json t = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (t.is_discarded() || !t.is_object()) {
    *what = "not JSON";
    return false;
  }
  const nlohmann::json model = t.value("model", nlohmann::json::object());
  const nlohmann::json vocab = model.value("vocab", nlohmann::json());
  const std::string type = model.value("type", std::string("no"));
  *what = "a " + type + " model";
  auto count = [](size_t n, const char* noun) {
    return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
  };
  if (vocab.is_object() || vocab.is_array()) *what += " of " + count(vocab.size(), "token");
  const nlohmann::json merges = model.value("merges", nlohmann::json::array());
  const nlohmann::json added = t.value("added_tokens", nlohmann::json::array());
  if (type != "BPE" || !vocab.is_object() || vocab.size() != kByteVocab || !merges.empty() ||
      !added.empty()) {
    if (!merges.empty()) *what += ", " + count(merges.size(), "merge");
    if (!added.empty()) *what += ", " + count(added.size(), "added token");
    return false;
  }
  for (int b = 0; b < kByteVocab; ++b) {
    const auto it = vocab.find(ByteSymbol(b));
    if (it == vocab.end() || !it->is_number_integer() || it->get<int64_t>() != b) {
      *what += " whose ids are not the bytes' values (byte " + std::to_string(b) + ")";
      return false;
    }
  }
  return true;
}

std::string ByteTokenizerConfigJson(int64_t max_seq) {
  const nlohmann::ordered_json config = {
      {"tokenizer_class", "PreTrainedTokenizerFast"},
      {"model_max_length", max_seq},
      {"clean_up_tokenization_spaces", false},
      {"bos_token", nullptr},
      {"eos_token", nullptr},
      {"unk_token", nullptr},
      {"pad_token", nullptr},
  };
  return config.dump(2) + "\n";
}

std::string GenerationConfigJson(const GenerationDefaults& g) {
  nlohmann::ordered_json config = {{"max_length", g.max_length}};
  if (g.temperature) {
    // Loom samples greedily at temperature 0; transformers wants do_sample false for that.
    const bool sample = *g.temperature > 0;
    config["do_sample"] = sample;
    if (sample) config["temperature"] = *g.temperature;
  }
  if (g.top_k && (!g.temperature || *g.temperature > 0)) config["top_k"] = *g.top_k;
  config["bos_token_id"] = nullptr;
  config["eos_token_id"] = nullptr;
  config["pad_token_id"] = nullptr;
  return config.dump(2) + "\n";
}

}  // namespace loom
