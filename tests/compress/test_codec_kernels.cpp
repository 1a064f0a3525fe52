#include <doctest/doctest.h>

#include <algorithm>  // std::max
#include <bit>        // std::bit_cast
#include <cmath>      // std::abs, std::nearbyint
#include <cstring>    // std::memcmp
#include <limits>     // quiet_NaN, infinity

#include "codec_test_data.h"  // make_block, GuardedBytes, GuardedFloats
#include "compress/codec_kernels.h"

using namespace dtrain;
using namespace dtrain::test;
namespace ck = dtrain::codec_kernels;

namespace {

// Every size up to a few vectors (each tail length behind each vector width) and a large odd one.
std::vector<int64_t> sizes() {
  std::vector<int64_t> result;
  for (int64_t n = 0; n <= 200; ++n) result.push_back(n);
  result.push_back(1000003);
  return result;
}

bool same_floats(const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!same_bits(a[i], b[i])) return false;
  return true;
}

// Runs one encoder of both builds into guarded buffers and compares the bytes.
template <typename Encode>
void check_encoders_agree(int64_t bytes, Encode encode) {
  GuardedBytes best(static_cast<size_t>(bytes)), portable(static_cast<size_t>(bytes));
  encode(best.data(), portable.data());
  CHECK(best.guards_intact());
  CHECK(portable.guards_intact());
  CHECK(std::memcmp(best.data(), portable.data(), static_cast<size_t>(bytes)) == 0);
}

// Runs one decoder of both builds (out = or out +=) and compares the floats.
template <typename Decode>
void check_decoders_agree(int64_t n, Decode decode) {
  GuardedFloats best(n, 0.25f), portable(n, 0.25f);
  decode(best.data(), portable.data());
  CHECK(best.guards_intact());
  CHECK(portable.guards_intact());
  CHECK(same_floats(best.data(), portable.data(), n));
}

}  // namespace

TEST_CASE("the best kernels equal the portable ones bit for bit") {
  MESSAGE("best codec kernels: " << std::string(ck::best::isa()));
  for (int64_t n : sizes()) {
    CAPTURE(n);
    auto x = make_block(BlockKind::finite_bits, n, 40 + static_cast<uint64_t>(n));
    if (n > 5) x[5] = std::bit_cast<float>(0x7f800001u);  // NaN with a low-bits-only payload
    if (n > 150) x[150] = -std::numeric_limits<float>::infinity();
    const auto bytes_in = make_block(BlockKind::finite_bits, n, 90 + static_cast<uint64_t>(n));
    GuardedBytes raw(4 * static_cast<size_t>(n));
    std::memcpy(raw.data(), bytes_in.data(), 4 * static_cast<size_t>(n));

    check_decoders_agree(n, [&](float* b, float* p) {
      ck::best::add_f32(raw.data(), n, b);
      ck::portable::add_f32(raw.data(), n, p);
    });
    check_encoders_agree(2 * n, [&](unsigned char* b, unsigned char* p) {
      ck::best::truncate16_encode(x.data(), n, b);
      ck::portable::truncate16_encode(x.data(), n, p);
    });
    check_decoders_agree(n, [&](float* b, float* p) {
      ck::best::truncate16_decode(raw.data(), n, b);
      ck::portable::truncate16_decode(raw.data(), n, p);
    });
    check_decoders_agree(n, [&](float* b, float* p) {
      ck::best::truncate16_decode_add(raw.data(), n, b);
      ck::portable::truncate16_decode_add(raw.data(), n, p);
    });
    check_decoders_agree(n, [&](float* b, float* p) {
      ck::best::quantize8_decode(raw.data(), n, 0.0123f, b);
      ck::portable::quantize8_decode(raw.data(), n, 0.0123f, p);
    });
    check_decoders_agree(n, [&](float* b, float* p) {
      ck::best::quantize8_decode_add(raw.data(), n, 0.0123f, b);
      ck::portable::quantize8_decode_add(raw.data(), n, 0.0123f, p);
    });
    CHECK(ck::best::max_abs_bits(x.data(), n) == ck::portable::max_abs_bits(x.data(), n));
  }
}

TEST_CASE("max_abs_bits finds the largest magnitude wherever it is, and NaN/Inf above all") {
  for (int64_t n : sizes()) {
    if (n == 0) {
      CHECK(ck::best::max_abs_bits(nullptr, 0) == 0);
      continue;
    }
    CAPTURE(n);
    for (int64_t at : {int64_t{0}, n / 2, n - 1}) {
      auto x = make_block(BlockKind::gradient, n, 7);
      x[at] = -1.0f;
      CHECK(ck::best::max_abs_bits(x.data(), n) == 0x3f800000u);
      x[at] = std::numeric_limits<float>::quiet_NaN();
      CHECK(ck::best::max_abs_bits(x.data(), n) > 0x7f800000u);
      x[at] = -std::numeric_limits<float>::infinity();
      CHECK(ck::best::max_abs_bits(x.data(), n) == 0x7f800000u);
    }
  }
}

TEST_CASE("quantize8_encode: both builds round the same way, ties to even included") {
  for (int64_t n : sizes()) {
    CAPTURE(n);
    auto x = make_block(BlockKind::gradient, n, 60 + static_cast<uint64_t>(n));
    float m = 0;
    for (float v : x) m = std::max(m, std::abs(v));
    const float inv = m > 0 ? 127.0f / m : 1.0f;
    check_encoders_agree(n, [&](unsigned char* b, unsigned char* p) {
      ck::best::quantize8_encode(x.data(), n, inv, b);
      ck::portable::quantize8_encode(x.data(), n, inv, p);
    });
    std::vector<float> ties(static_cast<size_t>(n));  // −127 … 126.5, every other one a tie
    for (int64_t i = 0; i < n; ++i) ties[i] = static_cast<float>(i % 254 - 127) + 0.5f * (i % 2);
    check_encoders_agree(n, [&](unsigned char* b, unsigned char* p) {
      ck::best::quantize8_encode(ties.data(), n, 1.0f, b);
      ck::portable::quantize8_encode(ties.data(), n, 1.0f, p);
      int64_t wrong = 0;  // nearbyint rounds half to even in the default rounding mode
      for (int64_t i = 0; i < n; ++i)
        wrong += static_cast<int8_t>(b[i]) != static_cast<int8_t>(std::nearbyint(ties[i]));
      CHECK(wrong == 0);
    });
  }
}
