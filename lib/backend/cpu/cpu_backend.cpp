#include "backend/cpu/cpu_backend.h"

#include <omp.h>    // omp_set_num_threads: oneDNN (Debian build) and our loops use OpenMP
#include <sched.h>  // sched_getaffinity: the cores this rank may use

#include <cstdio>   // fprintf: the threads warning
#include <cstring>  // memcpy, memset

#include "backend/cpu/cpu_ops.h"  // op constructors
#include "core/error.h"

namespace dtrain {

CpuBackend::CpuBackend() : ctx_(std::make_unique<cpu::DnnlContext>()) {}

std::string CpuBackend::name() const {
  const dnnl_version_t* v = dnnl_version();
  return "cpu (oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + ", " + std::to_string(threads_) + " thread" +
         (threads_ == 1 ? "" : "s") + ")";
}

void CpuBackend::set_num_threads(int threads) {
  DTRAIN_CHECK(threads >= 1) << "threads must be >= 1";
  threads_ = threads;
  // This thread's OpenMP teams (oneDNN's and the layers' loops). The element-wise ops name
  // their team size themselves (num_threads): the communication thread calls them too, and a
  // thread OpenMP has not seen would take a team of every core, so that two ranks of one
  // thread would run four.
  omp_set_num_threads(threads);
  // mpirun binds each rank to one core unless told otherwise: more threads would take turns.
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
    const int cores = CPU_COUNT(&allowed);
    static bool warned = false;
    if (threads > cores && !warned) {
      warned = true;
      std::fprintf(stderr,
                   "cluster.threads_per_rank: %d threads, but this process may run on %d core%s "
                   "(mpirun binds each rank to a core by default; use mpirun --bind-to none or "
                   "--map-by slot:PE=%d): the threads will take turns\n",
                   threads, cores, cores == 1 ? "" : "s", threads);
    }
  }
}

std::unique_ptr<LinearOp> CpuBackend::make_linear(const LinearSpec& s) {
  return cpu::make_linear(*ctx_, s);
}
std::unique_ptr<ConvOp> CpuBackend::make_conv(const ConvSpec& s) {
  return cpu::make_conv(*ctx_, s);
}
std::unique_ptr<PoolOp> CpuBackend::make_pool(const PoolSpec& s) {
  return cpu::make_pool(*ctx_, s);
}
std::unique_ptr<ReluOp> CpuBackend::make_relu(const Shape& s) {
  return cpu::make_relu(*ctx_, s);
}
std::unique_ptr<GeluOp> CpuBackend::make_gelu(const GeluSpec& s) {
  return cpu::make_gelu(*ctx_, s);
}
std::unique_ptr<LrnOp> CpuBackend::make_lrn(const LrnSpec& s) {
  return cpu::make_lrn(*ctx_, s);
}
std::unique_ptr<BatchNormOp> CpuBackend::make_batchnorm(const BatchNormSpec& s) {
  return cpu::make_batchnorm(*ctx_, s);
}
std::unique_ptr<SoftmaxXentOp> CpuBackend::make_softmax_xent(const SoftmaxXentSpec& s) {
  return cpu::make_softmax_xent(s);
}
std::unique_ptr<DropoutOp> CpuBackend::make_dropout(const DropoutSpec& s) {
  return cpu::make_dropout(s);
}

// ---- element-wise and flat-buffer ops ---------------------------------------------------
// Small buffers stay on one thread: waking a team costs more than the loop.
namespace {
constexpr int64_t kParallelThreshold = 1 << 16;

void check_f32(const Tensor& t, const char* what) {
  DTRAIN_CHECK(t.dtype() == DType::f32 && t.device() == Device::cpu)
      << what << ": expected a host f32 tensor";
}
void check_same_size(const Tensor& a, const Tensor& b, const char* what) {
  DTRAIN_CHECK(a.numel() == b.numel())
      << what << ": sizes differ, " << a.shape().str() << " vs " << b.shape().str();
}
}  // namespace

void CpuBackend::fill_zero(const Tensor& t) {
  std::memset(t.raw(), 0, t.bytes());
}

