// Values with units, as network, time and memory settings are written: rates ("10Gbps"),
// durations ("20us") and sizes ("20GB"). The text is kept beside the number so that a resolved
// config reads like the user's.
#pragma once
#include <string>

namespace dtrain {

// "10Gbps" (bits), "1.5GBps" (bytes), "100Mbps", "1Gbit/s" → bytes per second (> 0), decimal
// prefixes k, M, G, T as network rates are quoted. InputError on anything else.
double parse_bandwidth(const std::string& text);
// "20us", "1ms", "0.5s", "100ns", "0" → seconds (>= 0). InputError on anything else.
double parse_duration(const std::string& text);
// "20GB", "1.5TB", "800MB" (decimal, as disks and GPU data sheets quote them), "512MiB", "16GiB"
// (binary, as free(1) and /proc/meminfo count), "4096B" → bytes (> 0). InputError on anything
// else.
double parse_size(const std::string& text);

// A rate as configured: bytes per second and the text it was written as.
struct Rate {
  double bytes_per_s = 0;
  std::string text;
  bool operator==(const Rate&) const = default;
};

// A duration as configured: seconds and the text it was written as.
struct Duration {
  double seconds = 0;
  std::string text = "0";
  bool operator==(const Duration&) const = default;
};

// A size as configured: bytes and the text it was written as.
struct ByteSize {
  double bytes = 0;
  std::string text;
  bool operator==(const ByteSize&) const = default;
};

}  // namespace dtrain
