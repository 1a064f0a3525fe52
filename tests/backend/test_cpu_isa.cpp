// The CPU backend names the instruction set oneDNN dispatches to, and that name follows the
// CPU's own feature flags (/proc/cpuinfo), so the start-up log can be trusted to say whether
// the kernels run with AVX-512, native bfloat16 or AMX.
#include <doctest/doctest.h>

#include <cstdlib>  // getenv: an ISA cap set by the user
#include <fstream>
#include <sstream>
#include <string>

#include "backend/backend.h"
#include "backend/cpu/cpu_isa.h"

using namespace dtrain;

namespace {
// The flags line of the first processor in /proc/cpuinfo, padded with spaces ("" elsewhere).
std::string cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("flags", 0) == 0) {
      // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) on " " + substr.
      std::string flags = " ";
      flags.append(line, line.find(':') + 1).append(" ");
      return flags;
    }
  return "";
}
bool has_flag(const std::string& flags, const std::string& flag) {
  return flags.find(" " + flag + " ") != std::string::npos;
}
}  // namespace

TEST_CASE("the CPU backend's name carries oneDNN's ISA, which follows the CPU's flags") {
  const std::string isa = cpu_isa_name();
  CHECK(!isa.empty());
  const auto backend = make_backend({DeviceChoice::cpu, 1, 0});
  CHECK(backend->name().find(", " + isa + ", ") != std::string::npos);

  const std::string flags = cpu_flags();
  if (flags.empty() || std::getenv("ONEDNN_MAX_CPU_ISA") || std::getenv("DNNL_MAX_CPU_ISA")) {
    MESSAGE("no /proc/cpuinfo flags, or an ISA cap set: the mapping is not checked");
    return;
  }
  CAPTURE(isa);
  if (has_flag(flags, "avx512_bf16")) {
    CHECK((isa == "AVX-512 with bfloat16" || isa == "AVX-512 with AMX"));
  } else if (has_flag(flags, "avx512f") && has_flag(flags, "avx512bw")) {
    CHECK(isa.rfind("AVX-512", 0) == 0);
    CHECK(isa != "AVX-512 with bfloat16");
  } else if (has_flag(flags, "avx2")) {
    CHECK(isa.rfind("AVX2", 0) == 0);
  }
  if (isa == "AVX-512 with AMX") CHECK(has_flag(flags, "amx_bf16"));
}
