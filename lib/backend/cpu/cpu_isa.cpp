#include "backend/cpu/cpu_isa.h"

#include <dnnl.h>  // dnnl_get_effective_cpu_isa

namespace dtrain {

std::string cpu_isa_name() {
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41:
      return "SSE4.1";
    case dnnl_cpu_isa_avx:
      return "AVX";
    case dnnl_cpu_isa_avx2:
      return "AVX2";
    case dnnl_cpu_isa_avx2_vnni:
      return "AVX2 with VNNI";
    case dnnl_cpu_isa_avx512_mic:
      return "AVX-512 (Xeon Phi)";
    case dnnl_cpu_isa_avx512_mic_4ops:
      return "AVX-512 (Xeon Phi, 4ops)";
    case dnnl_cpu_isa_avx512_core:
      return "AVX-512";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "AVX-512 with VNNI";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "AVX-512 with bfloat16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "AVX-512 with AMX";
    default:
      return "no vector ISA oneDNN knows";  // dnnl_cpu_isa_all: not an x86 CPU it knows
  }
}

bool cpu_has_native_bf16() {
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  return isa == dnnl_cpu_isa_avx512_core_bf16 || isa == dnnl_cpu_isa_avx512_core_amx;
}

}  // namespace dtrain
