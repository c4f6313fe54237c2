// The per-call trace of a real 4-rank job (run under mpirun -np 4): a Trainer with tp = 2 and
// pp = 2, so that every step has collectives (tensor-parallel layers, loss, gradient norm) and
// point-to-point transfers (activations and gradients between the stages, the tied embedding).
// Each step's read of the trace through the worker's cursor must hold every call with its peer
// and its times, sequence numbers per group contiguous and the same on both members of a group,
// and the per-(op, group) summaries computed from the records must equal those the worker
// computed before the per-call trace (its algorithm is kept below as the reference).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "comm/backend.h"
#include "core/threads.h"
#include "parallel/process_groups.h"
#include "tests/mpi_test_main.h"
#include "worker/trainer.h"

namespace loom {
namespace {

// The worker's summaries before the per-call trace (cli/worker_command.cc): the records of the
// ring that finished after *since_ns, summed per (op, group); *since_ns moves to the newest end.
std::vector<CommSummary> OldSummaries(const std::vector<TraceRecord>& ring, int64_t* since_ns) {
  std::map<std::pair<std::string, std::string>, CommSummary> sums;
  int64_t newest = *since_ns;
  for (const TraceRecord& r : ring) {
    if (r.end_ns <= *since_ns) continue;
    newest = std::max(newest, r.end_ns);
    CommSummary& s = sums[{CommOpName(r.op), r.group}];
    s.op = CommOpName(r.op);
    s.group = r.group;
    s.count = s.count + 1;
    s.bytes = s.bytes + r.bytes;
    const double busy = static_cast<double>(r.end_ns - r.start_ns) * 1e-9;
    s.busy_s = s.busy_s + busy;
    s.wait_s = s.wait_s + static_cast<double>(r.wait_ns) * 1e-9;
    s.max_s = std::max(s.max_s, busy);
  }
  *since_ns = newest;
  std::vector<CommSummary> out;
  for (auto& [key, s] : sums) out.push_back(s);
  return out;
}

JobConfig Job() {
  JobConfig job;
  job.path = "step_trace_test";
  job.model = {257, 64, 4, 4, 32};
  job.data.text = LOOM_SOURCE_DIR "/data/tinyshakespeare.txt";
  job.data.val_fraction = 0;
  job.data.seq = 32;
  job.data.global_batch = 4;
  job.data.micro_batch = 1;
  job.steps = 3;
  job.optim.lr = 1e-3;
  return job;
}

// Transfers of this rank's pipeline program, plus the tied embedding's (wte to the last stage,
// its gradient back): every one of them must be in the step's trace.
int ScheduledTransfers(const Schedule& s, int pp_rank, bool send) {
  int n = 1;
  for (const Instr& in : s.ranks[static_cast<size_t>(pp_rank)]) {
    const bool is_send = in.kind == InstrKind::kSendAct || in.kind == InstrKind::kSendGrad;
    const bool is_recv = in.kind == InstrKind::kRecvAct || in.kind == InstrKind::kRecvGrad;
    n += send ? is_send : is_recv;
  }
  return n;
}

// A digest of the (seq, op, bytes) of one group's calls, equal on the members of a group whose
// calls are all collectives.
float Digest(const std::vector<TraceRecord>& recs, const std::string& group) {
  double d = 0;
  for (const TraceRecord& r : recs) {
    if (r.group == group)
      d += static_cast<double>(r.seq + 1) * (static_cast<int>(r.op) + 1) +
           static_cast<double>(r.bytes % 9973);
  }
  return static_cast<float>(d);
}

TEST(StepTrace, EveryCallWithPeerAndTimesAndTheOldSums) {
  Backend& b = testing::Mpi();
  ASSERT_EQ(b.world_size(), 4);
  ConfigureThreads(1);
  const Layout layout{.tp = 2, .pp = 2};
  const JobConfig job = Job();
  ASSERT_TRUE(layout
                  .Validate(4, {job.model.heads, job.model.layers, job.model.vocab, job.data.seq,
                                job.model.hidden, job.data.global_batch, job.data.micro_batch})
                  .ok());
  TraceCursor cursor = b.trace().End();
  int64_t since_ns = NowNs();
  auto place = ProcessGroups::Create(b, layout);
  ASSERT_TRUE(place.ok()) << place.status().ToString();
  const std::map<std::string, Communicator*> groups{
      {"world", place->world}, {"tp", place->tp}, {"pp", place->pp}};
  auto trainer = Trainer::Create(job, *place);
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  std::map<std::string, std::vector<uint64_t>> seqs;  // per group, over every read
  for (int step = 0; step <= 3; ++step) {
    if (step > 0) {  // read 0: the set-up's calls
      ASSERT_TRUE((*trainer)->Step(step - 1).ok());
    }
    const TraceRead read = b.trace().Read(&cursor);
    EXPECT_EQ(read.lost, 0u);
    EXPECT_TRUE(read.open.empty()) << read.open.size() << " calls still open after step " << step;
    std::map<CommOp, int> ops;
    for (const TraceRecord& r : read.records) {
      ASSERT_TRUE(groups.count(r.group)) << r.group;
      const std::vector<int>& members = groups.at(r.group)->members();
      EXPECT_LE(r.enqueue_ns, r.start_ns);
      EXPECT_LE(r.start_ns, r.end_ns);
      EXPECT_GT(r.end_ns, 0);
      EXPECT_EQ(r.dtype, DType::kF32);
      if (r.op == CommOp::kSend || r.op == CommOp::kRecv || r.op == CommOp::kBroadcast) {
        EXPECT_NE(std::find(members.begin(), members.end(), r.peer), members.end()) << r.peer;
        if (r.op != CommOp::kBroadcast) {
          EXPECT_NE(r.peer, b.world_rank());
          EXPECT_GE(r.tag, 0);
        }
      } else {
        EXPECT_EQ(r.peer, -1);
        EXPECT_EQ(r.tag, -1);
      }
      if (r.op != CommOp::kBarrier) {
        EXPECT_GT(r.bytes, 0);
      }
      seqs[r.group].push_back(r.seq);
      ++ops[r.op];
    }
    if (step > 0) {
      const int pp_rank = place->pp->rank();
      EXPECT_EQ(ops[CommOp::kSend], ScheduledTransfers((*trainer)->schedule(), pp_rank, true));
      EXPECT_EQ(ops[CommOp::kRecv], ScheduledTransfers((*trainer)->schedule(), pp_rank, false));
      EXPECT_GT(ops[CommOp::kAllReduce], 0);
    }
    // The sums from the records equal the old summaries, field by field.
    const std::vector<CommSummary> now = SummariseCalls(read.records);
    const std::vector<CommSummary> old = OldSummaries(b.trace().Snapshot(), &since_ns);
    ASSERT_EQ(now.size(), old.size()) << "step " << step;
    for (size_t i = 0; i < now.size(); ++i) {
      EXPECT_EQ(now[i].op, old[i].op);
      EXPECT_EQ(now[i].group, old[i].group);
      EXPECT_EQ(now[i].count, old[i].count) << now[i].op << " " << now[i].group;
      EXPECT_EQ(now[i].bytes, old[i].bytes);
      EXPECT_EQ(now[i].busy_s, old[i].busy_s);
      EXPECT_EQ(now[i].wait_s, old[i].wait_s);
      EXPECT_EQ(now[i].max_s, old[i].max_s);
    }
    // Both members of a tensor-parallel group made the same collectives in this step.
    std::vector<float> digests(2), mine{Digest(read.records, "tp")};
    ASSERT_TRUE(place->tp->AllGather(mine.data(), digests.data(), 1).ok());
    EXPECT_EQ(digests[0], digests[1]) << "step " << step;
    // The digest's all_gather is not the step's: both readers pass it.
    for (const TraceRecord& r : b.trace().Read(&cursor).records) seqs[r.group].push_back(r.seq);
    (void)OldSummaries(b.trace().Snapshot(), &since_ns);
  }
  for (auto& [group, list] : seqs) {
    std::sort(list.begin(), list.end());
    EXPECT_EQ(list.front(), 0u) << group;
    for (size_t i = 1; i < list.size(); ++i) {
      EXPECT_EQ(list[i], list[i - 1] + 1) << group;  // contiguous, each call once
    }
  }
}

}  // namespace
}  // namespace loom
