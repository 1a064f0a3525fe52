#include "core/cpu_policy.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>  // _mm_getcsr, _mm_setcsr: MXCSR
#endif
#ifdef __linux__
#include <sched.h>  // sched_setscheduler, SCHED_BATCH
#endif

namespace dtrain {

namespace {
#if defined(__x86_64__) || defined(__i386__)
constexpr unsigned kFlushToZero = 0x8000;       // MXCSR.FTZ: denormal results become zero
constexpr unsigned kDenormalsAreZero = 0x0040;  // MXCSR.DAZ: denormal inputs read as zero
#endif
}  // namespace

void flush_denormals() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_setcsr(_mm_getcsr() | kFlushToZero | kDenormalsAreZero);
#endif
}

bool flushes_denormals() {
#if defined(__x86_64__) || defined(__i386__)
  const unsigned both = kFlushToZero | kDenormalsAreZero;
  return (_mm_getcsr() & both) == both;
#else
  return false;
#endif
}

bool run_as_compute_thread() {
#ifdef __linux__
  sched_param param{};  // priority 0: the only one the normal policies have
  return sched_setscheduler(0, SCHED_BATCH, &param) == 0;
#else
  return false;
#endif
}

void run_as_latency_bound_thread() {
#ifdef __linux__
  if (sched_getscheduler(0) != SCHED_BATCH) return;  // a real-time policy a user chose stays
  sched_param param{};
  sched_setscheduler(0, SCHED_OTHER, &param);
#endif
}

bool runs_as_compute_thread() {
#ifdef __linux__
  return sched_getscheduler(0) == SCHED_BATCH;
#else
  return false;
#endif
}

}  // namespace dtrain
