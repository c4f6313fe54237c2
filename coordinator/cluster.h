// The cluster manifest (cluster.yaml, schema in docs/MANIFESTS.md): device types, nodes, the links
// inside and between nodes, an optional measured node-to-node bandwidth matrix, excluded nodes.
// A Cluster is a plain value; LoadCluster validates everything and every error names the file,
// the line and the field, e.g.
//   dgx.yaml:12: field 'nodes[1].devices': expected an integer in [1, 1024], got 'eight'
// Units are SI base units throughout: bytes, bytes/s, FLOP/s, seconds.
#pragma once

#include <string>
#include <vector>

#include "core/config_reader.h"
#include "core/precision.h"
#include "core/status.h"

namespace loom {

struct DeviceType {
  std::string name;
  double memory = 0;            // bytes per device
  double peak_fp32 = 0;         // dense FLOP/s per device
  double peak_bf16 = 0;         // dense FLOP/s per device (0: not supported)
  std::string peak_bf16_where;  // "file:line: field '...peak_flops.bf16'" (for messages)
  double memory_bandwidth = 0;  // bytes/s of device memory (element-wise kernels are bound by it)
  // Software stack: fused kernels (flash-style attention that never stores the s x s scores,
  // chunked loss that never materialises the logits) or unfused (Megatron 2021 style).
  bool fused_kernels = false;
  // Devices are CPU cores of one host: the ranks placed on a node share all of its cores
  // (cores / ranks threads each), as `loom train` does.
  bool shared_cores = false;
  // The share of a core each rank gets when more ranks than cores run on a node (the built-in
  // localhost manifest for --np above the core count: cores / ranks), already applied to the peak
  // and memory figures above; the planner applies it to calibrated rates too, which are measured
  // with a core per rank. 1: not oversubscribed.
  double core_share = 1.0;
  double Peak(Precision p) const { return p == Precision::kBf16 ? peak_bf16 : peak_fp32; }
};

struct Node {
  std::string name;
  std::string host;  // several nodes may share one host: logical nodes (tests on one machine)
  int devices = 0;
  int type = 0;  // index into Cluster::types
  bool excluded = false;
  std::string rack;    // its failure domain beyond itself ("": none named)
  bool spare = false;  // kept out of the plan; replaces a lost node (in-memory snapshots)
};

// Nominal link figures; a calibration file may replace them with measured ones.
struct LinkSpec {
  double bandwidth = 0;  // bytes/s, per direction
  double latency = 0;    // seconds per message
};

struct Cluster {
  std::string file;  // manifest path (for messages)
  std::string name;
  std::vector<DeviceType> types;
  std::vector<Node> nodes;
  LinkSpec intra;  // between two devices of one node, per device
  LinkSpec inter;  // between two nodes, per node (sum over the node's network adapters)
  // Measured node-to-node figures, indexed by node index (row = sender); empty when not given.
  // Entries of 0 mean "not measured" (the inter-node default applies).
  std::vector<std::vector<double>> measured_bandwidth;
  std::vector<std::vector<double>> measured_latency;

  // Indices of the nodes that are neither excluded nor spare, in manifest order.
  std::vector<int> UsableNodes() const;
  // Indices of the spare nodes that are not excluded, in manifest order.
  std::vector<int> SpareNodes() const;
  int UsableDevices() const;
  // Bandwidth / latency from node a to node b (a != b): the measured value if any, else `inter`.
  double NodeBandwidth(int a, int b) const;
  double NodeLatency(int a, int b) const;
};

// Reads and validates a manifest.
Result<Cluster> LoadCluster(const std::string& path);
// Same, from an already opened root section (tests and embedded manifests).
Result<Cluster> ParseCluster(ConfigSection root);

}  // namespace loom
