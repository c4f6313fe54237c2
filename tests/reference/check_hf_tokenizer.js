// Reads an exported Hugging Face directory's tokenizer with Hugging Face's own `tokenizers`
// library (its Node binding, the same Rust code as Python's `tokenizers` and transformers'
// fast tokenizers) and checks it against Loom's byte tokens of the same text.
// Usage: node check_hf_tokenizer.js HF_DIR TEXT_FILE TOKENS.json
// TOKENS.json: {"tokens": [...], "temperature": T, "top_k": K} (Loom's tokens of TEXT_FILE and
// the job's sampling settings).
"use strict";
const fs = require("fs");
const path = require("path");
const { Tokenizer } = require("tokenizers");

function fail(msg) {
  console.error("FAIL: " + msg);
  process.exit(1);
}

(async () => {
  const [dir, textFile, tokensFile] = process.argv.slice(2);
  const text = fs.readFileSync(textFile, "utf8");
  const want = JSON.parse(fs.readFileSync(tokensFile, "utf8"));
  const config = JSON.parse(fs.readFileSync(path.join(dir, "config.json"), "utf8"));
  const tokConfig = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
  const gen = JSON.parse(fs.readFileSync(path.join(dir, "generation_config.json"), "utf8"));

  const tok = Tokenizer.fromFile(path.join(dir, "tokenizer.json"));
  if (tok.getVocabSize() !== 256) fail(`vocabulary of ${tok.getVocabSize()} tokens, expected 256`);
  if (config.vocab_size < 256) fail(`config.json vocab_size ${config.vocab_size} < 256`);
  const enc = await tok.encode(text);
  const ids = enc.getIds();
  if (ids.length !== want.tokens.length) {
    fail(`${ids.length} tokens from tokenizers, ${want.tokens.length} from loom data prepare`);
  }
  for (let i = 0; i < ids.length; ++i) {
    if (ids[i] !== want.tokens[i]) fail(`token ${i}: tokenizers ${ids[i]}, Loom ${want.tokens[i]}`);
  }
  const back = await tok.decode(ids, false);
  if (back !== text) fail("decode(encode(text)) is not the text");
  // Every single byte decodes to itself where it is a whole UTF-8 character.
  for (let b = 0; b < 128; ++b) {
    const s = await tok.decode([b], false);
    if (s !== String.fromCharCode(b)) fail(`id ${b} decodes to ${JSON.stringify(s)}`);
  }

  if (tokConfig.tokenizer_class !== "PreTrainedTokenizerFast") {
    fail(`tokenizer_class ${tokConfig.tokenizer_class}`);
  }
  const positions = config.n_positions ?? config.max_position_embeddings;
  if (tokConfig.model_max_length !== positions) {
    fail(`model_max_length ${tokConfig.model_max_length}, the model has ${positions} positions`);
  }
  if (gen.max_length !== positions) fail(`generation max_length ${gen.max_length} != ${positions}`);
  if (gen.do_sample !== true || gen.temperature !== want.temperature || gen.top_k !== want.top_k) {
    fail(`generation_config ${JSON.stringify(gen)} is not the job's sampling ` +
         `(temperature ${want.temperature}, top_k ${want.top_k})`);
  }
  console.log(`tokenizers ${require("tokenizers/package.json").version}: ${ids.length} tokens of ` +
              `${textFile} equal Loom's, decoded back to the text; configs agree`);
})().catch((e) => fail(String(e)));
