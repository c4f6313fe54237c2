// Cluster manifest reader. Structural checks (types, ranges, unknown keys) come from
// ConfigSection; the cross-references (node types, measured and excluded node names) are checked
// here, each error pointing at the field that names the unknown thing.
#include "coordinator/cluster.h"

#include <cstdio>
#include <map>
#include <set>

namespace loom {
namespace {

constexpr double kMaxBytes = 1e18;  // sanity bounds: no device has an exabyte
constexpr double kMaxRate = 1e18;   // FLOP/s or bytes/s

Result<DeviceType> ReadDeviceType(ConfigSection s, const std::string& name) {
  DeviceType t;
  t.name = name;
  LOOM_RETURN_IF_ERROR(s.Double("memory", &t.memory, true, 1, kMaxBytes));
  LOOM_ASSIGN_OR_RETURN(ConfigSection peak, s.Section("peak_flops", true));
  LOOM_RETURN_IF_ERROR(peak.Double("fp32", &t.peak_fp32, true, 1, kMaxRate));
  LOOM_RETURN_IF_ERROR(peak.Double("bf16", &t.peak_bf16, false, 0, kMaxRate));
  t.peak_bf16_where = peak.Where("bf16");
  LOOM_RETURN_IF_ERROR(peak.Finish());
  LOOM_RETURN_IF_ERROR(s.Double("memory_bandwidth", &t.memory_bandwidth, true, 1, kMaxRate));
  std::string kernels = "unfused";
  LOOM_RETURN_IF_ERROR(s.String("kernels", &kernels, false));
  if (kernels != "fused" && kernels != "unfused") {
    return InvalidArgument(s.Where("kernels") + ": expected fused or unfused, got '" + kernels +
                           "'");
  }
  t.fused_kernels = kernels == "fused";
  LOOM_RETURN_IF_ERROR(s.Bool("shared_cores", &t.shared_cores, false));
  LOOM_RETURN_IF_ERROR(s.Finish());
  return t;
}

Result<LinkSpec> ReadLink(ConfigSection& links, const std::string& key, bool required) {
  LinkSpec l;
  LOOM_ASSIGN_OR_RETURN(ConfigSection s, links.Section(key, required));
  LOOM_RETURN_IF_ERROR(s.Double("bandwidth", &l.bandwidth, required, 1, kMaxRate));
  LOOM_RETURN_IF_ERROR(s.Double("latency", &l.latency, required, 0, 1));
  LOOM_RETURN_IF_ERROR(s.Finish());
  return l;
}

// "dgx-{}" with count 192 -> dgx-000 .. dgx-191 (zero-padded to the width of count - 1).
std::string Expand(const std::string& pattern, int64_t i, int64_t count) {
  size_t at = pattern.find("{}");
  if (at == std::string::npos) return pattern;
  int width = static_cast<int>(std::to_string(count - 1).size());
  char num[32];
  std::snprintf(num, sizeof(num), "%0*lld", width, static_cast<long long>(i));
  return pattern.substr(0, at) + num + pattern.substr(at + 2);
}

Status ReadNodes(ConfigSection& root, const std::map<std::string, int>& types, Cluster* c) {
  LOOM_ASSIGN_OR_RETURN(std::vector<ConfigSection> entries, root.List("nodes", true));
  if (entries.empty()) return InvalidArgument(root.Where("nodes") + ": expected at least one node");
  std::set<std::string> seen;
  for (ConfigSection& e : entries) {
    std::string name, host, type, rack;
    int64_t devices = 0, count = 0;
    LOOM_RETURN_IF_ERROR(e.String("name", &name, true));
    LOOM_RETURN_IF_ERROR(e.String("host", &host, false));
    LOOM_RETURN_IF_ERROR(e.String("rack", &rack, false));
    LOOM_RETURN_IF_ERROR(e.Int("count", &count, false, 1, 1 << 20));
    LOOM_RETURN_IF_ERROR(e.Int("devices", &devices, true, 1, 1024));
    LOOM_RETURN_IF_ERROR(e.String("type", &type, true));
    LOOM_RETURN_IF_ERROR(e.Finish());
    auto t = types.find(type);
    if (t == types.end()) {
      std::string known;
      for (const auto& [k, v] : types) known += (known.empty() ? "" : ", ") + k;
      return InvalidArgument(e.Where("type") + ": unknown device type '" + type +
                             "' (device_types defines: " + known + ")");
    }
    if (count > 0 && name.find("{}") == std::string::npos) {
      return InvalidArgument(e.Where("name") + ": with 'count', the name must contain {} (e.g. " +
                             "'dgx-{}'), got '" + name + "'");
    }
    const int64_t n = count > 0 ? count : 1;
    for (int64_t i = 0; i < n; ++i) {
      Node node;
      node.name = Expand(name, i, n);
      node.host = host.empty() ? node.name : Expand(host, i, n);
      node.rack = rack.empty() ? "" : Expand(rack, i, n);
      node.devices = static_cast<int>(devices);
      node.type = t->second;
      if (!seen.insert(node.name).second) {
        return InvalidArgument(e.Where("name") + ": node '" + node.name + "' is listed twice");
      }
      c->nodes.push_back(node);
    }
  }
  return Status::Ok();
}

Result<int> NodeIndex(const Cluster& c, const ConfigSection& s, const std::string& key,
                      const std::string& name) {
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    if (c.nodes[i].name == name) return static_cast<int>(i);
  }
  return InvalidArgument(s.Where(key) + ": unknown node '" + name + "'");
}

Status ReadMeasured(ConfigSection& root, Cluster* c) {
  LOOM_ASSIGN_OR_RETURN(ConfigSection m, root.Section("measured", false));
  if (!root.Has("measured")) return Status::Ok();
  std::vector<std::string> names;
  std::vector<std::vector<double>> bw, lat;
  LOOM_RETURN_IF_ERROR(m.StringList("nodes", &names, true));
  LOOM_RETURN_IF_ERROR(m.DoubleMatrix("bandwidth", &bw, true, 0, kMaxRate));
  LOOM_RETURN_IF_ERROR(m.DoubleMatrix("latency", &lat, false, 0, 1));
  LOOM_RETURN_IF_ERROR(m.Finish());
  const size_t k = names.size();
  auto square = [&](const std::vector<std::vector<double>>& x, const std::string& key) -> Status {
    bool ok = x.size() == k;
    for (const auto& row : x) ok = ok && row.size() == k;
    if (ok) return Status::Ok();
    return InvalidArgument(m.Where(key) + ": expected a " + std::to_string(k) + " x " +
                           std::to_string(k) + " matrix (one row and column per entry of " +
                           "measured.nodes)");
  };
  LOOM_RETURN_IF_ERROR(square(bw, "bandwidth"));
  if (!lat.empty()) LOOM_RETURN_IF_ERROR(square(lat, "latency"));
  const size_t n = c->nodes.size();
  c->measured_bandwidth.assign(n, std::vector<double>(n, 0));
  c->measured_latency.assign(n, std::vector<double>(n, 0));
  std::vector<int> idx;
  for (const std::string& name : names) {
    LOOM_ASSIGN_OR_RETURN(int i, NodeIndex(*c, m, "nodes", name));
    idx.push_back(i);
  }
  for (size_t a = 0; a < k; ++a) {
    for (size_t b = 0; b < k; ++b) {
      if (a == b) continue;
      c->measured_bandwidth[idx[a]][idx[b]] = bw[a][b];
      if (!lat.empty()) c->measured_latency[idx[a]][idx[b]] = lat[a][b];
    }
  }
  return Status::Ok();
}

}  // namespace

