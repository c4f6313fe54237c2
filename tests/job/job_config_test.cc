// Job files: the shipped demo parses; each kind of mistake names file, line, field, expectation.
#include "job/job_config.h"

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <utility>
#include <vector>

#include "core/file_util.h"
#include "job/job_overrides.h"
#include "tests/temp_dir.h"

namespace loom {
namespace {

const char* kGood = R"(model: {vocab: 256, max_seq: 64, layers: 2, heads: 4, hidden: 32}
data: {text: corpus.txt, seq: 32, global_batch: 8, micro_batch: 4}
optimizer: {lr: 0.001}
steps: 10
)";

std::string WriteJob(const std::string& text) {
  std::string path = testing::TestTempPath("loom_job_test.yaml");
  EXPECT_TRUE(WriteFileAtomic(path, text).ok());
  return path;
}

TEST(JobConfig, ShippedDemoParses) {
  auto job = LoadJobConfig(LOOM_SOURCE_DIR "/examples/demo.yaml");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->model.vocab, 256);
  EXPECT_TRUE(std::filesystem::exists(job->data.text)) << job->data.text;
}

TEST(JobConfig, DefaultsAndRelativePaths) {
  auto path = WriteJob(kGood);
  auto job = LoadJobConfig(path);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->data.text, (std::filesystem::path(path).parent_path() / "corpus.txt").string());
  EXPECT_EQ(job->schedule.decay_steps, 10);
  EXPECT_EQ(job->optim.beta2, 0.95);
}

TEST(JobConfig, CheckpointInitFrom) {
  auto path =
      WriteJob(std::string(kGood) + "checkpoint: {dir: ck, init_from: pretrained/step_00000100}\n");
  auto job = LoadJobConfig(path);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const std::filesystem::path here = std::filesystem::path(path).parent_path();
  EXPECT_EQ(job->checkpoint.init_from, (here / "pretrained/step_00000100").string());
  EXPECT_TRUE(CheckCheckpointConfig(*job).ok());
  // Resuming a run and starting a new one from weights are exclusive.
  job->checkpoint.load = (here / "ck").string();
  const Status st = CheckCheckpointConfig(*job);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("field 'checkpoint.init_from': set together with checkpoint.load"),
            std::string::npos)
      << st.message();
}

TEST(JobConfig, CheckpointSignal) {
  auto job = LoadJobConfig(WriteJob(kGood));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->checkpoint.stop_signal, SIGUSR1);  // the default
  for (const auto& [name, sig] : std::vector<std::pair<std::string, int>>{{"SIGUSR2", SIGUSR2},
                                                                          {"TERM", SIGTERM},
                                                                          {"SIGINT", SIGINT},
                                                                          {"sigusr2", SIGUSR2},
                                                                          {"none", 0}}) {
    job = LoadJobConfig(WriteJob(std::string(kGood) + "checkpoint: {signal: " + name + "}\n"));
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    EXPECT_EQ(job->checkpoint.stop_signal, sig) << name;
  }
}

void ExpectError(const std::string& text, const std::string& needle) {
  auto path = WriteJob(text);
  auto job = LoadJobConfig(path);
  ASSERT_FALSE(job.ok()) << "accepted: " << text;
  EXPECT_NE(job.status().message().find(needle), std::string::npos) << job.status().message();
  EXPECT_NE(job.status().message().find(path), std::string::npos) << job.status().message();
}

