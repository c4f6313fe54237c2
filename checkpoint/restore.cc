// The restore protocol: candidates agreed by broadcast, the newest every rank loads, set aside.
#include "checkpoint/restore.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "checkpoint/format.h"
#include "checkpoint/import.h"
#include "core/file_util.h"
#include "core/logging.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

// The step directory of `step` among `source`'s candidates. A step directory is loaded as named,
// whatever its name (a copy such as `final/` holds the step its metadata says; a root's
// step_<N> directories are found by their steps).
std::string DirOf(const std::string& source, int64_t step) {
  return IsStepDir(source) ? source : JoinPath(RootOf(source), StepDirName(step));
}

// Rank 0's view of the steps under `source`, newest first; `listed` gets its error.
std::vector<int64_t> ListSteps(const std::string& source, const std::string& where,
                               Status* listed) {
  std::vector<int64_t> steps;
  if (IsTemporaryName(source)) {
    *listed = CheckNotTemporary(source).WithContext(where);
  } else if (IsStepDir(source)) {
    Result<proto::CheckpointMetadata> m = ReadMetadata(source);
    if (m.ok()) steps.push_back(m->step());
    if (!m.ok()) *listed = m.status();
  } else {
    for (const auto& [step, dir] : ListCheckpoints(source)) steps.push_back(step);
  }
  return steps;
}

}  // namespace

std::string RootOf(const std::string& source) {
  if (!IsStepDir(source)) return source;
  // "ck/step_6/" names the step directory too: its parent is ck, not ck/step_6.
  const std::string parent = fs::path(NormalPath(source)).parent_path().string();
  return parent.empty() ? "." : parent;
}

RestoreProtocol::RestoreProtocol(int world_rank, Communicator* world)
    : rank_(world_rank), world_(world), vote_(world) {}

Result<std::vector<int64_t>> RestoreProtocol::Candidates(const std::string& source, bool required,
                                                         const std::string& where) {
  // The candidates, newest first, as world rank 0 sees them: every rank tries the same steps in
  // the same order even if its view of the directory differs (a rank that cannot read one
  // refuses it, and all fall back together).
  // Only rank 0 looks, and a failure there still goes through the broadcast: the other ranks are
  // waiting in it.
  std::vector<int64_t> steps;
  Status listed;
  if (rank_ == 0) steps = ListSteps(source, where, &listed);
  LOOM_RETURN_IF_ERROR(AgreeOnSteps(&steps, listed));
  if (steps.empty() && required) {
    // Weights from elsewhere (a Hugging Face file or directory, an export) are not a checkpoint
    // yet: say how to make one.
    const bool weights = HoldsWeights(source);
    return NotFound(
        where + ": no checkpoint in '" + source + "' (expected a step directory with " +
        kMetadataFile + " or a directory holding step_<N> ones)" +
        (weights ? "; for weights in a safetensors file, make a checkpoint first: loom ckpt "
                   "import FILE OUT, then use OUT"
                 : ""));
  }
  return steps;
}

Status RestoreProtocol::AgreeOnSteps(std::vector<int64_t>* steps, const Status& listed) {
  if (world_ == nullptr) return listed;
  // Rank 0's list: its length (-1: rank 0 could not list them), then each step as two floats,
  // step / 2^24 and step % 2^24, each exact (floats hold integers exactly up to 2^24).
  constexpr size_t kMax = 4096;
  constexpr int64_t kHalf = int64_t{1} << 24;
  std::vector<float> agreed(2 * kMax + 1, 0.0f);
  if (rank_ == 0) {
    const size_t n = std::min(kMax, steps->size());
    agreed[0] = listed.ok() ? static_cast<float>(n) : -1.0f;
    for (size_t i = 0; i < n; ++i) {
      agreed[2 * i + 1] = static_cast<float>((*steps)[i] / kHalf);
      agreed[2 * i + 2] = static_cast<float>((*steps)[i] % kHalf);
    }
  }
  LOOM_RETURN_IF_ERROR(vote_.Broadcast(&agreed));
  if (agreed[0] < 0) {
    return rank_ == 0 ? listed
                      : DataLoss(
                            "world rank 0 could not read the checkpoint to load (its "
                            "error names the file)");
  }
  steps->clear();
  for (size_t i = 0; i < static_cast<size_t>(agreed[0]); ++i) {
    steps->push_back(static_cast<int64_t>(agreed[2 * i + 1]) * kHalf +
                     static_cast<int64_t>(agreed[2 * i + 2]));
  }
  return Status::Ok();
}

