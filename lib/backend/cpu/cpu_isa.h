// The instruction set oneDNN dispatches to on this CPU: the most capable one the hardware has,
// lowered by ONEDNN_MAX_CPU_ISA where set. It decides which kernels run (AVX2, AVX-512, VNNI,
// native bfloat16, AMX tiles), so the start-up log names it beside oneDNN's version.
#pragma once
#include <string>

namespace dtrain {

// oneDNN's own words for it, e.g. "AVX-512 with bfloat16" (Intel's marketing names left out).
std::string cpu_isa_name();
// Whether that instruction set computes bfloat16 natively (AVX512-BF16 or AMX): without it
// oneDNN emulates bf16 with f32 instructions, slower than f32 itself.
bool cpu_has_native_bf16();

}  // namespace dtrain
