// Cluster manifests: the shipped examples load; malformed manifests are refused with the file, the
// line and the field.
#include <gtest/gtest.h>

#include <fstream>

#include "coordinator/cluster.h"
#include "core/file_util.h"
#include "tests/coordinator/planner_test_util.h"
#include "tests/temp_dir.h"

namespace loom {
namespace {

const char* kGood = R"(name: test
device_types:
  gpu:
    memory: 80e9
    peak_flops: {fp32: 19.5e12, bf16: 312e12}
    memory_bandwidth: 2e12
nodes:
  - name: n{}
    count: 4
    devices: 8
    type: gpu
links:
  intra_node: {bandwidth: 300e9, latency: 3e-6}
  inter_node: {bandwidth: 200e9, latency: 5e-6}
)";

std::string Write(const std::string& name, const std::string& text) {
  std::string path = testing::TestTempPath(name);
  EXPECT_TRUE(WriteFileAtomic(path, text).ok());
  return path;
}

// Replaces the first occurrence of `from` in the good manifest.
std::string Edit(const std::string& from, const std::string& to) {
  std::string s = kGood;
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

TEST(ClusterManifest, ShippedExamplesLoad) {
  Cluster a100 = LoadShippedCluster("dgx-a100.yaml");
  EXPECT_EQ(a100.nodes.size(), 384u);
  EXPECT_EQ(a100.UsableDevices(), 3072);
  EXPECT_EQ(a100.nodes[7].name, "dgx-007");
  EXPECT_DOUBLE_EQ(a100.types[0].peak_bf16, 312e12);
  EXPECT_DOUBLE_EQ(a100.intra.bandwidth, 300e9);  // NVLink 3, per direction
  EXPECT_DOUBLE_EQ(a100.inter.bandwidth, 200e9);  // 8 x 200 Gb/s
  Cluster h100 = LoadShippedCluster("dgx-h100.yaml");
  EXPECT_EQ(h100.UsableDevices(), 1024);
  EXPECT_TRUE(h100.types[0].fused_kernels);
  Cluster local = LoadShippedCluster("localhost.yaml");
  ASSERT_EQ(local.nodes.size(), 1u);
  EXPECT_EQ(local.nodes[0].devices, 2);
  EXPECT_TRUE(local.types[0].shared_cores);
}

// deploy/mpirun's example: the manifest names the hosts of the hostfile with its slots as devices.
TEST(ClusterManifest, MpirunExampleMatchesItsHostfile) {
  Result<Cluster> c = LoadCluster(SourcePath("deploy/mpirun/cluster.yaml"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::ifstream hostfile(SourcePath("deploy/mpirun/hostfile"));
  std::vector<std::string> lines;
  for (std::string line; std::getline(hostfile, line);) {
    if (!line.empty() && line[0] != '#') lines.push_back(line);
  }
  ASSERT_EQ(lines.size(), c->nodes.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    const Node& n = c->nodes[i];
    EXPECT_EQ(lines[i], n.host + " slots=" + std::to_string(n.devices));
  }
}

TEST(ClusterManifest, ExcludedAndMeasured) {
  std::string text = std::string(kGood) +
                     "measured:\n  nodes: [n0, n1, n2]\n"
                     "  bandwidth:\n    - [0, 100e9, 190e9]\n    - [100e9, 0, 190e9]\n"
                     "    - [190e9, 190e9, 0]\nexclude: [n3]\n";
  Result<Cluster> c = LoadCluster(Write("loom_cluster_measured.yaml", text));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->nodes[3].excluded);
  EXPECT_EQ(c->UsableDevices(), 24);
  EXPECT_EQ(c->UsableNodes(), (std::vector<int>{0, 1, 2}));
  EXPECT_DOUBLE_EQ(c->NodeBandwidth(0, 1), 100e9);
  EXPECT_DOUBLE_EQ(c->NodeBandwidth(1, 2), 190e9);
  EXPECT_DOUBLE_EQ(c->NodeBandwidth(0, 3), 200e9);  // not measured: the inter-node default
}

TEST(ClusterManifest, RacksSparesAndLogicalNodes) {
  // Four logical nodes on one host, two racks, the last one a spare.
  std::string text =
      Edit("    type: gpu\n", "    type: gpu\n    host: localhost\n    rack: r{}\n") +
      "spare: [n3]\n";
  Result<Cluster> c = LoadCluster(Write("loom_cluster_racks.yaml", text));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->nodes[2].rack, "r2");
  EXPECT_EQ(c->nodes[2].host, "localhost");
  EXPECT_TRUE(c->nodes[3].spare);
  EXPECT_EQ(c->UsableNodes(), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(c->SpareNodes(), (std::vector<int>{3}));
  EXPECT_EQ(c->UsableDevices(), 24);
}

struct BadCase {
  const char* name;
  std::string text;
  std::string expected;  // after "<file>:"
};

class MalformedManifest : public ::testing::TestWithParam<BadCase> {};

TEST_P(MalformedManifest, NamesFileLineAndField) {
  const BadCase& c = GetParam();
  const std::string path = Write(std::string("loom_cluster_") + c.name + ".yaml", c.text);
  Result<Cluster> r = LoadCluster(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(path + ":" + c.expected), std::string::npos)
      << r.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Errors, MalformedManifest,
    ::testing::Values(
        BadCase{"devices_word", Edit("devices: 8", "devices: eight"),
                "10: field 'nodes[0].devices': expected an integer in [1, 1024], got 'eight'"},
        BadCase{"unknown_type", Edit("type: gpu", "type: tpu"),
                "11: field 'nodes[0].type': unknown device type 'tpu' (device_types defines: gpu)"},
        BadCase{"negative_memory", Edit("memory: 80e9", "memory: -1"),
                "4: field 'device_types.gpu.memory': expected a number"},
        BadCase{"typo",
                Edit("    memory_bandwidth: 2e12\n",
                     "    memory_bandwidth: 2e12\n    shared_core: true\n"),
                "7: field 'device_types.gpu.shared_core': unknown field"},
        BadCase{"missing_peak", Edit("fp32: 19.5e12, ", ""),
                "5: field 'device_types.gpu.peak_flops.fp32': missing"},
        BadCase{
            "bad_kernels",
            Edit("    memory_bandwidth: 2e12\n", "    memory_bandwidth: 2e12\n    kernels: fast\n"),
            "7: field 'device_types.gpu.kernels': expected fused or unfused, got 'fast'"},
        BadCase{"missing_inter", Edit("  inter_node: {bandwidth: 200e9, latency: 5e-6}\n", ""),
                "12: field 'links.inter_node': missing"},
        BadCase{"latency_text", Edit("latency: 3e-6", "latency: fast"),
                "13: field 'links.intra_node.latency': expected a number in [0.000000, "
                "1.000000], got 'fast'"},
        BadCase{"count_pattern", Edit("name: n{}", "name: node"),
                "8: field 'nodes[0].name': with 'count', the name must contain {}"},
        BadCase{"exclude_unknown", std::string(kGood) + "exclude: [n9]\n",
                "15: field 'exclude': unknown node 'n9'"},
        BadCase{"exclude_all", std::string(kGood) + "exclude: [n0, n1, n2, n3]\n",
                "15: field 'exclude': every node is excluded"},
        BadCase{"spare_unknown", std::string(kGood) + "spare: [n7]\n",
                "15: field 'spare': unknown node 'n7'"},
        BadCase{"spare_all", std::string(kGood) + "exclude: [n0]\nspare: [n1, n2, n3]\n",
                "16: field 'spare': no node is left to run on"},
        BadCase{"matrix_shape",
                std::string(kGood) + "measured:\n  nodes: [n0, n1]\n  bandwidth: [[0, 1e9]]\n",
                "17: field 'measured.bandwidth': expected a 2 x 2 matrix"},
        BadCase{"matrix_value",
                std::string(kGood) +
                    "measured:\n  nodes: [n0, n1]\n  bandwidth:\n    - [0, 1e9]\n    - [x, 0]\n",
                "19: field 'measured.bandwidth[1][0]': expected a number"},
        BadCase{"nodes_not_list",
                Edit("nodes:\n  - name: n{}\n    count: 4\n    devices: 8\n"
                     "    type: gpu\n",
                     "nodes: n0\n"),
                "7: field 'nodes': expected a list of mappings, got 'n0'"},
        BadCase{"duplicate",
                Edit("    type: gpu\n",
                     "    type: gpu\n  - name: n2\n    devices: "
                     "8\n    type: gpu\n"),
                "12: field 'nodes[1].name': node 'n2' is listed twice"},
        BadCase{"unknown_top", std::string(kGood) + "gpus: 8\n",
                "15: field 'gpus': unknown field"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.name); });

TEST(ClusterManifest, MissingFileAndSyntax) {
  EXPECT_EQ(LoadCluster("/nonexistent/cluster.yaml").status().code(), StatusCode::kNotFound);
  Result<Cluster> r = LoadCluster(Write("loom_cluster_syntax.yaml", "nodes: [\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("YAML syntax error"), std::string::npos);
}

}  // namespace
}  // namespace loom
