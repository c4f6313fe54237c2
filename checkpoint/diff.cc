// Comparing two checkpoints tensor by tensor (checkpoint/diff.h).
#include "checkpoint/diff.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "checkpoint/format.h"
#include "checkpoint/reader.h"
#include "core/interrupt.h"
#include "parallel/param_layout.h"

namespace loom {
namespace {

std::string LayoutText(const proto::LayoutSpec& l) {
  return "tp" + std::to_string(l.tp()) + " cp" + std::to_string(l.cp()) + " pp" +
         std::to_string(l.pp()) + " vpp" + std::to_string(l.vpp()) + " dp" +
         std::to_string(l.dp()) + " zero" + std::to_string(l.zero()) + (l.sp() ? " sp" : "");
}

// What a resume takes from the metadata besides the tensors, where the two differ.
std::vector<std::string> MetadataNotes(const proto::CheckpointMetadata& a,
                                       const proto::CheckpointMetadata& b) {
  std::vector<std::string> notes;
  auto note = [&](const std::string& what, const std::string& x, const std::string& y) {
    if (x != y) notes.push_back(what + ": " + x + " vs " + y);
  };
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.9g", v);
    return std::string(buf);
  };
  note("step", std::to_string(a.step()), std::to_string(b.step()));
  note("saved layout", LayoutText(a.saved_layout()), LayoutText(b.saved_layout()));
  const proto::OptimizerState &oa = a.optimizer(), &ob = b.optimizer();
  note("optimizer step count", std::to_string(oa.step_count()), std::to_string(ob.step_count()));
  note("optimizer lr", num(oa.lr()), num(ob.lr()));
  note("optimizer betas", num(oa.beta1()) + ", " + num(oa.beta2()),
       num(ob.beta1()) + ", " + num(ob.beta2()));
  note("optimizer weight_decay", num(oa.weight_decay()), num(ob.weight_decay()));
  note("consumed samples", std::to_string(a.data().consumed_samples()),
       std::to_string(b.data().consumed_samples()));
  note("data seed", std::to_string(a.data().seed()), std::to_string(b.data().seed()));
  return notes;
}

}  // namespace

Result<DiffReport> DiffCheckpoints(const std::string& a_path, const std::string& b_path,
                                   double rtol, double atol) {
  DiffReport out;
  LOOM_ASSIGN_OR_RETURN(out.a, ResolveCheckpointDir(a_path));
  LOOM_ASSIGN_OR_RETURN(out.b, ResolveCheckpointDir(b_path));
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> ra, CheckpointReader::Open(out.a));
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> rb, CheckpointReader::Open(out.b));
  const proto::ModelSpec &ma = ra->meta().model(), &mb = rb->meta().model();
  const std::pair<const char*, std::pair<int64_t, int64_t>> fields[] = {
      {"vocab", {ma.vocab(), mb.vocab()}},    {"max_seq", {ma.max_seq(), mb.max_seq()}},
      {"layers", {ma.layers(), mb.layers()}}, {"heads", {ma.heads(), mb.heads()}},
      {"hidden", {ma.hidden(), mb.hidden()}},
  };
  for (const auto& [name, v] : fields) {
    if (v.first != v.second) {
      return InvalidArgument(JoinPath(out.b, kMetadataFile) + ": field 'model." + name + "' is " +
                             std::to_string(v.second) + ", but " + out.a + " has " +
                             std::to_string(v.first) + ": different models cannot be compared");
    }
  }
  out.notes = MetadataNotes(ra->meta(), rb->meta());
  const ParamLayout canonical =
      ParamLayout::ForModel({ma.vocab(), ma.max_seq(), ma.layers(), ma.heads(), ma.hidden()}, 1);
  std::vector<float> va, vb;
  for (const ParamInfo& p : canonical.params) {
    for (int s = 0; s < kNumStates; ++s) {
      LOOM_RETURN_IF_ERROR(CheckInterrupted("the comparison"));
      const StateKind state = static_cast<StateKind>(s);
      const Region r = WholeRegion(p);
      va.resize(static_cast<size_t>(r.flat_end));
      vb.resize(static_cast<size_t>(r.flat_end));
      LOOM_RETURN_IF_ERROR(ra->Read(p.name, state, r, va.data()));
      LOOM_RETURN_IF_ERROR(rb->Read(p.name, state, r, vb.data()));
      StateDiff d;
      d.tensor = p.name;
      d.state = state;
      d.elements = static_cast<int64_t>(va.size());
      if (std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)) != 0) {
        for (size_t i = 0; i < va.size(); ++i) {
          if (std::memcmp(&va[i], &vb[i], sizeof(float)) == 0) continue;
          ++d.differing;
          const double x = va[i], y = vb[i];
          const double diff = std::isnan(x) || std::isnan(y) ? INFINITY : std::fabs(x - y);
          if (!(diff <= atol + rtol * std::fabs(y))) ++d.beyond_tol;
          const double scale = std::max(std::fabs(x), std::fabs(y));
          const double rel = scale > 0 ? diff / scale : diff;
          if (d.worst < 0 || diff > d.max_abs) {
            d.max_abs = diff;
            d.worst = static_cast<int64_t>(i);
          }
          d.max_rel = std::max(d.max_rel, rel);
        }
      }
      out.elements += d.elements;
      out.differing += d.differing;
      out.beyond_tol += d.beyond_tol;
      out.states.push_back(std::move(d));
    }
  }
  return out;
}

}  // namespace loom
