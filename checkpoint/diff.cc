// Comparing two checkpoints tensor by tensor (checkpoint/diff.h).
#include "checkpoint/diff.h"
#include "checkpoint/metadata_specs.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

#include "checkpoint/format.h"
#include "checkpoint/reader.h"
#include "core/interrupt.h"
#include "model/layout.h"
#include "parallel/param_layout.h"

namespace loom {
namespace {

// A scalar field's value as text (repeated and message fields are not in these messages).
std::string FieldText(const google::protobuf::Message& m,
                      const google::protobuf::FieldDescriptor* f) {
  using FD = google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* r = m.GetReflection();
  char buf[40];
  switch (f->cpp_type()) {
    case FD::CPPTYPE_INT32:
      return std::to_string(r->GetInt32(m, f));
    case FD::CPPTYPE_INT64:
      return std::to_string(r->GetInt64(m, f));
    case FD::CPPTYPE_UINT32:
      return std::to_string(r->GetUInt32(m, f));
    case FD::CPPTYPE_UINT64:
      return std::to_string(r->GetUInt64(m, f));
    case FD::CPPTYPE_BOOL:
      return r->GetBool(m, f) ? "true" : "false";
    case FD::CPPTYPE_STRING:
      return "'" + r->GetString(m, f) + "'";
    case FD::CPPTYPE_DOUBLE:
      std::snprintf(buf, sizeof(buf), "%.9g", r->GetDouble(m, f));
      return buf;
    case FD::CPPTYPE_FLOAT:
      std::snprintf(buf, sizeof(buf), "%.9g", static_cast<double>(r->GetFloat(m, f)));
      return buf;
    default:
      return "(" + std::string(f->type_name()) + ")";
  }
}

// Every scalar field of `a` and `b` (one message type) that differs, as "prefix.field: x vs y"
// ("field: x vs y" without a prefix), but `skip`.
void NoteFields(const std::string& prefix, const google::protobuf::Message& a,
                const google::protobuf::Message& b, std::vector<std::string>* notes,
                const std::string& skip = "") {
  const google::protobuf::Descriptor* d = a.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    if (f->is_repeated() || f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE ||
        f->name() == skip) {
      continue;
    }
    const std::string x = FieldText(a, f), y = FieldText(b, f);
    if (x != y) {
      notes->push_back((prefix.empty() ? "" : prefix + ".") + f->name() + ": " + x + " vs " + y);
    }
  }
}

}  // namespace

double RelativeNorm(const StateDiff& d) {
  if (d.diff_sq == 0) return 0;
  if (d.ref_sq == 0 || !std::isfinite(d.ref_sq)) return std::numeric_limits<double>::infinity();
  return std::sqrt(d.diff_sq / d.ref_sq);  // infinity when diff_sq is
}

void CompareValues(const float* a, const float* b, int64_t n, double rtol, double atol,
                   StateDiff* d) {
  // B's norm counts every element, those equal in A too: it is the scale the differences are
  // measured against.
  for (int64_t i = 0; i < n; ++i) {
    if (std::isfinite(b[i])) d->ref_sq += static_cast<double>(b[i]) * b[i];
  }
  if (std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0) return;
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) == 0) continue;
    ++d->differing;
    const double x = a[i], y = b[i];
    double diff;
    if (std::isnan(x) || std::isnan(y)) {
      diff = std::isnan(x) && std::isnan(y) ? 0 : inf;
    } else if (x == y) {
      diff = 0;  // -0.0 and 0.0
    } else {
      diff = std::isinf(x) || std::isinf(y) ? inf : std::fabs(x - y);
    }
    if (diff == 0) continue;  // the same value in other bits
    ++d->unequal;
    if (!(diff <= atol + rtol * std::fabs(y))) ++d->beyond_tol;
    d->diff_sq += diff * diff;
    if (d->worst < 0 || diff > d->max_abs) {
      d->max_abs = diff;
      d->worst = i;
    }
  }
}

Result<DiffReport> DiffCheckpoints(const std::string& a_path, const std::string& b_path,
                                   double rtol, double atol, bool weights_only) {
  DiffReport out;
  LOOM_ASSIGN_OR_RETURN(out.a, ResolveCheckpointDir(a_path));
  LOOM_ASSIGN_OR_RETURN(out.b, ResolveCheckpointDir(b_path));
  LOOM_RETURN_IF_ERROR(CheckNotTemporary(out.a));
  LOOM_RETURN_IF_ERROR(CheckNotTemporary(out.b));
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> ra, CheckpointReader::Open(out.a));
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> rb, CheckpointReader::Open(out.b));
  const proto::CheckpointMetadata &meta_a = ra->meta(), &meta_b = rb->meta();
  const proto::ModelSpec &ma = meta_a.model(), &mb = meta_b.model();
  std::vector<std::string> model_notes;
  NoteFields("model", ma, mb, &model_notes);
  if (!model_notes.empty()) {
    std::string list;
    for (const std::string& n : model_notes) list += (list.empty() ? "" : "; ") + n;
    return InvalidArgument(out.a + " and " + out.b + " hold different models (" + list +
                           "): their tensors cannot be compared");
  }
  out.a_imported = IsImportedCheckpoint(meta_a);
  out.b_imported = IsImportedCheckpoint(meta_b);
  // The top level's scalars (step, format version, block size), not the file's own checksum.
  NoteFields("", meta_a, meta_b, &out.notes, "metadata_crc32c");
  NoteFields("saved_layout", meta_a.saved_layout(), meta_b.saved_layout(), &out.notes);
  if (!out.a_imported && !out.b_imported) {  // an imported checkpoint has no training state
    NoteFields("optimizer", meta_a.optimizer(), meta_b.optimizer(), &out.notes);
    NoteFields("data", meta_a.data(), meta_b.data(), &out.notes);
    NoteFields("rng", meta_a.rng(), meta_b.rng(), &out.notes);
  }
  const ParamLayout canonical = ModelLayout(ModelOf(ma), 1);
  std::vector<float> va, vb;
  for (const ParamInfo& p : canonical.params) {
    for (int s = 0; s < (weights_only ? 1 : kNumStates); ++s) {
      LOOM_RETURN_IF_ERROR(CheckInterrupted("the checkpoints", /*writing=*/false));
      const StateKind state = static_cast<StateKind>(s);
      const Region r = WholeRegion(p);
      va.resize(static_cast<size_t>(r.flat_end));
      vb.resize(static_cast<size_t>(r.flat_end));
      LOOM_RETURN_IF_ERROR(ra->Read(p.name, state, r, va.data()));
      LOOM_RETURN_IF_ERROR(rb->Read(p.name, state, r, vb.data()));
      StateDiff d;
      d.tensor = p.name;
      d.state = state;
      d.rows = r.rows;
      d.cols = r.cols;
      d.elements = static_cast<int64_t>(va.size());
      CompareValues(va.data(), vb.data(), d.elements, rtol, atol, &d);
      out.elements += d.elements;
      out.differing += d.differing;
      out.unequal += d.unequal;
      out.beyond_tol += d.beyond_tol;
      out.states.push_back(std::move(d));
    }
  }
  return out;
}

}  // namespace loom