TEST(JobConfig, ErrorsNameTheField) {
  std::string s(kGood);
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string t = s;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  ExpectError(replace("layers: 2", "layers: two"), ":1: field 'model.layers': expected an integer");
  ExpectError(replace("hidden: 32", "hidden: 30"),
              "field 'model.hidden': expected a multiple of model.heads");
  ExpectError(replace("seq: 32", "seq: 128"), "field 'data.seq': expected at most model.max_seq");
  ExpectError(replace("micro_batch: 4", "micro_batch: 3"),
              "field 'data.micro_batch': expected a divisor");
  ExpectError(replace("lr: 0.001", "lr: -1"), "field 'optimizer.lr': expected a number");
  ExpectError(replace("steps: 10", "stepz: 10"), "field 'steps': missing");
  ExpectError(s + "runtime: {recompute: some}\n",
              "field 'runtime.recompute': expected 'none' or 'full'");
  ExpectError(s + "optimiser: {}\n", "field 'optimiser': unknown field");
  ExpectError(replace("text: corpus.txt, ", ""), "expected exactly one of 'text'");
  ExpectError(replace("optimizer: {lr: 0.001}\n", ""), "field 'optimizer': missing");
  ExpectError(s + "checkpoint: {dir: ck, signal: HUP}\n",
              "field 'checkpoint.signal': expected SIGUSR1, SIGUSR2, SIGTERM, SIGINT or none, got "
              "'HUP'");
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

TEST(JobConfig, SnapshotSection) {
  auto job = LoadJobConfig(WriteJob(kGood));
  ASSERT_TRUE(job.ok());
  EXPECT_TRUE(job->snapshot.enabled);  // on by default under loom launch
  EXPECT_EQ(job->snapshot.every, 1);
  EXPECT_FALSE(job->snapshot.k.has_value());
  EXPECT_EQ(job->snapshot.max_restarts, 3);
  job = LoadJobConfig(
      WriteJob(std::string(kGood) + "snapshot: {every: 4, k: 4, m: 2, max_restarts: 1}\n"));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->snapshot.every, 4);
  EXPECT_EQ(job->snapshot.k, 4);
  EXPECT_EQ(job->snapshot.m, 2);
  EXPECT_EQ(job->snapshot.max_restarts, 1);
  job = LoadJobConfig(WriteJob(std::string(kGood) + "snapshot: {m: 0}\n"));  // node-local
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->snapshot.m, 0);
  job = LoadJobConfig(WriteJob(std::string(kGood) + "snapshot: {enabled: false}\n"));
  ASSERT_TRUE(job.ok());
  EXPECT_FALSE(job->snapshot.enabled);
  ExpectError(std::string(kGood) + "snapshot: {k: 4}\n",
              "field 'snapshot.m': expected k and m together");
  ExpectError(std::string(kGood) + "snapshot: {m: 2}\n",
              "field 'snapshot.k': expected k and m together");
  ExpectError(std::string(kGood) + "snapshot: {every: 0}\n", "field 'snapshot.every'");
  ExpectError(std::string(kGood) + "snapshot: {k: 40, m: 1}\n", "field 'snapshot.k'");
  ExpectError(std::string(kGood) + "snapshot: {evry: 2}\n", "snapshot.evry");
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

TEST(JobConfig, DetectSection) {
  auto job = LoadJobConfig(WriteJob(kGood));
  ASSERT_TRUE(job.ok());
  EXPECT_TRUE(job->detect.enabled);
  EXPECT_EQ(job->detect.action, "log");
  EXPECT_EQ(job->detect.beat_ms, 250);
  job = LoadJobConfig(WriteJob(std::string(kGood) +
                               "detect: {action: restart, slow_rank_score: 1.5, persist: 4, "
                               "hang_s: 3, stale_s: 4, beat_ms: 500, trace_dir: pm}\n"));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->detect.action, "restart");
  EXPECT_EQ(job->detect.slow_rank_score, 1.5);
  EXPECT_EQ(job->detect.persist, 4);
  EXPECT_EQ(job->detect.beat_ms, 500);
  EXPECT_EQ(job->detect.trace_dir, "pm");
  ExpectError(std::string(kGood) + "detect: {action: reboot}\n",
              "field 'detect.action': expected log or restart, got 'reboot'");
  ExpectError(std::string(kGood) + "detect: {slow_rank_score: 1.0}\n",
              "field 'detect.slow_rank_score'");
  ExpectError(std::string(kGood) + "detect: {beat_ms: 1500}\n",
              "field 'detect.beat_ms': expected at most half of stale_s");
  ExpectError(std::string(kGood) + "detect: {persit: 2}\n", "detect.persit");
}

