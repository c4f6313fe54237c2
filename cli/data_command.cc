// `loom data prepare`: text -> byte-level token files (train.bin, val.bin).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"
#include "core/file_util.h"
#include "worker/data/token_file.h"

namespace loom {
namespace {

struct PrepareOptions {
  std::string input;
  std::string output_dir;
  double val_fraction = 0.1;
};

Status RunPrepare(const PrepareOptions& opt) {
  LOOM_ASSIGN_OR_RETURN(std::string text, ReadFile(opt.input));
  if (text.empty()) return InvalidArgument("input '" + opt.input + "' is empty");
  std::vector<uint32_t> tokens = EncodeBytes(text);
  const size_t val_n = static_cast<size_t>(static_cast<double>(tokens.size()) * opt.val_fraction);
  std::vector<uint32_t> train(tokens.begin(), tokens.end() - static_cast<std::ptrdiff_t>(val_n));
  std::vector<uint32_t> val(tokens.end() - static_cast<std::ptrdiff_t>(val_n), tokens.end());
  LOOM_RETURN_IF_ERROR(MakeDirs(opt.output_dir));
  const std::string train_path = opt.output_dir + "/train.bin";
  const std::string val_path = opt.output_dir + "/val.bin";
  LOOM_RETURN_IF_ERROR(WriteTokenFile(train_path, train));
  LOOM_RETURN_IF_ERROR(WriteTokenFile(val_path, val));
  std::printf("wrote %s (%zu tokens) and %s (%zu tokens), byte-level vocabulary 256\n",
              train_path.c_str(), train.size(), val_path.c_str(), val.size());
  return Status::Ok();
}

}  // namespace

void AddDataCommand(CLI::App& app, int* exit_code) {
  CLI::App* data = app.add_subcommand("data", "Prepare training data");
  data->require_subcommand(1);
  auto opt = std::make_shared<PrepareOptions>();
  CLI::App* prep = data->add_subcommand("prepare", "Tokenise a text file (byte level, vocab 256)");
  prep->add_option("-i,--input", opt->input, "UTF-8 text file")->required();
  prep->add_option("-o,--output-dir", opt->output_dir, "Directory for train.bin and val.bin")
      ->required();
  prep->add_option("--val-fraction", opt->val_fraction, "Fraction kept for validation")
      ->check(CLI::Range(0.0, 0.5));
  prep->callback([opt, exit_code] {
    Status st = RunPrepare(*opt);
    *exit_code = st.ok() ? 0 : ReportError("data prepare", st);
  });
}

}  // namespace loom