void CpuBackend::fill(const Tensor& t, float value) {
  check_f32(t, "fill");
  float* p = t.data<float>();
  const int64_t n = t.numel();
#pragma omp parallel for simd if (n > kParallelThreshold) num_threads(threads_)
  for (int64_t i = 0; i < n; ++i) p[i] = value;
}

void CpuBackend::copy(const Tensor& dst, const Tensor& src) {
  DTRAIN_CHECK(dst.bytes() == src.bytes())
      << "copy: " << src.shape().str() << " into " << dst.shape().str();
  DTRAIN_CHECK(dst.device() == Device::cpu && src.device() == Device::cpu)
      << "the CPU backend copies host memory only";
  if (dst.raw() != src.raw() && dst.bytes() > 0) std::memcpy(dst.raw(), src.raw(), dst.bytes());
}

void CpuBackend::copy_rows(const Tensor& dst, int64_t dst_stride, const Tensor& src,
                           int64_t src_stride, int64_t rows, int64_t row_elems) {
  DTRAIN_CHECK(dst.dtype() == src.dtype()) << "copy_rows: dtypes differ";
  const size_t esize = dtype_size(src.dtype());
  auto* d = static_cast<char*>(dst.raw());
  auto* s = static_cast<const char*>(src.raw());
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(d + r * dst_stride * esize, s + r * src_stride * esize, row_elems * esize);
}

template <bool kRelu>
void CpuBackend::add_into(const Tensor& a, const Tensor& b, const Tensor& out, const char* what) {
  check_f32(a, what);
  check_same_size(a, b, what);
  check_same_size(a, out, what);
  const float* x = a.data<float>();
  const float* y = b.data<float>();
  float* z = out.data<float>();
  const int64_t n = a.numel();
#pragma omp parallel for simd if (n > kParallelThreshold) num_threads(threads_)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] + y[i];
    z[i] = !kRelu || v > 0.0f ? v : 0.0f;
  }
}

void CpuBackend::add(const Tensor& a, const Tensor& b, const Tensor& out) {
  add_into<false>(a, b, out, "add");
}

void CpuBackend::add_relu(const Tensor& a, const Tensor& b, const Tensor& out) {
  add_into<true>(a, b, out, "add_relu");
}

void CpuBackend::axpy(float alpha, const Tensor& x, const Tensor& y) {
  check_f32(x, "axpy");
  check_same_size(x, y, "axpy");
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const int64_t n = x.numel();
#pragma omp parallel for simd if (n > kParallelThreshold) num_threads(threads_)
  for (int64_t i = 0; i < n; ++i) yp[i] += alpha * xp[i];
}

void CpuBackend::axpby(float alpha, const Tensor& x, float beta, const Tensor& y) {
  check_f32(x, "axpby");
  check_same_size(x, y, "axpby");
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const int64_t n = x.numel();
#pragma omp parallel for simd if (n > kParallelThreshold) num_threads(threads_)
  for (int64_t i = 0; i < n; ++i) yp[i] = alpha * xp[i] + beta * yp[i];
}

void CpuBackend::scale(const Tensor& x, float alpha) {
  check_f32(x, "scale");
  float* p = x.data<float>();
  const int64_t n = x.numel();
#pragma omp parallel for simd if (n > kParallelThreshold) num_threads(threads_)
  for (int64_t i = 0; i < n; ++i) p[i] *= alpha;
}

