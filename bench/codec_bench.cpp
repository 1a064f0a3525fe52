// Codec throughput: encode, decode and decode_add of each codec on a 1 MiB block (about what
// one ring step of a small model moves; L2-sized) and a 16 MiB block (well beyond L2),
// in GB/s of float input (4n bytes / time), best of repeated runs. memcpy of the same bytes and
// quantize8's max-|x| pass alone are printed as references. Not a test: no thresholds.
//   dtrain_codec_bench [--seconds S]   (S: measuring time per cell, default 0.3)
#include <CLI/CLI.hpp>  // command line

#include <algorithm>  // std::min
#include <chrono>
#include <cstdio>
#include <cstring>  // std::memcpy, std::memset
#include <string>

#include "compress/codec.h"          // make_codec, codec_names
#include "compress/codec_kernels.h"  // best::max_abs_bits, best::isa
#include "core/rng.h"                // random_normal
#include "core/tensor.h"             // cpu_allocator: 64-byte aligned buffers

namespace {

using Clock = std::chrono::steady_clock;

// Best time of `run` over at least 5 repetitions and `seconds` of measuring.
template <typename Run>
double best_seconds(double seconds, Run run) {
  double best = 1e30, total = 0;
  for (int rep = 0; rep < 5 || total < seconds; ++rep) {
    const auto start = Clock::now();
    run();
    const double t = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::min(best, t);
    total += t;
  }
  return best;
}

// A 64-byte aligned buffer from the project's CPU allocator.
class Buffer {
 public:
  explicit Buffer(size_t bytes) : ptr_(dtrain::cpu_allocator().allocate(bytes)) {
    std::memset(ptr_, 0, bytes);  // fault the pages in before timing
  }
  ~Buffer() { dtrain::cpu_allocator().deallocate(ptr_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Codec throughput: encode, decode, decode_add in GB/s of float input"};
  double seconds = 0.3;
  app.add_option("--seconds", seconds, "measuring time per cell");
  CLI11_PARSE(app, argc, argv);

  std::printf("codec kernels: %s; GB/s of float input (4n bytes / time), best of repetitions\n\n",
              dtrain::codec_kernels::best::isa());
  std::printf("%-12s %7s %8s %10s %10s %12s\n", "codec", "block", "bytes/x", "encode", "decode",
              "decode_add");
  for (int64_t mib : {1, 16}) {
    const int64_t n = mib * (1 << 20) / 4;
    const auto bytes = static_cast<size_t>(n) * sizeof(float);
    Buffer in(bytes), out(bytes), encoded(bytes + 64);
    for (int64_t i = 0; i < n; ++i) in.as<float>()[i] = 1e-3f * dtrain::random_normal(1, 0, i);
    const auto gbps = [&](double t) { return static_cast<double>(bytes) / t * 1e-9; };
    const std::string block = std::to_string(mib) + " MiB";

    for (const auto& name : dtrain::codec_names()) {
      const auto codec = dtrain::make_codec(name);
      const double enc =
          best_seconds(seconds, [&] { codec->encode(in.as<float>(), n, encoded.as<void>()); });
      const double dec =
          best_seconds(seconds, [&] { codec->decode(encoded.as<void>(), n, out.as<float>()); });
      const double add =
          best_seconds(seconds, [&] { codec->decode_add(encoded.as<void>(), n, out.as<float>()); });
      std::printf("%-12s %7s %8.2f %10.1f %10.1f %12.1f\n", name.c_str(), block.c_str(),
                  static_cast<double>(codec->encoded_bytes(n)) / static_cast<double>(n), gbps(enc),
                  gbps(dec), gbps(add));
    }
    const double copy =
        best_seconds(seconds, [&] { std::memcpy(out.as<void>(), in.as<void>(), bytes); });
    volatile uint32_t sink = 0;
    const double max_abs = best_seconds(
        seconds, [&] { sink = dtrain::codec_kernels::best::max_abs_bits(in.as<float>(), n); });
    std::printf("%-12s %7s %8s %10.1f   (reference: copy of the float bytes)\n", "memcpy",
                block.c_str(), "", gbps(copy));
    std::printf("%-12s %7s %8s %10.1f   (quantize8's first pass alone: read only)\n", "max|x|",
                block.c_str(), "", gbps(max_abs));
  }
  return 0;
}