TEST(JobConfig, MetricsSection) {
  auto job = LoadJobConfig(WriteJob(kGood));
  ASSERT_TRUE(job.ok());
  EXPECT_TRUE(job->metrics.enabled);
  EXPECT_EQ(job->metrics.address, "127.0.0.1");
  EXPECT_EQ(job->metrics.port, 0);
  EXPECT_EQ(job->metrics.run_dir, "");
  job = LoadJobConfig(
      WriteJob(std::string(kGood) + "metrics: {address: 0.0.0.0, port: 9450, run_dir: run}\n"));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->metrics.address, "0.0.0.0");
  EXPECT_EQ(job->metrics.port, 9450);
  // Relative to the job file, as every path in it.
  EXPECT_EQ(std::filesystem::path(job->metrics.run_dir).filename(), "run");
  EXPECT_TRUE(std::filesystem::path(job->metrics.run_dir).is_absolute()) << job->metrics.run_dir;
  ExpectError(std::string(kGood) + "metrics: {port: 70000}\n", "field 'metrics.port'");
  ExpectError(std::string(kGood) + "metrics: {address: ''}\n",
              "field 'metrics.address': expected an IP address");
  ExpectError(std::string(kGood) + "metrics: {prot: 1}\n", "metrics.prot");
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

TEST(JobConfig, Precision) {
  auto fp32 = LoadJobConfig(WriteJob(kGood));
  ASSERT_TRUE(fp32.ok()) << fp32.status().ToString();
  EXPECT_EQ(fp32->precision, Precision::kFp32);
  auto bf16 = LoadJobConfig(WriteJob(std::string(kGood) + "precision: bf16\n"));
  ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();
  EXPECT_EQ(bf16->precision, Precision::kBf16);
  EXPECT_EQ(bf16->plan.precision, Precision::kBf16);  // the planner prices what trains
  // plan.precision still names another for the planner alone.
  auto what_if =
      LoadJobConfig(WriteJob(std::string(kGood) + "precision: bf16\nplan: {precision: fp32}\n"));
  ASSERT_TRUE(what_if.ok()) << what_if.status().ToString();
  EXPECT_EQ(what_if->precision, Precision::kBf16);
  EXPECT_EQ(what_if->plan.precision, Precision::kFp32);
  ExpectError(std::string(kGood) + "precision: fp16\n",
              "field 'precision': expected fp32 or bf16, got 'fp16'");
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

TEST(JobConfig, LlamaFamily) {
  const std::string llama =
      R"(model: {family: llama, vocab: 128256, max_seq: 8192, layers: 32, heads: 32, hidden: 4096, kv_heads: 8, ffn_hidden: 14336, rope_theta: 500000}
data: {seq: 8192, global_batch: 512}
)";
  auto plan = LoadJobConfig(WriteJob(llama), JobUse::kPlan);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->model.llama());
  EXPECT_EQ(plan->model.kv(), 8);
  EXPECT_EQ(plan->model.ffn(), 14336);
  EXPECT_FALSE(plan->model.tie_embeddings);  // Llama 3's default
  EXPECT_EQ(plan->model.rope_theta, 500000);
  // Trained, in either precision.
  auto train = LoadJobConfig(
      WriteJob(std::string(kGood).replace(0, 8, "model: {family: llama, ") + "precision: bf16\n"),
      JobUse::kTrain);
  ASSERT_TRUE(train.ok()) << train.status().ToString();
  EXPECT_TRUE(train->model.llama());
  EXPECT_EQ(train->precision, Precision::kBf16);
  // GPT-2 has no grouped-query attention; kv_heads must divide heads.
  ExpectError(std::string(kGood).replace(0, 8, "model: {kv_heads: 2, "),
              "field 'model.kv_heads': only with model.family llama");
  ExpectError(std::string(kGood).replace(0, 8, "model: {family: llama, kv_heads: 3, "),
              "field 'model.kv_heads': expected a divisor of model.heads (4), got 3");
  ExpectError(std::string(kGood).replace(0, 8, "model: {family: gpt3, "),
              "field 'model.family': expected gpt2 or llama, got 'gpt3'");
}