void CpuBackend::sgd_step(const Tensor& weights, const Tensor& grads, const Tensor& momentum_buf,
                          const SgdHyper& h) {
  check_f32(weights, "sgd_step");
  check_same_size(weights, grads, "sgd_step");
  float* w = weights.data<float>();
  const float* g = grads.data<float>();
  const int64_t n = weights.numel();
  const float lr = h.lr, wd = h.weight_decay, mu = h.momentum, damp = 1.0f - h.dampening;
  if (mu == 0.0f) {
#pragma omp parallel for simd if (n > kParallelThreshold) num_threads(threads_)
    for (int64_t i = 0; i < n; ++i) w[i] -= lr * (g[i] + wd * w[i]);
    return;
  }
  check_same_size(weights, momentum_buf, "sgd_step momentum");
  float* v = momentum_buf.data<float>();
  if (h.nesterov) {
#pragma omp parallel for simd if (n > kParallelThreshold) num_threads(threads_)
    for (int64_t i = 0; i < n; ++i) {
      float gi = g[i] + wd * w[i];
      float vi = mu * v[i] + damp * gi;
      v[i] = vi;
      w[i] -= lr * (gi + mu * vi);
    }
  } else {
#pragma omp parallel for simd if (n > kParallelThreshold) num_threads(threads_)
    for (int64_t i = 0; i < n; ++i) {
      float gi = g[i] + wd * w[i];
      float vi = mu * v[i] + damp * gi;
      v[i] = vi;
      w[i] -= lr * vi;
    }
  }
}

void CpuBackend::sgd_step_accumulate(const Tensor& weights, const Tensor& grads, const Tensor& sum,
                                     float lr, float weight_decay, bool add) {
  check_f32(weights, "sgd_step_accumulate");
  check_same_size(weights, grads, "sgd_step_accumulate");
  check_same_size(weights, sum, "sgd_step_accumulate sum");
  float* w = weights.data<float>();
  const float* g = grads.data<float>();
  float* a = sum.data<float>();
  const int64_t n = weights.numel();
  const float wd = weight_decay;
  // Four variants, so that the branches stay out of the vectorised loops and ĝ is g exactly
  // without weight decay.
  if (wd == 0.0f && add) {
#pragma omp parallel for simd if (n > kParallelThreshold) num_threads(threads_)
    for (int64_t i = 0; i < n; ++i) a[i] += g[i], w[i] -= lr * g[i];
  } else if (wd == 0.0f) {
#pragma omp parallel for simd if (n > kParallelThreshold) num_threads(threads_)
    for (int64_t i = 0; i < n; ++i) a[i] = g[i], w[i] -= lr * g[i];
  } else if (add) {
#pragma omp parallel for simd if (n > kParallelThreshold) num_threads(threads_)
    for (int64_t i = 0; i < n; ++i) {
      const float gi = g[i] + wd * w[i];
      a[i] += gi;
      w[i] -= lr * gi;
    }
  } else {
#pragma omp parallel for simd if (n > kParallelThreshold) num_threads(threads_)
    for (int64_t i = 0; i < n; ++i) {
      const float gi = g[i] + wd * w[i];
      a[i] = gi;
      w[i] -= lr * gi;
    }
  }
}

}  // namespace dtrain

