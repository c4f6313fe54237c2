// YAML field reader. yaml-cpp reports problems with exceptions; they stop here.
#include "core/config_reader.h"

#include <cmath>
#include <map>

namespace loom {

ConfigSection::ConfigSection(std::string file, YAML::Node node, std::string path)
    : file_(std::move(file)), node_(std::move(node)), path_(std::move(path)) {}

Result<ConfigSection> ConfigSection::LoadFile(const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(file);
  } catch (const YAML::BadFile&) {
    return NotFound(file + ": cannot open the file");
  } catch (const YAML::ParserException& e) {
    return InvalidArgument(file + ":" + std::to_string(e.mark.line + 1) +
                           ": YAML syntax error: " + e.msg);
  }
  if (!root.IsMap()) return InvalidArgument(file + ": expected a YAML mapping at the top level");
  return ConfigSection(file, root, "");
}

Result<ConfigSection> ConfigSection::LoadString(const std::string& text, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    return InvalidArgument(file + ":" + std::to_string(e.mark.line + 1) +
                           ": YAML syntax error: " + e.msg);
  }
  if (!root.IsMap()) return InvalidArgument(file + ": expected a YAML mapping at the top level");
  return ConfigSection(file, root, "");
}

int ConfigSection::KeyLine(const std::string& key) const {
  if (!node_.IsMap()) return -1;
  for (const auto& kv : node_) {
    if (kv.first.IsScalar() && kv.first.Scalar() == key) return kv.first.Mark().line;
  }
  return -1;
}

std::string ConfigSection::Where(const std::string& key) const {
  std::string where = file_;
  // The key's own line (a value's mark is the line of its first child when it is a block, and
  // past the key when it is empty); for an absent key, the line of this section's key.
  int line = KeyLine(key);
  if (line < 0) line = key_line_ >= 0 ? key_line_ : node_.Mark().line;
  if (line >= 0) where += ":" + std::to_string(line + 1);
  return where + ": field '" + (path_.empty() ? key : path_ + "." + key) + "'";
}

Status ConfigSection::Bad(const std::string& key, const YAML::Node& node,
                          const std::string& expected) const {
  std::string got = node.IsScalar()     ? "'" + node.Scalar() + "'"
                    : node.IsMap()      ? "a mapping"
                    : node.IsSequence() ? "a list"
                                        : "nothing";
  return InvalidArgument(Where(key) + ": expected " + expected + ", got " + got);
}

bool ConfigSection::Has(const std::string& key) const {
  return node_[key].IsDefined();
}

Result<std::optional<YAML::Node>> ConfigSection::Get(const std::string& key, bool required,
                                                     const char* expected) {
  read_.insert(key);
  YAML::Node n = node_[key];
  if (!n.IsDefined()) {
    if (required) return InvalidArgument(Where(key) + ": missing; expected " + expected);
    return std::optional<YAML::Node>();
  }
  // `key:` with nothing after it (or ~, null) is a value left out, not a request for the
  // default: taking the default would, for instance, train fp32 after `precision:`.
  if (n.IsNull()) {
    return InvalidArgument(Where(key) + ": no value; expected " + expected +
                           (required ? "" : " (or leave the field out for its default)"));
  }
  return std::optional<YAML::Node>(n);
}

Status ConfigSection::Int(const std::string& key, int64_t* out, bool required, int64_t min,
                          int64_t max) {
  std::string expected = "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  LOOM_ASSIGN_OR_RETURN(std::optional<YAML::Node> opt, Get(key, required, expected.c_str()));
  if (!opt) return Status::Ok();
  const YAML::Node& n = *opt;
  int64_t v = 0;
  if (!n.IsScalar() || !YAML::convert<int64_t>::decode(n, v) || v < min || v > max) {
    return Bad(key, n, expected);
  }
  *out = v;
  return Status::Ok();
}

Status ConfigSection::Double(const std::string& key, double* out, bool required, double min,
                             double max) {
  std::string expected = "a number in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  LOOM_ASSIGN_OR_RETURN(std::optional<YAML::Node> opt, Get(key, required, expected.c_str()));
  if (!opt) return Status::Ok();
  const YAML::Node& n = *opt;
  double v = 0;
  if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !std::isfinite(v) || v < min ||
      v > max) {
    return Bad(key, n, expected);
  }
  *out = v;
  return Status::Ok();
}

Status ConfigSection::String(const std::string& key, std::string* out, bool required) {
  LOOM_ASSIGN_OR_RETURN(std::optional<YAML::Node> opt, Get(key, required, "a string"));
  if (!opt) return Status::Ok();
  const YAML::Node& n = *opt;
  if (!n.IsScalar()) return Bad(key, n, "a string");
  *out = n.Scalar();
  return Status::Ok();
}

Status ConfigSection::Bool(const std::string& key, bool* out, bool required) {
  LOOM_ASSIGN_OR_RETURN(std::optional<YAML::Node> opt, Get(key, required, "true or false"));
  if (!opt) return Status::Ok();
  const YAML::Node& n = *opt;
  bool v = false;
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) return Bad(key, n, "true or false");
  *out = v;
  return Status::Ok();
}

Result<ConfigSection> ConfigSection::Section(const std::string& key, bool required) {
  LOOM_ASSIGN_OR_RETURN(std::optional<YAML::Node> opt, Get(key, required, "a mapping"));
  std::string path = path_.empty() ? key : path_ + "." + key;
  if (!opt) return ConfigSection(file_, YAML::Node(YAML::NodeType::Map), path);
  const YAML::Node& n = *opt;
  if (!n.IsMap()) return Bad(key, n, "a mapping");
  ConfigSection section(file_, n, path);
  section.key_line_ = KeyLine(key);
  return section;
}

