// Choosing the snapshot to restore and the source of every piece of it.
#include "fault/snapshot/recovery_plan.h"

#include <algorithm>
#include <map>
#include <set>

namespace loom {
namespace {

bool AllTrue(const std::vector<bool>& v) {
  return std::all_of(v.begin(), v.end(), [](bool b) { return b; });
}

// The reports of one step, by old rank (several holders may report one segment: the first).
using StepIndex = std::map<int, const SlotReport*>;

struct Member {
  int group = -1, index = -1;
};

class Chooser {
 public:
  Chooser(const SnapshotOrigin& o, int new_world) : o_(o), new_world_(new_world) {
    member_.assign(static_cast<size_t>(o.world), Member{});
    for (size_t g = 0; g < o.groups.size(); ++g) {
      for (size_t i = 0; i < o.groups[g].size(); ++i) {
        const int r = o.groups[g][i];
        if (r >= 0 && r < o.world) member_[r] = {static_cast<int>(g), static_cast<int>(i)};
      }
    }
  }

  // Fills `out` for `step`, or says why it cannot.
  Status At(int64_t step, const StepIndex& at, RecoveryChoice* out) const {
    out->step = step;
    out->images.clear();
    out->rebuilt = 0;
    for (int x = 0; x < o_.world; ++x) {
      ImageSource img;
      img.old_rank = x;
      LOOM_RETURN_IF_ERROR(Image(x, step, at, &img));
      out->rebuilt += img.rebuilt ? 1 : 0;
      out->images.push_back(std::move(img));
    }
    return Status::Ok();
  }

 private:
  const SlotReport* Find(const StepIndex& at, int old_rank) const {
    auto it = at.find(old_rank);
    return it == at.end() ? nullptr : it->second;
  }

  std::string Node(int x) const {
    return x < static_cast<int>(o_.rank_node.size()) ? o_.rank_node[x] : "?";
  }

  Status Image(int x, int64_t step, const StepIndex& at, ImageSource* img) const {
    const int k = std::max(1, o_.code.k);
    const SlotReport* mine = Find(at, x);
    img->pieces.assign(static_cast<size_t>(k), PieceSource{});
    if (mine != nullptr) img->image_bytes = mine->image_bytes;
    if (mine != nullptr && AllTrue(mine->piece_ok)) {
      for (PieceSource& p : img->pieces) {
        p.holder = mine->holder;
        p.slot = mine->slot;
      }
      return Status::Ok();
    }
    const std::string who = "old rank " + std::to_string(x) + " (node " + Node(x) + ")";
    const std::string state = mine == nullptr
                                  ? "its snapshot memory is gone"
                                  : "its snapshot of step " + std::to_string(step) +
                                        " fails its digests";
    if (o_.code.m == 0) {
      return FailedPrecondition(who + ": " + state +
                                ", and snapshots are not erasure-coded (one node)");
    }
    const Member mb = member_[x];
    if (mb.group < 0) return FailedPrecondition(who + " is in no stripe group");
    LOOM_ASSIGN_OR_RETURN(
        const StripeLayout s,
        StripeLayout::Create(static_cast<int>(o_.groups[mb.group].size()), o_.code.k, o_.code.m));
    const std::vector<int>& ranks = o_.groups[mb.group];
    img->rebuilt = true;
    for (int t = 0; t < k; ++t) {
      PieceSource& p = img->pieces[t];
      if (mine != nullptr && mine->piece_ok[t]) {
        p.holder = mine->holder;
        p.slot = mine->slot;
        continue;
      }
      p.local = false;
      p.row = s.RowOfPiece(mb.index, t);
      for (int f = 0; f < k + o_.code.m && static_cast<int>(p.fragments.size()) < k; ++f) {
        const bool parity = f >= k;
        const int holder_member = parity ? s.ParityMember(p.row, f - k) : s.DataMember(p.row, f);
        const SlotReport* r = Find(at, ranks[holder_member]);
        if (r == nullptr) continue;
        const bool ok = parity ? r->parity_ok[f - k] && r->parities[f - k].row == p.row
                               : r->piece_ok[f];
        if (!ok) continue;
        p.fragments.push_back({f, r->holder, r->old_rank, r->slot, parity});
        if (parity && p.manifest.empty()) p.manifest = r->parities[f - k].crcs;
      }
      if (p.manifest.empty()) {  // a manifest from any intact parity of the row
        for (int q = 0; q < o_.code.m; ++q) {
          const SlotReport* r = Find(at, ranks[s.ParityMember(p.row, q)]);
          if (r != nullptr && r->parity_ok[q] && r->parities[q].row == p.row) {
            p.manifest = r->parities[q].crcs;
            break;
          }
        }
      }
      if (static_cast<int>(p.fragments.size()) < k || p.manifest.empty()) {
        return FailedPrecondition(
            who + ": " + state + ", and row " + std::to_string(p.row) + " of stripe group " +
            std::to_string(mb.group) + " has " + std::to_string(p.fragments.size()) + " of the " +
            std::to_string(k) + " intact fragments a rebuild needs (" + o_.code.ToString() +
            " survives " + std::to_string(o_.code.m) + " lost node(s) per group)");
      }
    }
    // The image size: a surviving report, else the parity holders cannot tell; rebuilt images
    // are trimmed by the caller from the layout (which knows every rank's image size).
    img->rebuilder = x % new_world_;
    return Status::Ok();
  }

  const SnapshotOrigin& o_;
  const int new_world_;
  std::vector<Member> member_;
};

}  // namespace

std::string RecoveryChoice::Describe() const {
  const int local = static_cast<int>(images.size()) - rebuilt;
  return "step " + std::to_string(step) + ": " + std::to_string(local) + " image" +
         (local == 1 ? "" : "s") + " from local memory" +
         (rebuilt > 0 ? ", " + std::to_string(rebuilt) + " rebuilt by erasure decoding" : "");
}

Result<RecoveryChoice> ChooseRecovery(const SnapshotOrigin& origin,
                                      const std::vector<SlotReport>& reports, int new_world) {
  if (new_world < 1 || origin.world < 1) return InvalidArgument("recovery: empty world");
  std::map<int64_t, StepIndex, std::greater<>> by_step;
  for (const SlotReport& r : reports) {
    if (r.state < SlotState::kSealed || r.step < 0) continue;
    by_step[r.step].emplace(r.old_rank, &r);
  }
  if (by_step.empty()) {
    return FailedPrecondition("no sealed snapshot in any node's memory");
  }
  const Chooser chooser(origin, new_world);
  Status newest;
  for (const auto& [step, at] : by_step) {
    RecoveryChoice c;
    Status st = chooser.At(step, at, &c);
    if (st.ok()) return c;
    if (newest.ok()) newest = st.WithContext("snapshot of step " + std::to_string(step));
  }
  return newest;
}

}  // namespace loom
