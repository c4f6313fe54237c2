// JSON lines of a run's records (nlohmann::json), and back.
#include "coordinator/metrics/run_record.h"

#include <nlohmann/json.hpp>
#include <sstream>

namespace loom {
namespace {

using nlohmann::json;

json PlanJson(const PlanRecord& r) {
  json ranks = json::array();
  for (const RankPlace& p : r.ranks) {
    ranks.push_back({{"rank", p.rank},
                     {"node", p.node},
                     {"host", p.host},
                     {"device", p.device},
                     {"tp", p.tp},
                     {"cp", p.cp},
                     {"pp", p.pp},
                     {"dp", p.dp}});
  }
  return {{"kind", "plan"},
          {"epoch", r.epoch},
          {"t", r.t},
          {"job", r.job},
          {"tp", r.tp},
          {"cp", r.cp},
          {"pp", r.pp},
          {"vpp", r.vpp},
          {"dp", r.dp},
          {"zero", r.zero},
          {"schedule", r.schedule},
          {"steps", r.steps},
          {"tokens_per_step", r.tokens_per_step},
          {"precision", r.precision},
          {"predicted_step_s", r.predicted_step_s},
          {"ranks", ranks}};
}

json StepJson(const StepRecord& r) {
  return {{"kind", "step"},
          {"step", r.step},
          {"epoch", r.epoch},
          {"t", r.t},
          {"loss", r.loss},
          {"step_s", r.step_s},
          {"tokens_per_s", r.tokens_per_s},
          {"mfu", r.mfu},
          {"rank_step_s", r.rank_step_s},
          {"rank_wait_s", r.rank_wait_s},
          {"comm_s", r.comm_s},
          {"exposed_s", r.exposed_s},
          {"snapshot_step", r.snapshot_step},
          {"checkpoint_step", r.checkpoint_step}};
}

json EventJson(const EventRecord& r) {
  return {{"kind", "event"},  {"t", r.t},       {"step", r.step},
          {"epoch", r.epoch}, {"type", r.kind}, {"text", r.text}};
}

// Reads field `name` of `j` into `out`; a missing or mistyped field is an error naming it.
template <typename T>
Status Field(const json& j, const char* name, T* out, const std::string& where) {
  auto it = j.find(name);
  if (it == j.end()) return InvalidArgument(where + ": field '" + name + "' is missing");
  try {
    *out = it->template get<T>();
  } catch (const json::exception&) {
    return InvalidArgument(where + ": field '" + name + "' has the wrong type (" +
                           std::string(it->type_name()) + ")");
  }
  return Status::Ok();
}

Status ParsePlan(const json& j, const std::string& where, PlanRecord* r) {
  LOOM_RETURN_IF_ERROR(Field(j, "epoch", &r->epoch, where));
  LOOM_RETURN_IF_ERROR(Field(j, "t", &r->t, where));
  LOOM_RETURN_IF_ERROR(Field(j, "job", &r->job, where));
  for (auto [name, v] : {std::pair<const char*, int*>{"tp", &r->tp},
                         {"cp", &r->cp},
                         {"pp", &r->pp},
                         {"vpp", &r->vpp},
                         {"dp", &r->dp},
                         {"zero", &r->zero}}) {
    LOOM_RETURN_IF_ERROR(Field(j, name, v, where));
  }
  LOOM_RETURN_IF_ERROR(Field(j, "schedule", &r->schedule, where));
  LOOM_RETURN_IF_ERROR(Field(j, "steps", &r->steps, where));
  LOOM_RETURN_IF_ERROR(Field(j, "tokens_per_step", &r->tokens_per_step, where));
  if (j.contains("precision")) {  // absent in a series written before it: fp32
    LOOM_RETURN_IF_ERROR(Field(j, "precision", &r->precision, where));
    if (r->precision != "fp32" && r->precision != "bf16") {
      return InvalidArgument(where + ": field 'precision': expected fp32 or bf16, got '" +
                             r->precision + "'");
    }
  }
  LOOM_RETURN_IF_ERROR(Field(j, "predicted_step_s", &r->predicted_step_s, where));
  auto ranks = j.find("ranks");
  if (ranks == j.end() || !ranks->is_array()) {
    return InvalidArgument(where + ": field 'ranks': expected an array of ranks");
  }
  for (size_t i = 0; i < ranks->size(); ++i) {
    const std::string at = where + ", ranks[" + std::to_string(i) + "]";
    RankPlace p;
    LOOM_RETURN_IF_ERROR(Field((*ranks)[i], "rank", &p.rank, at));
    LOOM_RETURN_IF_ERROR(Field((*ranks)[i], "node", &p.node, at));
    LOOM_RETURN_IF_ERROR(Field((*ranks)[i], "host", &p.host, at));
    LOOM_RETURN_IF_ERROR(Field((*ranks)[i], "device", &p.device, at));
    for (auto [name, v] :
         {std::pair<const char*, int*>{"tp", &p.tp}, {"cp", &p.cp}, {"pp", &p.pp}, {"dp", &p.dp}}) {
      LOOM_RETURN_IF_ERROR(Field((*ranks)[i], name, v, at));
    }
    r->ranks.push_back(std::move(p));
  }
  return Status::Ok();
}

Status ParseStep(const json& j, const std::string& where, StepRecord* r) {
  LOOM_RETURN_IF_ERROR(Field(j, "step", &r->step, where));
  LOOM_RETURN_IF_ERROR(Field(j, "epoch", &r->epoch, where));
  LOOM_RETURN_IF_ERROR(Field(j, "t", &r->t, where));
  LOOM_RETURN_IF_ERROR(Field(j, "loss", &r->loss, where));
  LOOM_RETURN_IF_ERROR(Field(j, "step_s", &r->step_s, where));
  LOOM_RETURN_IF_ERROR(Field(j, "tokens_per_s", &r->tokens_per_s, where));
  LOOM_RETURN_IF_ERROR(Field(j, "mfu", &r->mfu, where));
  LOOM_RETURN_IF_ERROR(Field(j, "rank_step_s", &r->rank_step_s, where));
  LOOM_RETURN_IF_ERROR(Field(j, "rank_wait_s", &r->rank_wait_s, where));
  LOOM_RETURN_IF_ERROR(Field(j, "comm_s", &r->comm_s, where));
  LOOM_RETURN_IF_ERROR(Field(j, "exposed_s", &r->exposed_s, where));
  LOOM_RETURN_IF_ERROR(Field(j, "snapshot_step", &r->snapshot_step, where));
  LOOM_RETURN_IF_ERROR(Field(j, "checkpoint_step", &r->checkpoint_step, where));
  return Status::Ok();
}

Status ParseEvent(const json& j, const std::string& where, EventRecord* r) {
  LOOM_RETURN_IF_ERROR(Field(j, "t", &r->t, where));
  LOOM_RETURN_IF_ERROR(Field(j, "step", &r->step, where));
  LOOM_RETURN_IF_ERROR(Field(j, "epoch", &r->epoch, where));
  LOOM_RETURN_IF_ERROR(Field(j, "type", &r->kind, where));
  LOOM_RETURN_IF_ERROR(Field(j, "text", &r->text, where));
  return Status::Ok();
}

// Names come from users (node names, the job's path): what is not UTF-8 is replaced.
std::string Dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

bool EndsRun(const std::string& kind) {
  return kind == "finished" || kind == "failed" || kind == "stopped" || kind == "interrupted";
}

std::string ToJsonLine(const PlanRecord& r) {
  return Dump(PlanJson(r));
}
std::string ToJsonLine(const StepRecord& r) {
  return Dump(StepJson(r));
}
std::string ToJsonLine(const EventRecord& r) {
  return Dump(EventJson(r));
}

Result<RunHistory> ParseRunLog(const std::string& text, const std::string& path) {
  RunHistory h;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    const std::string where = path + ":" + std::to_string(n);
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      // The last line of a run that was killed mid-write is cut short: the rest is good.
      if (in.peek() == std::char_traits<char>::eof() && text.back() != '\n') break;
      return InvalidArgument(where + ": expected one JSON object per line");
    }
    std::string kind;
    LOOM_RETURN_IF_ERROR(Field(j, "kind", &kind, where));
    if (kind == "plan") {
      LOOM_RETURN_IF_ERROR(ParsePlan(j, where, &h.plans.emplace_back()));
    } else if (kind == "step") {
      LOOM_RETURN_IF_ERROR(ParseStep(j, where, &h.steps.emplace_back()));
    } else if (kind == "event") {
      LOOM_RETURN_IF_ERROR(ParseEvent(j, where, &h.events.emplace_back()));
    } else {
      return InvalidArgument(where + ": field 'kind': expected plan, step or event, got '" + kind +
                             "'");
    }
  }
  if (h.plans.empty()) return InvalidArgument(path + ": no plan record (not a Loom series file)");
  return h;
}

std::string HistoryJson(const RunHistory& h, bool live, const std::string& status,
                        size_t max_steps) {
  json plans = json::array();
  for (const PlanRecord& p : h.plans) plans.push_back(PlanJson(p));
  json steps = json::array();
  const size_t first = max_steps > 0 && h.steps.size() > max_steps ? h.steps.size() - max_steps : 0;
  // Per-rank figures only for the steps the heatmap shows: for a large job they are most of
  // the document (2 x 1,024 numbers a step).
  const size_t ranked = h.steps.size() > kRankedSteps ? h.steps.size() - kRankedSteps : 0;
  for (size_t i = first; i < h.steps.size(); ++i) {
    json step = StepJson(h.steps[i]);
    if (i < ranked) step["rank_step_s"] = step["rank_wait_s"] = json::array();
    steps.push_back(std::move(step));
  }
  json events = json::array();
  for (const EventRecord& e : h.events) events.push_back(EventJson(e));
  json doc = {
      {"live", live}, {"status", status}, {"plans", plans}, {"steps", steps}, {"events", events}};
  doc["plan"] = plans.empty() ? json(nullptr) : plans.back();
  // The page is served as UTF-8; replace what is not (a node name is the user's text).
  return Dump(doc);
}

}  // namespace loom
