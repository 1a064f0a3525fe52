// What the host says of memory: what is available to a new run (the start-up memory check's
// limit when cluster.memory_per_rank is not given) and the most this process has held
// (run.yaml's peak).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace dtrain {

// MemAvailable of /proc/meminfo in bytes (what the kernel can give without swapping); nullopt
// where there is no such file or line. `meminfo`: another file of that format, for tests.
std::optional<int64_t> available_host_memory(const std::string& meminfo = "/proc/meminfo");
// This process's peak resident set (getrusage's ru_maxrss), in bytes.
int64_t peak_resident_bytes();

}  // namespace dtrain
