#include "backend/cpu/cpu_backend.h"

#include <omp.h>    // omp_set_num_threads: oneDNN (Debian build) and our loops use OpenMP
#include <sched.h>  // sched_getaffinity: the cores this rank may use

#include <bit>      // bit_cast: bf16 ↔ f32 in add's vector loop
#include <cstdio>   // fprintf: the threads warning
#include <cstring>  // memcpy, memset

#include "backend/cpu/bf16.h"          // bf16_t
#include "backend/cpu/bf16_widened.h"  // bf16_products: the run log's note
#include "backend/cpu/cpu_isa.h"       // cpu_isa_name: the log names the kernels' ISA
#include "backend/cpu/cpu_ops.h"       // op constructors
#include "backend/cpu/lane_ordered_sum.h"
#include "core/error.h"

namespace dtrain {

CpuBackend::CpuBackend() : ctx_(std::make_unique<cpu::DnnlContext>()) {}

std::string CpuBackend::name() const {
  const dnnl_version_t* v = dnnl_version();
  return "cpu (oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + ", " + cpu_isa_name() + ", " + std::to_string(threads_) +
         " thread" + (threads_ == 1 ? "" : "s") + ")";
}

std::string CpuBackend::bf16_unavailable() const {
  if (cpu_has_native_bf16()) return "";
  return "this CPU has no native bfloat16 instructions (oneDNN dispatches to " + cpu_isa_name() +
         "; bf16 needs AVX512-BF16 or AMX, or oneDNN would emulate it slower than f32)";
}

std::string CpuBackend::bf16_caveat() const {
  if (!cpu_has_native_bf16()) return "";
  const bool amx = dnnl_get_effective_cpu_isa() == dnnl_cpu_isa_avx512_core_amx;
  if (cpu::bf16_products() == cpu::Bf16Products::widened)
    return std::string(
               "cluster.precision: bf16: the matrix products run on the f32 kernels on "
               "widened operands (") +
           (amx ? "DTRAIN_BF16_PRODUCTS=widened"
                : "AVX512-BF16 without AMX: this CPU's bf16 instructions are no faster than its "
                  "f32 FMAs") +
           "); bf16 saves activation memory here, at about fp32's speed";
  if (amx) return "";
  return "cluster.precision: bf16 on AVX512-BF16 without AMX with DTRAIN_BF16_PRODUCTS=native: "
         "oneDNN's bf16 products run slower than f32 on this CPU (bf16 halves the activation "
         "memory here, not the time)";
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
std::unique_ptr<ReluOp> CpuBackend::make_relu(const Shape& s, DType dtype) {
  return cpu::make_relu(*ctx_, s, dtype);
}
std::unique_ptr<GeluOp> CpuBackend::make_gelu(const GeluSpec& s) {
  return cpu::make_gelu(*ctx_, s, threads_);
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
std::unique_ptr<EmbeddingOp> CpuBackend::make_embedding(const EmbeddingSpec& s) {
  return cpu::make_embedding(s);
}
std::unique_ptr<LayerNormOp> CpuBackend::make_layer_norm(const LayerNormSpec& s) {
  return cpu::make_layer_norm(s);
}
std::unique_ptr<AttentionOp> CpuBackend::make_attention(const AttentionSpec& s) {
  return cpu::make_attention(s);
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
  check_same_size(a, b, what);
  check_same_size(a, out, what);
  if (a.dtype() == DType::bf16) return add_bf16<kRelu>(a, b, out, what);
  check_f32(a, what);
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

// The bf16 sum: both operands widened to f32 (exactly), added in f32 and rounded once to the
// nearest bf16, ties to even (bf16.h's rounding, written without branches so that the loop
// vectorises): the bits a reorder of the f32 sum would give.
template <bool kRelu>
void CpuBackend::add_bf16(const Tensor& a, const Tensor& b, const Tensor& out, const char* what) {
  DTRAIN_CHECK(b.dtype() == DType::bf16 && out.dtype() == DType::bf16 &&
               a.device() == Device::cpu && b.device() == Device::cpu &&
               out.device() == Device::cpu)
      << what << ": expected three host bf16 tensors";
  const auto* x = a.data<cpu::bf16_t>();
  const auto* y = b.data<cpu::bf16_t>();
  auto* z = out.data<cpu::bf16_t>();
  const int64_t n = a.numel();
#pragma omp parallel for simd if (n > kParallelThreshold) num_threads(threads_)
  for (int64_t i = 0; i < n; ++i) {
    const float sum = std::bit_cast<float>(static_cast<uint32_t>(x[i]) << 16) +
                      std::bit_cast<float>(static_cast<uint32_t>(y[i]) << 16);
    const float v = !kRelu || sum > 0.0f ? sum : 0.0f;
    const uint32_t u = std::bit_cast<uint32_t>(v);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (u >> 16) | 0x40u;
    z[i] = static_cast<cpu::bf16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
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

double CpuBackend::dot(const Tensor& a, const Tensor& b) {
  check_f32(a, "dot");
  check_same_size(a, b, "dot");
  const float* x = a.data<float>();
  const float* y = b.data<float>();
  return cpu::lane_ordered_sum(a.numel(), [x, y](int64_t i) {
    return static_cast<double>(x[i]) * static_cast<double>(y[i]);
  });
}

double CpuBackend::axpby_dot(float alpha, const Tensor& x, float beta, const Tensor& y,
                             const Tensor& z) {
  check_f32(x, "axpby_dot");
  check_same_size(x, y, "axpby_dot");
  check_same_size(x, z, "axpby_dot");
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const float* zp = z.data<float>();
  // axpby's element expression, summed in dot's order.
  return cpu::lane_ordered_sum(x.numel(), [=](int64_t i) {
    const float v = alpha * xp[i] + beta * yp[i];
    yp[i] = v;
    return static_cast<double>(v) * static_cast<double>(zp[i]);
  });
}

void CpuBackend::scale_copy(const Tensor& dst, const Tensor& src, float alpha) {
  check_f32(src, "scale_copy");
  check_same_size(src, dst, "scale_copy");
  const float* s = src.data<float>();
  float* d = dst.data<float>();
  const int64_t n = src.numel();
#pragma omp parallel for simd if (n > kParallelThreshold) num_threads(threads_)
  for (int64_t i = 0; i < n; ++i) d[i] = alpha * s[i];
}

void CpuBackend::run_pass(const PassKernels& pass, const void* functor,
                          const PassBuffers& buffers) {
  DTRAIN_CHECK(pass.cpu != nullptr) << pass.name << " is a sum pass: run_sum_pass runs it";
  pass.cpu(functor, buffers, threads_);
}

double CpuBackend::run_sum_pass(const PassKernels& pass, const void* functor,
                                const PassBuffers& buffers, const Tensor& /*scratch*/) {
  DTRAIN_CHECK(pass.cpu_sum != nullptr) << pass.name << " is not a sum pass: run_pass runs it";
  return pass.cpu_sum(functor, buffers);
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