namespace dtrain {

void CpuBackend::sgd_predict(const Tensor& out, const Tensor& weights, const Tensor& grads,
                             const Tensor& momentum_buf, const SgdHyper& h) {
  check_f32(weights, "sgd_predict");
  check_same_size(weights, grads, "sgd_predict");
  check_same_size(weights, out, "sgd_predict out");
  const float* w = weights.data<float>();
  const float* g = grads.data<float>();
  float* x = out.data<float>();
  const int64_t n = weights.numel();
  const float lr = h.lr, wd = h.weight_decay, mu = h.momentum, damp = 1.0f - h.dampening;
  // The loops of sgd_step with the stores of w and v replaced by one store of the result.
  if (mu == 0.0f) {
#pragma omp parallel for simd if (n > kParallelThreshold) num_threads(threads_)
    for (int64_t i = 0; i < n; ++i) {
      float wi = w[i];
      wi -= lr * (g[i] + wd * wi);
      x[i] = wi;
    }
    return;
  }
  check_same_size(weights, momentum_buf, "sgd_predict momentum");
  const float* v = momentum_buf.data<float>();
  if (h.nesterov) {
#pragma omp parallel for simd if (n > kParallelThreshold) num_threads(threads_)
    for (int64_t i = 0; i < n; ++i) {
      float wi = w[i];
      float gi = g[i] + wd * wi;
      float vi = mu * v[i] + damp * gi;
      wi -= lr * (gi + mu * vi);
      x[i] = wi;
    }
  } else {
#pragma omp parallel for simd if (n > kParallelThreshold) num_threads(threads_)
    for (int64_t i = 0; i < n; ++i) {
      float wi = w[i];
      float gi = g[i] + wd * wi;
      float vi = mu * v[i] + damp * gi;
      wi -= lr * vi;
      x[i] = wi;
    }
  }
}

void CpuBackend::sgd_step_predict(const Tensor& weights, const Tensor& grads,
                                  const Tensor& momentum_buf, const Tensor& ghat, const Tensor& out,
                                  const SgdHyper& h) {
  check_f32(weights, "sgd_step_predict");
  check_same_size(weights, grads, "sgd_step_predict");
  check_same_size(weights, ghat, "sgd_step_predict ghat");
  check_same_size(weights, out, "sgd_step_predict out");
  float* w = weights.data<float>();
  const float* g = grads.data<float>();
  const float* p = ghat.data<float>();
  float* x = out.data<float>();
  const int64_t n = weights.numel();
  const float lr = h.lr, wd = h.weight_decay, mu = h.momentum, damp = 1.0f - h.dampening;
  // sgd_step's loop, then sgd_predict's on the values just stored, term by term.
  if (mu == 0.0f) {
#pragma omp parallel for simd if (n > kParallelThreshold) num_threads(threads_)
    for (int64_t i = 0; i < n; ++i) {
      float wi = w[i];
      wi -= lr * (g[i] + wd * wi);
      w[i] = wi;
      wi -= lr * (p[i] + wd * wi);
      x[i] = wi;
    }
    return;
  }
  check_same_size(weights, momentum_buf, "sgd_step_predict momentum");
  float* v = momentum_buf.data<float>();
  if (h.nesterov) {
#pragma omp parallel for simd if (n > kParallelThreshold) num_threads(threads_)
    for (int64_t i = 0; i < n; ++i) {
      float wi = w[i];
      float gi = g[i] + wd * wi;
      float vi = mu * v[i] + damp * gi;
      v[i] = vi;
      wi -= lr * (gi + mu * vi);
      w[i] = wi;
      float pi = p[i] + wd * wi;
      float ui = mu * vi + damp * pi;
      wi -= lr * (pi + mu * ui);
      x[i] = wi;
    }
  } else {
#pragma omp parallel for simd if (n > kParallelThreshold) num_threads(threads_)
    for (int64_t i = 0; i < n; ++i) {
      float wi = w[i];
      float gi = g[i] + wd * wi;
      float vi = mu * v[i] + damp * gi;
      v[i] = vi;
      wi -= lr * vi;
      w[i] = wi;
      float pi = p[i] + wd * wi;
      float ui = mu * vi + damp * pi;
      wi -= lr * ui;
      x[i] = wi;
    }
  }
}

double CpuBackend::dot(const Tensor& a, const Tensor& b) {
  check_f32(a, "dot");
  check_same_size(a, b, "dot");
  const float* x = a.data<float>();
  const float* y = b.data<float>();
  const int64_t n = a.numel();
  // Eight running sums (element i into sum i mod 8), then added in order: the order depends
  // on n only, and the loop still vectorises.
  constexpr int kLanes = 8;
  double sum[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l)
      sum[l] += static_cast<double>(x[i + l]) * static_cast<double>(y[i + l]);
  for (int l = 0; i < n; ++i, ++l) sum[l] += static_cast<double>(x[i]) * static_cast<double>(y[i]);
  double total = 0;
  for (double s : sum) total += s;
  return total;
}

void CpuBackend::dc_diagonal(const Tensor& grads, const Tensor& delta, float lambda) {
  check_f32(grads, "dc_diagonal");
  check_same_size(grads, delta, "dc_diagonal");
  float* g = grads.data<float>();
  const float* d = delta.data<float>();
  const int64_t n = grads.numel();
#pragma omp parallel for simd if (n > kParallelThreshold) num_threads(threads_)
  for (int64_t i = 0; i < n; ++i) g[i] += lambda * g[i] * g[i] * d[i];
}

}  // namespace dtrain
