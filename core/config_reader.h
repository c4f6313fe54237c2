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
#include <vector>

#include "core/status.h"

namespace loom {

class ConfigSection {
 public:
  ConfigSection(std::string file, YAML::Node node, std::string path);

  // Parses a whole file; the root must be a mapping.
  static Result<ConfigSection> LoadFile(const std::string& file);
  // Parses `text` as if it were the contents of `file` (errors name `file`).
  static Result<ConfigSection> LoadString(const std::string& text, const std::string& file);

  bool Has(const std::string& key) const;
  // Required fields fail when absent; optional ones keep *out unchanged. A field given without a
  // value (`key:`, `key: ~`, `key: null`) is an error either way, sections and lists included.
  Status Int(const std::string& key, int64_t* out, bool required, int64_t min, int64_t max);
  Status Double(const std::string& key, double* out, bool required, double min, double max);
  Status String(const std::string& key, std::string* out, bool required);
  Status Bool(const std::string& key, bool* out, bool required);
  // Nested mapping; absent optional sections give an empty mapping.
  Result<ConfigSection> Section(const std::string& key, bool required);
  // A list of mappings; item i is a section whose path is "key[i]" (errors inside it read
  // "file:line: field 'nodes[2].devices'"). Absent optional lists give no items.
  Result<std::vector<ConfigSection>> List(const std::string& key, bool required);
  // Lists of scalars, each element checked like the scalar readers (min/max inclusive).
  Status StringList(const std::string& key, std::vector<std::string>* out, bool required);
  Status DoubleList(const std::string& key, std::vector<double>* out, bool required, double min,
                    double max);
  // A list of lists of numbers (rows may differ in length; callers check the shape).
  Status DoubleMatrix(const std::string& key, std::vector<std::vector<double>>* out, bool required,
                      double min, double max);
  // Keys of this mapping in file order (for mappings keyed by user-chosen names).
  std::vector<std::string> Keys() const;
  // Error unless every key of the mapping has been read.
  Status Finish() const;

  const std::string& file() const { return file_; }
  // "job.yaml:7: field 'optimizer.lr'" for a key of this section.
  std::string Where(const std::string& key) const;

 private:
  // The node, or nullopt when absent and not required; an error when given without a value.
  Result<std::optional<YAML::Node>> Get(const std::string& key, bool required,
                                        const char* expected);
  Status Bad(const std::string& key, const YAML::Node& node, const std::string& expected) const;
  // The line (0-based) of `key` in this mapping, or -1.
  int KeyLine(const std::string& key) const;
  // Element `index` ("[2]" or "[2][3]") of list `key` as a number in [min, max]; errors name the
  // element's own line and "key[2]".
  Result<double> ListNumber(const std::string& key, const YAML::Node& e, const std::string& index,
                            double min, double max) const;

  std::string file_;
  YAML::Node node_;
  std::string path_;   // dotted path of this section ("" at the root)
  int key_line_ = -1;  // line of the key that holds this section (for fields missing from it)
  std::set<std::string> read_;
};

}  // namespace loom