TEST(JobConfig, LlamaRopeScaling) {
  // Llama 3.1's: factor 8 over an original 8K context; the band defaults to 1 and 4.
  auto job = LoadJobConfig(
      WriteJob(std::string(kGood).replace(
          0, 8,
          "model: {family: llama, rope_scaling: {type: llama3, factor: 8, original_max_seq: "
          "8192}, ")),
      JobUse::kTrain);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const RopeScaling& r = job->model.rope_scaling;
  EXPECT_TRUE(r.on());
  EXPECT_EQ(r.factor, 8);
  EXPECT_EQ(r.low_freq_factor, 1);
  EXPECT_EQ(r.high_freq_factor, 4);
  EXPECT_EQ(r.original_max_seq, 8192);
  EXPECT_FALSE(LoadJobConfig(WriteJob(kGood), JobUse::kTrain)->model.rope_scaling.on());
  ExpectError(std::string(kGood).replace(0, 8,
                                         "model: {family: llama, rope_scaling: {type: yarn, "
                                         "factor: 4}, "),
              "field 'model.rope_scaling.type': expected llama3 (Llama 3.1's frequency scaling; "
              "linear, dynamic and yarn scaling are not implemented), got 'yarn'");
  ExpectError(
      std::string(kGood).replace(0, 8, "model: {family: llama, rope_scaling: {type: llama3}, "),
      "field 'model.rope_scaling.factor'");
  ExpectError(std::string(kGood).replace(0, 8,
                                         "model: {family: llama, rope_scaling: {type: llama3, "
                                         "factor: 8, low_freq_factor: 4, high_freq_factor: 2}, "),
              "field 'model.rope_scaling.high_freq_factor': rope_scaling: expected 0 < "
              "low_freq_factor < high_freq_factor");
  ExpectError(std::string(kGood).replace(0, 8, "model: {rope_scaling: {type: llama3, factor: 8}, "),
              "field 'model.rope_scaling': only with model.family llama");
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

// A launcher records the user's flags (ApplyOverrides) and hands them to its workers, which mark
// each as set (MarkSetByFlag) and refuse any they do not know: every recorded flag must be known.
TEST(JobOverrides, EveryRecordedFlagIsKnownToTheWorkers) {
  JobOverrides resume;  // the flags that go together (the checkpoint section's rules)
  resume.steps = 5;
  resume.checkpoint_dir = "ck";
  resume.load = "ck/step_00000002";
  resume.no_load_optimizer = true;
  resume.exit_after_minutes = 1.5;
  resume.precision = "bf16";
  JobOverrides fresh;
  fresh.init_from = "weights";
  fresh.no_resume = true;
  std::vector<std::string> flags;
  for (const JobOverrides* o : {&resume, &fresh}) {
    auto job = LoadJobConfig(WriteJob(kGood));
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    ASSERT_TRUE(ApplyOverrides(*o, &*job).ok());
    for (const std::string& arg : job->overrides) flags.push_back(arg.substr(0, arg.find(' ')));
  }
  EXPECT_EQ(flags.size(), 8u);  // every field of JobOverrides
  auto worker = LoadJobConfig(WriteJob(kGood));
  ASSERT_TRUE(worker.ok());
  for (const std::string& flag : flags) EXPECT_TRUE(MarkSetByFlag(flag, &*worker)) << flag;
  EXPECT_FALSE(MarkSetByFlag("--threads", &*worker));
}

}  // namespace
}  // namespace loom
