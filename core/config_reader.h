// Typed, validated access to one mapping of a YAML file, with errors that name the file, the line,
// the dotted field path and what was expected:
//   job.yaml:7: field 'optimizer.lr': expected a number > 0, got 'fast'
// Unknown keys are errors too (a typo must not silently fall back to a default): call Finish()
// after reading every field of a section.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <set>
#include <string>

#include "core/status.h"

namespace loom {

class ConfigSection {
 public:
  ConfigSection(std::string file, YAML::Node node, std::string path);

  // Parses a whole file; the root must be a mapping.
  static Result<ConfigSection> LoadFile(const std::string& file);

  bool Has(const std::string& key) const;
  // Required fields fail when absent; optional ones keep *out unchanged.
  Status Int(const std::string& key, int64_t* out, bool required, int64_t min, int64_t max);
  Status Double(const std::string& key, double* out, bool required, double min, double max);
  Status String(const std::string& key, std::string* out, bool required);
  Status Bool(const std::string& key, bool* out, bool required);
  // Nested mapping; absent optional sections give an empty mapping.
  Result<ConfigSection> Section(const std::string& key, bool required);
  // Error unless every key of the mapping has been read.
  Status Finish() const;

  const std::string& file() const { return file_; }
  // "job.yaml:7: field 'optimizer.lr'" for a key of this section.
  std::string Where(const std::string& key) const;

 private:
  // The node, or nullopt when absent/null and not required.
  Result<std::optional<YAML::Node>> Get(const std::string& key, bool required,
                                        const char* expected);
  Status Bad(const std::string& key, const YAML::Node& node, const std::string& expected) const;

  std::string file_;
  YAML::Node node_;
  std::string path_;  // dotted path of this section ("" at the root)
  std::set<std::string> read_;
};

}  // namespace loom