Result<std::vector<ConfigSection>> ConfigSection::List(const std::string& key, bool required) {
  LOOM_ASSIGN_OR_RETURN(std::optional<YAML::Node> opt, Get(key, required, "a list of mappings"));
  std::vector<ConfigSection> items;
  if (!opt) return items;
  const YAML::Node& n = *opt;
  if (!n.IsSequence()) return Bad(key, n, "a list of mappings");
  std::string path = path_.empty() ? key : path_ + "." + key;
  for (size_t i = 0; i < n.size(); ++i) {
    std::string item = path + "[" + std::to_string(i) + "]";
    if (!n[i].IsMap()) {
      int line = n[i].Mark().line;
      return InvalidArgument(file_ + (line >= 0 ? ":" + std::to_string(line + 1) : "") +
                             ": field '" + item + "': expected a mapping");
    }
    items.emplace_back(file_, n[i], item);
  }
  return items;
}

Result<double> ConfigSection::ListNumber(const std::string& key, const YAML::Node& e,
                                         const std::string& index, double min, double max) const {
  double v = 0;
  if (e.IsScalar() && YAML::convert<double>::decode(e, v) && std::isfinite(v) && v >= min &&
      v <= max) {
    return v;
  }
  int line = e.Mark().line >= 0 ? e.Mark().line : node_[key].Mark().line;
  std::string where = file_ + (line >= 0 ? ":" + std::to_string(line + 1) : "");
  std::string field = (path_.empty() ? key : path_ + "." + key) + index;
  return InvalidArgument(where + ": field '" + field + "': expected a number in [" +
                         std::to_string(min) + ", " + std::to_string(max) + "], got " +
                         (e.IsScalar() ? "'" + e.Scalar() + "'" : std::string("a collection")));
}

Status ConfigSection::StringList(const std::string& key, std::vector<std::string>* out,
                                 bool required) {
  LOOM_ASSIGN_OR_RETURN(std::optional<YAML::Node> opt, Get(key, required, "a list of strings"));
  if (!opt) return Status::Ok();
  const YAML::Node& n = *opt;
  if (!n.IsSequence()) return Bad(key, n, "a list of strings");
  std::vector<std::string> v;
  for (size_t i = 0; i < n.size(); ++i) {
    if (!n[i].IsScalar()) return Bad(key, n[i], "a list of strings");
    v.push_back(n[i].Scalar());
  }
  *out = std::move(v);
  return Status::Ok();
}

Status ConfigSection::DoubleList(const std::string& key, std::vector<double>* out, bool required,
                                 double min, double max) {
  LOOM_ASSIGN_OR_RETURN(std::optional<YAML::Node> opt, Get(key, required, "a list of numbers"));
  if (!opt) return Status::Ok();
  const YAML::Node& n = *opt;
  if (!n.IsSequence()) return Bad(key, n, "a list of numbers");
  std::vector<double> v;
  for (size_t i = 0; i < n.size(); ++i) {
    LOOM_ASSIGN_OR_RETURN(double x, ListNumber(key, n[i], "[" + std::to_string(i) + "]", min, max));
    v.push_back(x);
  }
  *out = std::move(v);
  return Status::Ok();
}

Status ConfigSection::DoubleMatrix(const std::string& key, std::vector<std::vector<double>>* out,
                                   bool required, double min, double max) {
  LOOM_ASSIGN_OR_RETURN(std::optional<YAML::Node> opt,
                        Get(key, required, "a list of lists of numbers"));
  if (!opt) return Status::Ok();
  const YAML::Node& n = *opt;
  if (!n.IsSequence()) return Bad(key, n, "a list of lists of numbers");
  std::vector<std::vector<double>> m;
  for (size_t i = 0; i < n.size(); ++i) {
    if (!n[i].IsSequence()) return Bad(key, n[i], "a list of lists of numbers");
    std::vector<double> row;
    for (size_t j = 0; j < n[i].size(); ++j) {
      std::string index = "[" + std::to_string(i) + "][" + std::to_string(j) + "]";
      LOOM_ASSIGN_OR_RETURN(double x, ListNumber(key, n[i][j], index, min, max));
      row.push_back(x);
    }
    m.push_back(std::move(row));
  }
  *out = std::move(m);
  return Status::Ok();
}

std::vector<std::string> ConfigSection::Keys() const {
  std::vector<std::string> keys;
  for (auto it = node_.begin(); it != node_.end(); ++it) keys.push_back(it->first.Scalar());
  return keys;
}

Status ConfigSection::Finish() const {
  // yaml-cpp keeps every entry of a mapping and a lookup finds the first: a field given twice
  // (a second `checkpoint:` line appended to a job file) would be ignored without a word.
  std::map<std::string, int> first_line;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const std::string key = it->first.Scalar();
    const int line = it->first.Mark().line + 1;
    auto [at, fresh] = first_line.emplace(key, line);
    if (!fresh) {
      return InvalidArgument(file_ + ":" + std::to_string(line) + ": field '" +
                             (path_.empty() ? key : path_ + "." + key) +
                             "': given twice (first on line " + std::to_string(at->second) +
                             "); give it once");
    }
  }
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    std::string key = it->first.Scalar();
    if (read_.count(key) == 0) {
      std::string known;
      for (const std::string& k : read_) known += (known.empty() ? "" : ", ") + k;
      return InvalidArgument(Where(key) + ": unknown field (expected one of: " + known + ")");
    }
  }
  return Status::Ok();
}

}  // namespace loom
