// The files beside an exported model that make a Hugging Face directory usable for generation:
// the tokenizer Loom trained with (its byte-level one: token = byte of the UTF-8 text,
// worker/data/token_file.h) as `tokenizer.json` for the `tokenizers` library and
// PreTrainedTokenizerFast, and `generation_config.json` with the job's sampling defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace loom {

// Tokens in the byte-level vocabulary: ids 0-255, one per byte value.
constexpr int64_t kByteVocab = 256;

// The files' names in a Hugging Face model directory.
inline constexpr char kHfTokenizerFile[] = "tokenizer.json";
inline constexpr char kHfTokenizerConfigFile[] = "tokenizer_config.json";
inline constexpr char kHfGenerationConfigFile[] = "generation_config.json";

// tokenizer.json (the `tokenizers` library's format): a byte-level BPE without merges, so that
// every byte of the text is one token whose id is the byte's value, the ids Loom's own byte
// tokenizer gives; decoding joins the bytes back into the text. No special tokens.
std::string ByteTokenizerJson();

// tokenizer_config.json for AutoTokenizer: PreTrainedTokenizerFast over tokenizer.json, at most
// `max_seq` tokens (the model's positions), no special tokens, text decoded as it was.
std::string ByteTokenizerConfigJson(int64_t max_seq);

// Whether tokenizer.json text is the byte-level tokenizer above (a BPE of the 256 byte symbols,
// each the id of its byte, no merges and no added tokens): the tokens `data.text` gives. Else
// false with `what` saying what it is instead ("a BPE of 50257 tokens", "not JSON", ...).
bool IsByteTokenizerJson(const std::string& text, std::string* what);

// What `generate` does by default: at most `max_length` tokens (the model's positions, not
// transformers' 20) and, where the run's job said how it sampled (`sample:`), the same.
struct GenerationDefaults {
  int64_t max_length = 0;
  std::optional<double> temperature;  // sample.temperature; 0: greedy
  std::optional<int64_t> top_k;       // sample.top_k; 0: every token
};

// generation_config.json (GenerationConfig's keys): no BOS, EOS or padding token, since the byte
// vocabulary has none.
std::string GenerationConfigJson(const GenerationDefaults& g);

}  // namespace loom
