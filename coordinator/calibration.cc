// Calibration file (JSON) reader and writer. nlohmann::json reports problems with exceptions;
// they stop here and become errors naming the file and the field.
#include "coordinator/calibration.h"

#include <nlohmann/json.hpp>

#include "core/file_util.h"

namespace loom {
namespace {

using nlohmann::json;

// Reads a number field of `obj` if present; errors name file and dotted path.
Status Num(const std::string& file, const json& obj, const std::string& path, const char* key,
           double* out, double min, double max) {
  if (!obj.contains(key)) return Status::Ok();
  const json& v = obj[key];
  const std::string field = path.empty() ? key : path + "." + key;
  if (!v.is_number() || v.get<double>() < min || v.get<double>() > max) {
    return InvalidArgument(file + ": field '" + field + "': expected a number in [" +
                           std::to_string(min) + ", " + std::to_string(max) + "], got " + v.dump());
  }
  *out = v.get<double>();
  return Status::Ok();
}

Status Link(const std::string& file, const json& links, const char* key, LinkCalibration* l) {
  if (!links.contains(key)) return Status::Ok();
  const std::string path = std::string("links.") + key;
  LOOM_RETURN_IF_ERROR(Num(file, links[key], path, "latency", &l->latency, 0, 1));
  return Num(file, links[key], path, "bandwidth", &l->bandwidth, 1, 1e18);
}

Status Parse(const std::string& file, const json& j, Calibration* c) {
  if (!j.is_object() || j.value("format", "") != "loom-calibration") {
    return InvalidArgument(file + ": field 'format': expected \"loom-calibration\"");
  }
  if (j.value("version", 0) != 1) {
    return InvalidArgument(file + ": field 'version': expected 1");
  }
  c->source = j.value("source", "");
  if (j.contains("precision")) {
    Result<Precision> p = ParsePrecision(j.value("precision", ""));
    if (!p.ok()) return InvalidArgument(file + ": field 'precision': " + p.status().message());
    c->precision = *p;
    c->has_precision = true;
  }
  if (j.contains("compute")) {
    const json& k = j["compute"];
    LOOM_RETURN_IF_ERROR(Num(file, k, "compute", "gemm_efficiency", &c->gemm_efficiency, 1e-3, 1));
    LOOM_RETURN_IF_ERROR(
        Num(file, k, "compute", "attention_efficiency", &c->attention_efficiency, 1e-3, 1));
    LOOM_RETURN_IF_ERROR(
        Num(file, k, "compute", "memory_efficiency", &c->memory_efficiency, 1e-3, 1));
    LOOM_RETURN_IF_ERROR(
        Num(file, k, "compute", "memory_bandwidth", &c->memory_bandwidth, 1, 1e18));
    LOOM_RETURN_IF_ERROR(Num(file, k, "compute", "op_overhead", &c->op_overhead, 0, 1));
    LOOM_RETURN_IF_ERROR(
        Num(file, k, "compute", "overlap_slowdown", &c->overlap_slowdown, 0, kMaxOverlapSlowdown));
    for (const json& g : k.value("gemm", json::array())) {
      GemmSample s;
      double threads = 1;
      LOOM_RETURN_IF_ERROR(Num(file, g, "compute.gemm[]", "m", &s.m, 1, 1e9));
      LOOM_RETURN_IF_ERROR(Num(file, g, "compute.gemm[]", "n", &s.n, 1, 1e9));
      LOOM_RETURN_IF_ERROR(Num(file, g, "compute.gemm[]", "k", &s.k, 1, 1e9));
      LOOM_RETURN_IF_ERROR(Num(file, g, "compute.gemm[]", "threads", &threads, 1, 1 << 16));
      LOOM_RETURN_IF_ERROR(Num(file, g, "compute.gemm[]", "flops", &s.flops, 1, 1e18));
      s.threads = static_cast<int>(threads);
      c->gemm.push_back(s);
    }
    for (const json& a : k.value("attention", json::array())) {
      AttentionSample s;
      double threads = 1;
      LOOM_RETURN_IF_ERROR(Num(file, a, "compute.attention[]", "seq", &s.seq, 1, 1e9));
      LOOM_RETURN_IF_ERROR(Num(file, a, "compute.attention[]", "head_dim", &s.head_dim, 1, 1e6));
      LOOM_RETURN_IF_ERROR(Num(file, a, "compute.attention[]", "threads", &threads, 1, 1 << 16));
      LOOM_RETURN_IF_ERROR(Num(file, a, "compute.attention[]", "flops", &s.flops, 1, 1e18));
      s.threads = static_cast<int>(threads);
      c->attention.push_back(s);
    }
    for (const char* key : {"memory", "optimizer"}) {
      const std::string field = std::string("compute.") + key + "[]";
      for (const json& m : k.value(key, json::array())) {
        MemorySample s;
        double threads = 1;
        LOOM_RETURN_IF_ERROR(Num(file, m, field, "threads", &threads, 1, 1 << 16));
        LOOM_RETURN_IF_ERROR(Num(file, m, field, "bandwidth", &s.bandwidth, 1, 1e18));
        s.threads = static_cast<int>(threads);
        (std::string(key) == "memory" ? c->memory : c->optimizer).push_back(s);
      }
    }
    for (const json& t : k.value("time_sharing", json::array())) {
      TimeSharingSample s;
      double ranks = 0, cores = 0;
      LOOM_RETURN_IF_ERROR(Num(file, t, "compute.time_sharing[]", "ranks", &ranks, 2, 1 << 20));
      LOOM_RETURN_IF_ERROR(Num(file, t, "compute.time_sharing[]", "cores", &cores, 1, 1 << 20));
      LOOM_RETURN_IF_ERROR(
          Num(file, t, "compute.time_sharing[]", "efficiency", &s.efficiency, 0.05, 2));
      if (!t.contains("ranks") || !t.contains("cores") || !t.contains("efficiency")) {
        return InvalidArgument(file +
                               ": field 'compute.time_sharing[]': expected ranks, cores and "
                               "efficiency in every entry");
      }
      s.ranks = static_cast<int>(ranks);
      s.cores = static_cast<int>(cores);
      c->time_sharing.push_back(s);
    }
  }
  if (j.contains("links")) {
    LOOM_RETURN_IF_ERROR(
        Num(file, j["links"], "links", "efficiency", &c->link_efficiency, 1e-3, 1));
    LOOM_RETURN_IF_ERROR(Link(file, j["links"], "intra_node", &c->intra));
    LOOM_RETURN_IF_ERROR(Link(file, j["links"], "inter_node", &c->inter));
    LOOM_RETURN_IF_ERROR(
        Num(file, j["links"], "links", "zero3_rank_bandwidth", &c->zero3_rank_bandwidth, 1, 1e18));
  }
  for (const json& s : j.value("collectives", json::array())) {
    CollectiveSample x;
    x.op = s.value("op", "");
    x.ranks = s.value("ranks", 0);
    x.bytes = s.value("bytes", 0.0);
    x.seconds = s.value("seconds", 0.0);
    c->collectives.push_back(x);
  }
  return Status::Ok();
}

}  // namespace

std::string CalibrationPrecisionNote(const Calibration& c, Precision job) {
  if (!c.has_precision || c.precision == job || c.gemm.empty()) return "";
  return std::string("its GEMM samples (and on GPUs its attention samples) were measured in ") +
         PrecisionName(c.precision) + ": this " + PrecisionName(job) +
         " job's are priced at the manifest's peak (loom calibrate --job measures in the job's "
         "precision)";
}

Result<Calibration> LoadCalibration(const std::string& path) {
  LOOM_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  Calibration c;
  try {
    json j = json::parse(text);
    LOOM_RETURN_IF_ERROR(Parse(path, j, &c));
  } catch (const json::exception& e) {
    return InvalidArgument(path + ": not valid calibration JSON: " + e.what());
  }
  return c;
}

std::string CalibrationToJson(const Calibration& c) {
  json j;
  j["format"] = "loom-calibration";
  j["version"] = 1;
  j["source"] = c.source;
  if (c.has_precision) j["precision"] = PrecisionName(c.precision);
  json& k = j["compute"];
  k["gemm_efficiency"] = c.gemm_efficiency;
  k["attention_efficiency"] = c.attention_efficiency;
  k["memory_efficiency"] = c.memory_efficiency;
  if (c.memory_bandwidth > 0) k["memory_bandwidth"] = c.memory_bandwidth;
  k["op_overhead"] = c.op_overhead;
  k["overlap_slowdown"] = c.overlap_slowdown;
  k["gemm"] = json::array();
  for (const GemmSample& s : c.gemm) {
    k["gemm"].push_back(
        {{"m", s.m}, {"n", s.n}, {"k", s.k}, {"threads", s.threads}, {"flops", s.flops}});
  }
  k["attention"] = json::array();
  for (const AttentionSample& s : c.attention) {
    k["attention"].push_back(
        {{"seq", s.seq}, {"head_dim", s.head_dim}, {"threads", s.threads}, {"flops", s.flops}});
  }
  k["memory"] = json::array();
  for (const MemorySample& s : c.memory) {
    k["memory"].push_back({{"threads", s.threads}, {"bandwidth", s.bandwidth}});
  }
  if (!c.optimizer.empty()) {
    k["optimizer"] = json::array();
    for (const MemorySample& s : c.optimizer) {
      k["optimizer"].push_back({{"threads", s.threads}, {"bandwidth", s.bandwidth}});
    }
  }
  if (!c.time_sharing.empty()) {
    k["time_sharing"] = json::array();
    for (const TimeSharingSample& s : c.time_sharing) {
      k["time_sharing"].push_back(
          {{"ranks", s.ranks}, {"cores", s.cores}, {"efficiency", s.efficiency}});
    }
  }
  json& l = j["links"];
  l["efficiency"] = c.link_efficiency;
  auto link = [](const LinkCalibration& x) {
    json o = json::object();
    if (x.latency >= 0) o["latency"] = x.latency;
    if (x.bandwidth > 0) o["bandwidth"] = x.bandwidth;
    return o;
  };
  l["intra_node"] = link(c.intra);
  l["inter_node"] = link(c.inter);
  if (c.zero3_rank_bandwidth > 0) l["zero3_rank_bandwidth"] = c.zero3_rank_bandwidth;
  j["collectives"] = json::array();
  for (const CollectiveSample& s : c.collectives) {
    j["collectives"].push_back(
        {{"op", s.op}, {"ranks", s.ranks}, {"bytes", s.bytes}, {"seconds", s.seconds}});
  }
  return j.dump(2) + "\n";
}

std::vector<int> CalibrationGroup(int rank, int world, int size) {
  std::vector<int> members;
  const int group = rank / size;
  if (group >= world / size) return members;  // left over: sits this size out
  for (int r = group * size; r < (group + 1) * size; ++r) members.push_back(r);
  return members;
}

}  // namespace loom