std::vector<int> Cluster::UsableNodes() const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!nodes[i].excluded && !nodes[i].spare) out.push_back(static_cast<int>(i));
  }
  return out;
}

std::vector<int> Cluster::SpareNodes() const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!nodes[i].excluded && nodes[i].spare) out.push_back(static_cast<int>(i));
  }
  return out;
}

int Cluster::UsableDevices() const {
  int n = 0;
  for (const Node& node : nodes) n += node.excluded || node.spare ? 0 : node.devices;
  return n;
}

double Cluster::NodeBandwidth(int a, int b) const {
  if (!measured_bandwidth.empty() && measured_bandwidth[a][b] > 0) return measured_bandwidth[a][b];
  return inter.bandwidth;
}

double Cluster::NodeLatency(int a, int b) const {
  if (!measured_latency.empty() && measured_latency[a][b] > 0) return measured_latency[a][b];
  return inter.latency;
}

Result<Cluster> LoadCluster(const std::string& path) {
  LOOM_ASSIGN_OR_RETURN(ConfigSection root, ConfigSection::LoadFile(path));
  return ParseCluster(std::move(root));
}

Result<Cluster> ParseCluster(ConfigSection root) {
  Cluster c;
  c.file = root.file();
  LOOM_RETURN_IF_ERROR(root.String("name", &c.name, false));
  LOOM_ASSIGN_OR_RETURN(ConfigSection types, root.Section("device_types", true));
  std::map<std::string, int> type_index;
  for (const std::string& name : types.Keys()) {
    LOOM_ASSIGN_OR_RETURN(ConfigSection t, types.Section(name, true));
    LOOM_ASSIGN_OR_RETURN(DeviceType dt, ReadDeviceType(std::move(t), name));
    type_index[name] = static_cast<int>(c.types.size());
    c.types.push_back(dt);
  }
  if (c.types.empty()) {
    return InvalidArgument(root.Where("device_types") + ": expected at least one device type");
  }
  LOOM_RETURN_IF_ERROR(types.Finish());
  LOOM_RETURN_IF_ERROR(ReadNodes(root, type_index, &c));
  bool multi_device = false;
  for (const Node& n : c.nodes) multi_device = multi_device || n.devices > 1;
  LOOM_ASSIGN_OR_RETURN(ConfigSection links, root.Section("links", multi_device));
  LOOM_ASSIGN_OR_RETURN(c.intra, ReadLink(links, "intra_node", multi_device));
  LOOM_ASSIGN_OR_RETURN(c.inter, ReadLink(links, "inter_node", c.nodes.size() > 1));
  LOOM_RETURN_IF_ERROR(links.Finish());
  LOOM_RETURN_IF_ERROR(ReadMeasured(root, &c));
  std::vector<std::string> excluded;
  LOOM_RETURN_IF_ERROR(root.StringList("exclude", &excluded, false));
  for (const std::string& name : excluded) {
    LOOM_ASSIGN_OR_RETURN(int i, NodeIndex(c, root, "exclude", name));
    c.nodes[static_cast<size_t>(i)].excluded = true;
  }
  std::vector<std::string> spares;
  LOOM_RETURN_IF_ERROR(root.StringList("spare", &spares, false));
  for (const std::string& name : spares) {
    LOOM_ASSIGN_OR_RETURN(int i, NodeIndex(c, root, "spare", name));
    c.nodes[static_cast<size_t>(i)].spare = true;
  }
  if (c.UsableNodes().empty()) {
    return InvalidArgument(spares.empty() ? root.Where("exclude") + ": every node is excluded"
                                          : root.Where("spare") +
                                                ": no node is left to run on (every node is "
                                                "excluded or spare)");
  }
  LOOM_RETURN_IF_ERROR(root.Finish());
  return c;
}

}  // namespace loom
