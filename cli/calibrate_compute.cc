// Kernel measurements of `loom calibrate` (see calibrate_measure.h).
#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "cli/calibrate_measure.h"
#include "core/kernels/attention.h"
#include "core/kernels/bf16.h"
#include "core/kernels/blas.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/layernorm.h"
#include "core/kernels/linear.h"
#include "core/kernels/optimizer.h"

namespace loom {

std::vector<std::vector<float>> SpreadCopies(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = scale * static_cast<float>(static_cast<int64_t>((i * 7919) % 2001) - 1000) / 1000.0f;
  }
  return std::vector<std::vector<float>>(kCalibrationCopies, v);
}

namespace {

// Median seconds per call of `fn(i)` (i counts calls) over at least `min_seconds` and 3 calls,
// after one warm-up. The median, not the fastest call: a training step pays the typical call,
// and on a VM whose speed drifts the fastest call is a lucky one (5-10 % faster).
double TimeIt(const std::function<void(int)>& fn, double min_seconds) {
  using C = std::chrono::steady_clock;
  fn(0);
  std::vector<double> t;
  const auto start = C::now();
  while (t.size() < 3 || std::chrono::duration<double>(C::now() - start).count() < min_seconds) {
    const auto a = C::now();
    fn(static_cast<int>(t.size()) + 1);
    t.push_back(std::chrono::duration<double>(C::now() - a).count());
    if (t.size() >= 1000) break;
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Shape {
  int64_t m, n, k;
};

// GEMM shapes of the job's linear layers and head for tensor-parallel splits up to `max_tp` and
// a few micro-batch sizes; a default ladder without a job.
std::vector<Shape> GemmShapes(const PlanJob* job, int max_tp) {
  std::vector<Shape> out;
  if (job == nullptr) {
    for (int64_t s : {256, 512, 1024, 2048}) out.push_back({s, s, s});
    return out;
  }
  const int64_t h = job->model.hidden, v = job->model.vocab;
  for (int tp = 1; tp <= max_tp; tp *= 2) {
    if (job->model.heads % tp != 0) continue;
    for (int64_t mb = 1; mb <= std::min<int64_t>(job->global_batch, 16); mb *= 2) {
      const int64_t m = mb * job->seq;
      if (m > 16384) break;
      for (Shape s : {Shape{m, 3 * h / tp, h}, Shape{m, h, h / tp}, Shape{m, 4 * h / tp, h},
                      Shape{m, h, 4 * h / tp}, Shape{m, (v + tp - 1) / tp, h}}) {
        out.push_back(s);
      }
    }
  }
  return out;
}

// A linear layer's three GEMMs: Y = X W^T, dX = dY W, dW = dY^T X. The sample is their joint
// rate, which prices the planner's forward (one GEMM) and backward (two) together.
GemmSample TimeGemmsFp32(const Shape& s, int threads, double secs) {
  auto a = SpreadCopies(s.m * s.k, 0.01f), b = SpreadCopies(s.n * s.k, 0.02f),
       c = SpreadCopies(s.m * s.n, 0.03f);
  auto da = SpreadCopies(s.m * s.k, 0), db = SpreadCopies(s.n * s.k, 0);
  const double t = TimeIt(
      [&](int i) {
        const size_t j = static_cast<size_t>(i % kCalibrationCopies);
        ParallelGemm<float>(false, true, s.m, s.n, s.k, 1.0f, a[j].data(), s.k, b[j].data(), s.k,
                            0.0f, c[j].data(), s.n);
        ParallelGemm<float>(false, false, s.m, s.k, s.n, 1.0f, c[j].data(), s.n, b[j].data(), s.k,
                            0.0f, da[j].data(), s.k);
        ParallelGemm<float>(true, false, s.n, s.k, s.m, 1.0f, c[j].data(), s.n, a[j].data(), s.k,
                            1.0f, db[j].data(), s.k);
      },
      secs);
  return {static_cast<double>(s.m), static_cast<double>(s.n), static_cast<double>(s.k), threads,
          3 * 2.0 * s.m * s.n * s.k / t};
}

// The same three GEMMs as `precision: bf16` runs them (core/kernels/linear.h): input and weight
// in bf16, products accumulated in fp32, fp32 outputs and gradients, and the output gradient
// cast to bf16 once for both backward GEMMs (paid by every linear layer's backward, so counted).
Status TimeGemmsBf16(const Shape& s, int threads, double secs, GemmSample* out) {
  auto bf16 = [](const std::vector<std::vector<float>>& v) {
    std::vector<std::vector<Bf16>> out;
    for (const auto& x : v) {
      out.emplace_back(x.size());
      CastToBf16(x.data(), out.back().data(), static_cast<int64_t>(x.size()));
    }
    return out;
  };
  const auto a = bf16(SpreadCopies(s.m * s.k, 0.01f)), b = bf16(SpreadCopies(s.n * s.k, 0.02f));
  auto c = SpreadCopies(s.m * s.n, 0.03f), da = SpreadCopies(s.m * s.k, 0),
       db = SpreadCopies(s.n * s.k, 0);
  std::vector<Bf16> dc(static_cast<size_t>(s.m * s.n));
  Status st;
  const double t = TimeIt(
      [&](int i) {
        const size_t j = static_cast<size_t>(i % kCalibrationCopies);
        Status g = GemmBf16(false, true, s.m, s.n, s.k, a[j].data(), s.k, b[j].data(), s.k, 0.0f,
                            c[j].data(), s.n);
        CastToBf16(c[j].data(), dc.data(), s.m * s.n);
        if (g.ok()) {
          g = GemmBf16(false, false, s.m, s.k, s.n, dc.data(), s.n, b[j].data(), s.k, 0.0f,
                       da[j].data(), s.k);
        }
        if (g.ok()) {
          g = GemmBf16(true, false, s.n, s.k, s.m, dc.data(), s.n, a[j].data(), s.k, 1.0f,
                       db[j].data(), s.k);
        }
        if (st.ok() && !g.ok()) st = g;
      },
      secs);
  LOOM_RETURN_IF_ERROR(st);
  *out = {static_cast<double>(s.m), static_cast<double>(s.n), static_cast<double>(s.k), threads,
          3 * 2.0 * s.m * s.n * s.k / t};
  return Status::Ok();
}

// In the job's precision (the planner keeps samples of the precision it prices: hardware.h).
Status MeasureGemms(const PlanJob* job, int threads, int max_tp, double secs, Calibration* cal) {
  const bool bf16 = job != nullptr && job->precision == Precision::kBf16;
  for (const Shape& s : GemmShapes(job, max_tp)) {
    GemmSample sample;
    if (bf16) {
      LOOM_RETURN_IF_ERROR(TimeGemmsBf16(s, threads, secs, &sample));
    } else {
      sample = TimeGemmsFp32(s, threads, secs);
    }
    cal->gemm.push_back(sample);
  }
  return Status::Ok();
}

void MeasureAttention(const PlanJob& job, int threads, int max_tp, double secs, Calibration* cal) {
  for (int tp = 1; tp <= max_tp; tp *= 2) {
    if (job.model.heads % tp != 0) continue;
    AttentionShape sh;
    // The job's micro-batch when it is fixed (more sequences, more parallel tasks), else one.
    sh.batch = job.micro_batch.value_or(1);
    sh.seq = job.seq;
    sh.heads = job.model.heads / tp;
    sh.head_dim = job.model.head_dim();
    const int64_t n = sh.batch * sh.seq * sh.heads * sh.head_dim;
    auto qkv = SpreadCopies(3 * n, 1.0f), out = SpreadCopies(n, 0), dqkv = SpreadCopies(3 * n, 0);
    auto lse = SpreadCopies(sh.batch * sh.heads * sh.seq, 0), dout = SpreadCopies(n, 0.01f);
    const double t = TimeIt(
        [&](int i) {
          const size_t j = static_cast<size_t>(i % kCalibrationCopies);
          AttentionForward<float>(out[j].data(), lse[j].data(), qkv[j].data(), sh);
          AttentionBackward<float>(dqkv[j].data(), dout[j].data(), qkv[j].data(), out[j].data(),
                                   lse[j].data(), sh);
        },
        secs);
    // Full-square forward FLOPs (QK^T and PV), times 3 for forward + backward.
    const double flops = 3 * 4.0 * sh.batch * sh.heads * sh.seq * sh.seq * sh.head_dim;
    cal->attention.push_back(
        {static_cast<double>(sh.seq), static_cast<double>(sh.head_dim), threads, flops / t});
  }
}

// Memory-bound kernels, priced by the planner as bytes over bandwidth (layer_model.cc): a layer's
// forward moves 18 floats per token and hidden unit (two LayerNorms reading and writing, two
// residual adds reading two and writing one, GELU reading and writing the 4h-wide activation)
// and its backward is priced at twice that. Timed here is what the runtime really runs for them,
// forward and backward: the LayerNorms, GELU, the residual adds and the bias gradients of the
// four linear layers; the figure is the planner's 3 x 18 floats per token and hidden unit over
// that time.
double MeasureMemoryBound(int64_t c, int64_t rows, double secs) {
  const int64_t n = rows * c;
  auto x = SpreadCopies(n, 1.0f), y = SpreadCopies(n, 0), dy = SpreadCopies(n, 0.01f),
       dx = SpreadCopies(n, 0);
  auto wide = SpreadCopies(4 * n, 2.0f), wide_out = SpreadCopies(4 * n, 0),
       dwide = SpreadCopies(4 * n, 0.01f);
  auto mean = SpreadCopies(rows, 0), rstd = SpreadCopies(rows, 0);
  std::vector<float> w(static_cast<size_t>(c), 1.0f), bias(static_cast<size_t>(c), 0.0f);
  std::vector<float> dw(static_cast<size_t>(c)), db(static_cast<size_t>(c));
  std::vector<float> dbias(static_cast<size_t>(4 * c));
  const double t = TimeIt(
      [&](int i) {
        const size_t j = static_cast<size_t>(i % kCalibrationCopies);
        for (int ln = 0; ln < 2; ++ln) {
          LayerNormForward<float>(y[j].data(), mean[j].data(), rstd[j].data(), x[j].data(),
                                  w.data(), bias.data(), rows, c);
          ResidualForward<float>(y[j].data(), y[j].data(), x[j].data(), n);
          LayerNormBackward<float>(dx[j].data(), dw.data(), db.data(), dy[j].data(), x[j].data(),
                                   w.data(), mean[j].data(), rstd[j].data(), rows, c);
        }
        GeluForward<float>(wide_out[j].data(), wide[j].data(), 4 * n);
        GeluBackward<float>(dwide[j].data(), wide[j].data(), wide_out[j].data(), 4 * n);
        // Bias gradients: qkv (3h), projection (h), fc (4h), fc projection (h).
        LinearBackward<float>(nullptr, nullptr, dbias.data(), wide[j].data(), nullptr, nullptr,
                              rows, 0, 4 * c);
        LinearBackward<float>(nullptr, nullptr, dbias.data(), wide[j].data(), nullptr, nullptr,
                              rows, 0, 3 * c);
        LinearBackward<float>(nullptr, nullptr, dbias.data(), x[j].data(), nullptr, nullptr, rows,
                              0, c);
        LinearBackward<float>(nullptr, nullptr, dbias.data(), y[j].data(), nullptr, nullptr, rows,
                              0, c);
      },
      secs);
  return 3 * 18.0 * 4 * static_cast<double>(n) / t;
}

// AdamW over a parameter buffer plus the gradient norm, as a step runs them; expressed as the
// planner's bytes per parameter (time_model.cc: 28 + 2 x 4) over that time.
double MeasureOptimizer(double secs) {
  const int64_t n = int64_t{1} << 21;
  auto p = SpreadCopies(n, 0.1f), g = SpreadCopies(n, 0.01f), m = SpreadCopies(n, 0.001f),
       v = SpreadCopies(n, 0);
  AdamWParams ap;
  ap.weight_decay = 0.1f;
  double sink = 0;
  const double t = TimeIt(
      [&](int i) {
        const size_t j = static_cast<size_t>(i % kCalibrationCopies);
        sink += SumSquares<float>(g[j].data(), n);
        AdamWUpdate<float>(p[j].data(), g[j].data(), m[j].data(), v[j].data(), n, ap);
      },
      secs);
  return (sink >= 0 ? 36.0 : 0.0) * static_cast<double>(n) / t;
}

// One pass over every compute sample, each measured for `secs`.
Status MeasurePass(const PlanJob* job, int threads, int max_tp, double secs, Calibration* cal) {
  LOOM_RETURN_IF_ERROR(MeasureGemms(job, threads, max_tp, secs, cal));
  if (job != nullptr) MeasureAttention(*job, threads, max_tp, secs, cal);
  const int64_t c = job != nullptr ? job->model.hidden : 1024;
  // Rows of one micro-batch of the job (tokens), at least 256.
  const int64_t rows =
      job != nullptr ? std::max<int64_t>(256, job->micro_batch.value_or(1) * job->seq) : 2048;
  cal->memory.push_back({threads, MeasureMemoryBound(c, rows, secs)});
  cal->optimizer.push_back({threads, MeasureOptimizer(secs)});
  // Fixed cost of one kernel: a LayerNorm of a single row (waking the thread pool and joining it
  // again; the typical call, as for the kernels above).
  std::vector<float> x(static_cast<size_t>(c), 0.5f), y(x.size()), w(x.size(), 1.0f);
  std::vector<float> b(x.size(), 0.0f);
  float mean = 0, rstd = 0;
  cal->op_overhead = TimeIt(
      [&](int) {
        LayerNormForward<float>(y.data(), &mean, &rstd, x.data(), w.data(), b.data(), 1, c);
      },
      secs / 4);
  return Status::Ok();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

Status MeasureCompute(const PlanJob* job, int threads, int max_tp, double secs, int passes,
                      Calibration* cal) {
  if (job != nullptr && job->precision == Precision::kBf16 && !HaveBf16Gemm()) {
    return Unimplemented(job->file +
                         ": precision bf16: this build has no bf16 GEMM to measure (it needs "
                         "oneDNN, Debian's libdnnl-dev; deploy/install-deps.sh installs it)");
  }
  std::vector<Calibration> p(static_cast<size_t>(std::max(1, passes)));
  for (Calibration& pass : p) {
    LOOM_RETURN_IF_ERROR(MeasurePass(job, threads, max_tp, secs / p.size(), &pass));
  }
  // Every pass measured the same samples in the same order: the median of each.
  auto median = [&](auto get) {
    std::vector<double> v;
    for (const Calibration& pass : p) v.push_back(get(pass));
    return Median(v);
  };
  for (size_t i = 0; i < p[0].gemm.size(); ++i) {
    GemmSample s = p[0].gemm[i];
    s.flops = median([&](const Calibration& c) { return c.gemm[i].flops; });
    cal->gemm.push_back(s);
  }
  for (size_t i = 0; i < p[0].attention.size(); ++i) {
    AttentionSample s = p[0].attention[i];
    s.flops = median([&](const Calibration& c) { return c.attention[i].flops; });
    cal->attention.push_back(s);
  }
  cal->memory.push_back(
      {threads, median([](const Calibration& c) { return c.memory[0].bandwidth; })});
  cal->optimizer.push_back(
      {threads, median([](const Calibration& c) { return c.optimizer[0].bandwidth; })});
  cal->op_overhead = median([](const Calibration& c) { return c.op_overhead; });
  return Status::Ok();
}

}  // namespace loom
