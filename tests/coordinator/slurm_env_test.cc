// Slurm's job environment without Slurm: compressed host and count lists, the allocation read
// from SLURM_* variables, and the cluster built from it on the shipped CPU manifest.
#include "coordinator/slurm_env.h"

#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "tests/coordinator/planner_test_util.h"

namespace loom {
namespace {

using Names = std::vector<std::string>;

// An environment of the given variables only.
EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(SlurmEnv, HostListsExpandAsSlurmWritesThem) {
  EXPECT_EQ(*ExpandHostList("localhost"), Names{"localhost"});
  EXPECT_EQ(*ExpandHostList("node[01-03,07],gpu5"),
            (Names{"node01", "node02", "node03", "node07", "gpu5"}));
  EXPECT_EQ(*ExpandHostList("n[8-11]"), (Names{"n8", "n9", "n10", "n11"}));  // no padding
  EXPECT_EQ(*ExpandHostList("n[098-101]"), (Names{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(*ExpandHostList("r[1-2]n[1-2]-ib"),
            (Names{"r1n1-ib", "r1n2-ib", "r2n1-ib", "r2n2-ib"}));
  EXPECT_EQ(*ExpandHostList("a[3],b"), (Names{"a3", "b"}));
}

TEST(SlurmEnv, MalformedHostListsNameTheProblem) {
  for (const auto& [list, why] : std::vector<std::pair<std::string, std::string>>{
           {"", "an empty name"},
           {"a,,b", "an empty name"},
           {"node[1-3", "'[' without ']'"},
           {"node1-3]", "']' without '['"},
           {"node[3-1]", "expected numbers and ranges like 01-03,07, got '3-1'"},
           {"node[1-x]", "got '1-x'"},
           {"node[]", "got ''"},
           {"n[0-999999]m[0-9]", "more than 1000000 names"},
           {"n[0-9999999]", "more than 1000000 names"}}) {
    Result<Names> r = ExpandHostList(list);
    ASSERT_FALSE(r.ok()) << list;
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("host list '" + list + "'"), std::string::npos);
  }
}

TEST(SlurmEnv, CountListsExpand) {
  EXPECT_EQ(*ExpandCountList("4"), std::vector<int>{4});
  EXPECT_EQ(*ExpandCountList("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(*ExpandCountList("8(x2),16"), (std::vector<int>{8, 8, 16}));
  for (const std::string bad : {"", "0", "2(x0)", "2(x3", "(x3)", "2,,1", "-1", "2(y3)", "x"}) {
    Result<std::vector<int>> r = ExpandCountList(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("expected counts like 2(x3),1"), std::string::npos);
  }
  EXPECT_FALSE(ExpandCountList("1(x999999),1(x2)").ok());  // bounded
}

TEST(SlurmEnv, OutsideAnAllocationThereIsNone) {
  Result<std::optional<SlurmAllocation>> r = ReadSlurmAllocation(Env({{"HOME", "/root"}}));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

TEST(SlurmEnv, ReadsTheAllocation) {
  Result<std::optional<SlurmAllocation>> r = ReadSlurmAllocation(Env({
      {"SLURM_JOB_ID", "42"},
      {"SLURM_JOB_NODELIST", "node[01-03,07]"},
      {"SLURM_TASKS_PER_NODE", "2(x3),1"},
      {"SLURM_JOB_CPUS_PER_NODE", "8(x4)"},
      {"SLURM_NTASKS", "7"},
      {"SLURM_RESTART_COUNT", "2"},
  }));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_value());
  const SlurmAllocation& a = **r;
  EXPECT_EQ(a.job_id, "42");
  EXPECT_EQ(a.hosts, (Names{"node01", "node02", "node03", "node07"}));
  EXPECT_EQ(a.tasks, (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(a.cpus, (std::vector<int>{8, 8, 8, 8}));
  EXPECT_EQ(a.TotalTasks(), 7);
  EXPECT_EQ(a.gpus_per_node, 0);
  EXPECT_EQ(a.restart_count, 2);
  EXPECT_EQ(DescribeSlurmJob(a), "Slurm job 42, restart 2");
}

TEST(SlurmEnv, GpusAndOptionalVariables) {
  Result<std::optional<SlurmAllocation>> r =
      ReadSlurmAllocation(Env({{"SLURM_JOB_ID", "7"},
                               {"SLURM_NODELIST", "g1"},  // the older name
                               {"SLURM_TASKS_PER_NODE", "8"},
                               {"SLURM_GPUS_PER_NODE", "a100:8"}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const SlurmAllocation& a = **r;
  EXPECT_EQ(a.gpus_per_node, 8);
  EXPECT_TRUE(a.cpus.empty());
  EXPECT_EQ(a.TotalTasks(), 8);  // no SLURM_NTASKS: the tasks per node
  EXPECT_EQ(DescribeSlurmJob(a), "Slurm job 7");
  Result<std::optional<SlurmAllocation>> on_node =
      ReadSlurmAllocation(Env({{"SLURM_JOB_ID", "7"},
                               {"SLURM_JOB_NODELIST", "g1"},
                               {"SLURM_TASKS_PER_NODE", "4"},
                               {"SLURM_GPUS_ON_NODE", "4"}}));
  ASSERT_TRUE(on_node.ok());
  EXPECT_EQ((*on_node)->gpus_per_node, 4);
}

TEST(SlurmEnv, BadVariablesAreNamed) {
  const std::map<std::string, std::string> good = {
      {"SLURM_JOB_ID", "9"}, {"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_TASKS_PER_NODE", "2(x2)"}};
  for (const auto& [name, value, why] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"SLURM_JOB_NODELIST", "n[1-2", "SLURM_JOB_NODELIST: host list 'n[1-2'"},
           {"SLURM_TASKS_PER_NODE", "2(x3)", "SLURM_TASKS_PER_NODE='2(x3)': 3 counts for 2 nodes"},
           {"SLURM_TASKS_PER_NODE", "two", "SLURM_TASKS_PER_NODE='two': expected counts"},
           {"SLURM_JOB_CPUS_PER_NODE", "4", "SLURM_JOB_CPUS_PER_NODE='4': 1 counts for 2 nodes"},
           {"SLURM_NTASKS", "-4", "SLURM_NTASKS='-4': expected a count"},
           {"SLURM_GPUS_PER_NODE", "a100:", "SLURM_GPUS_PER_NODE='a100:': expected N or type:N"},
       }) {
    std::map<std::string, std::string> vars = good;
    vars[name] = value;
    Result<std::optional<SlurmAllocation>> r = ReadSlurmAllocation(Env(vars));
    ASSERT_FALSE(r.ok()) << name << "=" << value;
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
  }
  Result<std::optional<SlurmAllocation>> no_list =
      ReadSlurmAllocation(Env({{"SLURM_JOB_ID", "9"}}));
  ASSERT_FALSE(no_list.ok());
  EXPECT_NE(no_list.status().message().find("SLURM_JOB_NODELIST is not"), std::string::npos);
  Result<std::optional<SlurmAllocation>> no_tasks =
      ReadSlurmAllocation(Env({{"SLURM_JOB_ID", "9"}, {"SLURM_JOB_NODELIST", "n1"}}));
  ASSERT_FALSE(no_tasks.ok());
  EXPECT_NE(no_tasks.status().message().find("SLURM_TASKS_PER_NODE is not set"), std::string::npos);
}

TEST(SlurmEnv, ClusterOfTheAllocationKeepsTheCpuSpecs) {
  const Cluster base = LoadShippedCluster("localhost.yaml");
  const DeviceType& core = base.types[0];
  SlurmAllocation a;
  a.job_id = "42";
  a.hosts = {"node01", "node02"};
  a.tasks = {4, 4};
  a.cpus = {8, 8};
  Result<Cluster> c = SlurmCluster(a, base);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->name, "Slurm job 42");
  ASSERT_EQ(c->nodes.size(), 2u);
  EXPECT_EQ(c->nodes[1].name, "node02");
  EXPECT_EQ(c->nodes[1].host, "node02");
  EXPECT_EQ(c->UsableDevices(), 8);
  EXPECT_DOUBLE_EQ(c->types[0].peak_fp32, core.peak_fp32);  // a core per task: unscaled
  EXPECT_EQ(c->types[0].shared_cores, core.shared_cores);
  EXPECT_DOUBLE_EQ(c->intra.bandwidth, base.intra.bandwidth);
  EXPECT_GT(c->inter.bandwidth, 0);  // the manifest's nominal network between nodes
  // More tasks than CPUs on the most crowded node: every device gets its share.
  a.tasks = {4, 16};
  c = SlurmCluster(a, base);
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(c->types[0].peak_fp32, core.peak_fp32 / 2);
  EXPECT_DOUBLE_EQ(c->types[0].memory, core.memory / 2);
}

TEST(SlurmEnv, GpusNeedAManifest) {
  SlurmAllocation a;
  a.job_id = "5";
  a.hosts = {"g1"};
  a.tasks = {8};
  a.gpus_per_node = 8;
  Result<Cluster> c = SlurmCluster(a, LoadShippedCluster("localhost.yaml"));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("Slurm job 5 has 8 GPUs per node"), std::string::npos);
  EXPECT_NE(c.status().message().find("--cluster"), std::string::npos);
}

}  // namespace
}  // namespace loom