Result<RestoreChoice> RestoreProtocol::LoadNewest(const std::string& source,
                                                  const std::vector<int64_t>& steps,
                                                  const std::string& where,
                                                  const LoadCheckpoint& load) {
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string dir = DirOf(source, steps[i]);
    int64_t step = 0;
    Status st = load(dir, &step);
    LOOM_ASSIGN_OR_RETURN(int failed, vote_.Max(st.ok() ? 0 : 1));
    if (failed == 0) return RestoreChoice{dir, step, i};
    if (!st.ok()) {
      LOOM_LOG(ERROR, CKPT) << "checkpoint " << dir << " refused: " << ForUser(st, LogSubsys::CKPT);
    }
    if (rank_ == 0) {
      LOOM_LOG(WARN, CKPT) << "checkpoint " << dir << " cannot be loaded"
                           << (i + 1 < steps.size() ? "; falling back to the previous one, " +
                                                          DirOf(source, steps[i + 1])
                                                    : std::string("; no older checkpoint left"));
    }
  }
  std::string tried;
  for (int64_t s : steps) tried += (tried.empty() ? "" : ", ") + DirOf(source, s);
  return DataLoss(where + ": no valid checkpoint in '" + source + "' (tried " + tried +
                  "; the reasons are logged above)");
}

void RestoreProtocol::WarnIfLatestDiffers(const std::string& root,
                                          const RestoreChoice& choice) const {
  // `latest` edited to go back (as DeepSpeed's and Megatron's tracker files are) is not how
  // Loom chooses: it resumes the newest complete checkpoint. Say so, and how.
  std::error_code ec;
  const std::string latest = ReadLatest(root);
  if (choice.index == 0 && !latest.empty() && latest != StepDirName(choice.step) &&
      fs::is_directory(JoinPath(root, latest), ec)) {
    LOOM_LOG(WARN, CKPT) << JoinPath(root, kLatestFile) << " names " << latest
                         << ", not the newest complete checkpoint (a save cut short "
                            "before updating it, or it was edited): resumed from "
                         << choice.dir << "; to go back to " << latest << ": --load "
                         << JoinPath(root, latest);
  }
}

Status RestoreProtocol::Settle(const std::string& source, const std::vector<int64_t>& steps,
                               const RestoreChoice& choice, bool set_aside) {
  const std::string root = RootOf(source);
  Status aside;
  if (rank_ == 0) {
    if (!IsStepDir(source)) WarnIfLatestDiffers(root, choice);
    // Checkpoints newer than this one belong to a run that is not continued (or were refused):
    // keep them, but where they can neither be loaded nor replaced piecemeal.
    if (set_aside) {
      aside = SetAsideNewer(root, choice.step,
                            std::vector<int64_t>(steps.begin(), steps.begin() + choice.index));
    }
  }
  if (!set_aside) return Status::Ok();
  LOOM_ASSIGN_OR_RETURN(int aside_failed, vote_.Max(aside.ok() ? 0 : 1));
  if (!aside.ok()) return aside;
  if (aside_failed != 0) {
    return FailedPrecondition("world rank 0 could not set aside the checkpoints newer than " +
                              choice.dir + " (its error names them)");
  }
  return Status::Ok();
}

Status RestoreProtocol::SetAsideNewer(const std::string& root, int64_t loaded,
                                      const std::vector<int64_t>& refused) const {
  std::error_code ec;
  bool moved = false;
  for (const auto& [step, dir] : ListCheckpoints(root)) {
    if (step <= loaded) continue;
    const bool was_refused = std::find(refused.begin(), refused.end(), step) != refused.end();
    // Never over an earlier one (the same step may be refused again in a later run).
    std::string aside = dir + (was_refused ? ".refused" : ".abandoned");
    for (int n = 2; fs::exists(aside, ec) && n < 1000; ++n) {
      aside = dir + (was_refused ? ".refused." : ".abandoned.") + std::to_string(n);
    }
    if (::rename(dir.c_str(), aside.c_str()) != 0) {
      // Left in place it would be resumed by the next restart, mixing two runs.
      return ErrnoError("set aside " + dir + " (newer than the checkpoint resumed from, step " +
                            std::to_string(loaded) + ") as " + aside,
                        errno);
    }
    moved = true;
    LOOM_LOG(WARN, CKPT) << "moved " << dir << " to " << aside
                         << (was_refused ? " (it could not be loaded)"
                                         : " (newer than the checkpoint resumed from)");
  }
  LOOM_RETURN_IF_ERROR(FsyncDir(root));
  // `latest` named one of them: it names the resumed checkpoint until the next save.
  if (moved) {
    LOOM_RETURN_IF_ERROR(WriteFileAtomic(JoinPath(root, kLatestFile), StepDirName(loaded) + "\n"));
  }
  return Status::Ok();
}

}  // namespace loom
