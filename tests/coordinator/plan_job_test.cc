// The planner's view of job.yaml (read by job/job_config.h for planning): present parallel fields
// are fixed, absent ones free; the `plan:` section; errors name file, line and field; what only
// training needs (a data source, the optimizer, steps) may be absent.
#include <gtest/gtest.h>

#include "coordinator/plan_job.h"
#include "core/file_util.h"
#include "model/config.h"
#include "tests/coordinator/planner_test_util.h"
#include "tests/temp_dir.h"

namespace loom {
namespace {

std::string Write(const std::string& name, const std::string& text) {
  std::string path = testing::TestTempPath(name);
  EXPECT_TRUE(WriteFileAtomic(path, text).ok());
  return path;
}

const char* kModel = "model: {vocab: 256, max_seq: 128, layers: 4, heads: 8, hidden: 256}\n";

TEST(PlanJob, ExamplesLoad) {
  Result<PlanJob> j = LoadPlanJob(SourcePath("examples/plan/gpt-145b.yaml"));
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->model.hidden, 12288);
  EXPECT_EQ(j->global_batch, 2304);
  EXPECT_EQ(j->precision, Precision::kBf16);
  EXPECT_EQ(j->devices, 1536);
  EXPECT_TRUE(j->dropout);
  EXPECT_FALSE(j->tp.has_value());
  EXPECT_FALSE(j->micro_batch.has_value());
  EXPECT_FALSE(j->FullyFixed());

  Result<PlanJob> fixed = LoadPlanJob(SourcePath("examples/plan/demo-tp2.yaml"));
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
  EXPECT_TRUE(fixed->FullyFixed());
  EXPECT_EQ(*fixed->tp, 2);
  EXPECT_EQ(*fixed->micro_batch, 8);
  EXPECT_EQ(*fixed->recompute, Recompute::kNone);
  EXPECT_EQ(*fixed->vpp, 1);
  EXPECT_EQ(fixed->precision, Precision::kFp32);  // default

  // The training demo itself (no parallel section) is a valid planning input too.
  Result<PlanJob> demo = LoadPlanJob(SourcePath("examples/demo.yaml"));
  ASSERT_TRUE(demo.ok()) << demo.status().ToString();
  EXPECT_FALSE(demo->tp.has_value());
}

TEST(PlanJob, Errors) {
  struct Case {
    std::string text, expected;
  };
  const std::string data = "data: {seq: 128, global_batch: 16}\n";
  for (const Case& c : std::vector<Case>{
           {std::string(kModel) + data + "plan: {precision: fp16}\n",
            ":3: field 'plan.precision': expected fp32 or bf16, got 'fp16'"},
           {std::string(kModel) + data + "plan: {headroom: 2}\n",
            ":3: field 'plan.headroom': expected a number in [0.000000, 0.900000], got '2'"},
           {std::string(kModel) + data + "plan:\n  precison: bf16\n",
            ":4: field 'plan.precison': unknown field"},
           {std::string(kModel) + data + "parallel: {tp: two}\n",
            ":3: field 'parallel.tp': expected an integer"},
           {std::string(kModel) + data + "parallel: {schedule: zb-h1}\n",
            ":3: field 'parallel.schedule': expected gpipe, 1f1b or interleaved"},
           {std::string(kModel) + data + "runtime: {recompute: some}\n",
            ":3: field 'runtime.recompute': expected none, selective or full, got 'some'"},
           {std::string(kModel) + "data: {seq: 256, global_batch: 16}\n",
            ":2: field 'data.seq': expected at most model.max_seq (128), got 256"},
           {std::string(kModel) + "data: {seq: 128, global_batch: 16, micro_batch: 3}\n",
            ":2: field 'data.micro_batch': expected a divisor of data.global_batch (16), got 3"},
           {"model: {vocab: 256, max_seq: 128, layers: 4, heads: 3, hidden: 256}\n" + data,
            ":1: field 'model.hidden': expected a multiple of model.heads (3), got 256"},
           {data, ":1: field 'model': missing"},
       }) {
    const std::string path = Write("loom_plan_job.yaml", c.text);
    Result<PlanJob> r = LoadPlanJob(path);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(path + c.expected), std::string::npos)
        << r.status().message();
  }
}

TEST(PlanJob, IgnoresTrainingOnlyKeys) {
  const std::string path =
      Write("loom_plan_job_train.yaml",
            std::string(kModel) +
                "data: {text: x.txt, val_fraction: 0.2, seq: 64, global_batch: 8}\n"
                "optimizer: {lr: 1.0e-3}\nsteps: 5\nruntime: {threads: 2, recompute: full}\n"
                "parallel: {pp: 2, overlap: false}\n");
  Result<PlanJob> r = LoadPlanJob(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r->recompute, Recompute::kFull);
  EXPECT_EQ(*r->pp, 2);
  EXPECT_FALSE(r->overlap);
  EXPECT_FALSE(r->dp.has_value());
}

}  // namespace
}  // namespace loom
