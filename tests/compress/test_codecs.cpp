#include <doctest/doctest.h>

#include <algorithm>  // std::max
#include <bit>        // std::bit_cast
#include <cmath>      // std::abs, std::isnan, std::isinf
#include <cstring>    // std::memcpy
#include <limits>     // quiet_NaN, infinity

#include "codec_test_data.h"  // make_block, GuardedBytes, GuardedFloats
#include "compress/codec.h"
#include "compress/codecs.h"  // Quantize8Codec::kScaleBlock
#include "core/error.h"       // InputError

using namespace dtrain;
using namespace dtrain::test;

namespace {

constexpr int64_t kSizes[] = {1, 2, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 4097, 1000003};
constexpr BlockKind kKinds[] = {BlockKind::gradient, BlockKind::mixed, BlockKind::negative,
                                BlockKind::one_huge, BlockKind::zeros, BlockKind::finite_bits};

double max_abs(const std::vector<float>& x) {
  double m = 0;
  for (float v : x) m = std::max(m, static_cast<double>(std::abs(v)));
  return m;
}

struct RoundTrip {
  std::vector<float> decoded;
  std::vector<unsigned char> encoded;
};

// Encodes x at an odd address, decodes it at an address off any 64-byte boundary, checks that
// neither wrote outside its buffer and that decode_add equals decode followed by a float add.
RoundTrip round_trip(const Codec& codec, const std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size());
  const size_t bytes = codec.encoded_bytes(n);
  GuardedBytes encoded(bytes);
  codec.encode(x.data(), n, encoded.data());
  CHECK_MESSAGE(encoded.guards_intact(), "encode wrote outside its encoded_bytes");

  GuardedFloats decoded(n, -7.0f);
  codec.decode(encoded.data(), n, decoded.data());
  CHECK_MESSAGE(decoded.guards_intact(), "decode wrote outside its n floats");

  // decode_add onto values unrelated to x: out += decode(in), with the same rounding as a
  // separate add.
  GuardedFloats summed(n);
  for (int64_t i = 0; i < n; ++i) summed.data()[i] = 0.37f * static_cast<float>(i % 11) - 1.1f;
  std::vector<float> expected(summed.data(), summed.data() + n);
  for (int64_t i = 0; i < n; ++i) expected[i] += decoded.data()[i];
  codec.decode_add(encoded.data(), n, summed.data());
  CHECK_MESSAGE(summed.guards_intact(), "decode_add wrote outside its n floats");
  int64_t add_mismatches = 0;
  for (int64_t i = 0; i < n; ++i) add_mismatches += !same_bits(summed.data()[i], expected[i]);
  CHECK(add_mismatches == 0);

  return {std::vector<float>(decoded.data(), decoded.data() + n),
          std::vector<unsigned char>(encoded.data(), encoded.data() + bytes)};
}

// Largest |decoded − x| / error_bound over the block (> 1 means the bound was broken), and the
// first index that broke it.
struct BoundCheck {
  double worst_ratio = 0, max_error = 0;
  int64_t first_violation = -1;
};

// quantize8 takes its range from each scale block of kScaleBlock values: the bound of an element
// is that of its own block's largest magnitude (the other codecs' bounds do not use it).
constexpr int64_t kScaleBlock = Quantize8Codec::kScaleBlock;

double block_max_abs(const std::vector<float>& x, size_t i) {
  const size_t begin = i / kScaleBlock * kScaleBlock;
  const size_t end = std::min(x.size(), begin + kScaleBlock);
  return max_abs(std::vector<float>(x.begin() + static_cast<std::ptrdiff_t>(begin),
                                    x.begin() + static_cast<std::ptrdiff_t>(end)));
}

BoundCheck check_bound(const Codec& codec, const std::vector<float>& x,
                       const std::vector<float>& decoded) {
  BoundCheck result;
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (i % kScaleBlock == 0) m = block_max_abs(x, i);
    const double error = std::abs(static_cast<double>(decoded[i]) - x[i]);
    const double bound = codec.error_bound(m, std::abs(static_cast<double>(x[i])));
    result.max_error = std::max(result.max_error, error);
    const double ratio = bound > 0 ? error / bound : (error > 0 ? INFINITY : 0);
    result.worst_ratio = std::max(result.worst_ratio, ratio);
    if (!(error <= bound) && result.first_violation < 0)
      result.first_violation = static_cast<int64_t>(i);
  }
  return result;
}

uint16_t encoded_half(const std::vector<unsigned char>& encoded, size_t i) {
  uint16_t h;
  std::memcpy(&h, encoded.data() + 2 * i, 2);
  return h;
}

float encoded_scale(const std::vector<unsigned char>& encoded) {
  float s;
  std::memcpy(&s, encoded.data(), 4);
  return s;
}

}  // namespace

TEST_CASE("make_codec knows none, truncate16 and quantize8") {
  CHECK(codec_names() == std::vector<std::string>{"none", "truncate16", "quantize8"});
  for (const auto& name : codec_names()) CHECK(make_codec(name)->name() == name);
  CHECK(make_codec("none")->compression_ratio() == 1.0);
  CHECK(make_codec("truncate16")->compression_ratio() == 2.0);
  CHECK(make_codec("quantize8")->compression_ratio() == doctest::Approx(4.0));
}

TEST_CASE("an unknown codec name is an InputError naming compression.name") {
  CHECK_THROWS_AS(make_codec("zip"), InputError);
  CHECK_THROWS_AS(make_codec(""), InputError);
  try {
    make_codec("quantise8");
    FAIL("no InputError for 'quantise8'");
  } catch (const InputError& e) {
    const std::string message = e.what();
    CHECK(message.find("compression.name") != std::string::npos);
    CHECK(message.find("'quantise8'") != std::string::npos);
    CHECK(message.find("none, truncate16, quantize8") != std::string::npos);
  }
}

TEST_CASE("encoded_bytes is 4n, 2n and n plus 4 per scale block of 1024") {
  for (int64_t n :
       {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1024}, int64_t{1025}, int64_t{1000003}}) {
    CAPTURE(n);
    CHECK(make_codec("none")->encoded_bytes(n) == static_cast<size_t>(4 * n));
    CHECK(make_codec("truncate16")->encoded_bytes(n) == static_cast<size_t>(2 * n));
    const int64_t blocks = (n + 1023) / 1024;
    CHECK(make_codec("quantize8")->encoded_bytes(n) == static_cast<size_t>(4 * blocks + n));
  }
}

TEST_CASE("every codec round-trips every kind of block of odd sizes within its error bound") {
  for (const auto& name : codec_names()) {
    const auto codec = make_codec(name);
    for (BlockKind kind : kKinds) {
      for (int64_t n : kSizes) {
        CAPTURE(name);
        CAPTURE(kind_name(kind));
        CAPTURE(n);
        const auto x = make_block(kind, n, 1000 + static_cast<uint64_t>(n));
        const RoundTrip rt = round_trip(*codec, x);
        const BoundCheck b = check_bound(*codec, x, rt.decoded);
        CAPTURE(b.first_violation);
        CAPTURE(b.worst_ratio);
        CHECK(b.first_violation == -1);
        if (kind == BlockKind::zeros)
          for (float v : rt.decoded) REQUIRE(same_bits(v, 0.0f));
      }
    }
  }
}

TEST_CASE("none is exact, bit for bit") {
  const auto codec = make_codec("none");
  auto x = make_block(BlockKind::finite_bits, 1000003, 5);
  x[17] = std::numeric_limits<float>::quiet_NaN();
  x[18] = -std::numeric_limits<float>::infinity();
  const RoundTrip rt = round_trip(*codec, x);
  int64_t mismatches = 0;
  for (size_t i = 0; i < x.size(); ++i) mismatches += !same_bits(rt.decoded[i], x[i]);
  CHECK(mismatches == 0);
}

TEST_CASE("truncate16 sends the upper 16 bits of each float, truncated, in 2 bytes per value") {
  const auto codec = make_codec("truncate16");
  SUBCASE("hand-checked bit patterns") {
    // 1 + 2^-7 − 2^-23 lies just below the next bfloat16; truncation gives 1, rounding 1 + 2^-7.
    const std::vector<float> x{1.0f,           -2.0f,    1.0f + 0x1p-7f - 0x1p-23f,
                               1.0f + 0x1p-8f, 3.0e-39f, -0.0f};
    const RoundTrip rt = round_trip(*codec, x);
    REQUIRE(rt.encoded.size() == 2 * x.size());
    CHECK(encoded_half(rt.encoded, 0) == 0x3F80);
    CHECK(encoded_half(rt.encoded, 1) == 0xC000);
    CHECK(encoded_half(rt.encoded, 2) == 0x3F80);
    CHECK(rt.decoded[2] == 1.0f);
    CHECK(rt.decoded[3] == 1.0f);  // the low mantissa bit 2^-8 is gone: the codec is lossy
    CHECK(std::bit_cast<uint32_t>(rt.decoded[4]) == (std::bit_cast<uint32_t>(3.0e-39f) & ~0xffffu));
    CHECK(same_bits(rt.decoded[5], -0.0f));
  }
  SUBCASE("every encoded value is bits >> 16 and every decoded value has zero low bits") {
    const auto x = make_block(BlockKind::finite_bits, 1000003, 11);
    const RoundTrip rt = round_trip(*codec, x);
    int64_t wrong_code = 0, wrong_value = 0, changed = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const uint32_t bits = std::bit_cast<uint32_t>(x[i]);
      wrong_code += encoded_half(rt.encoded, i) != (bits >> 16);
      wrong_value += std::bit_cast<uint32_t>(rt.decoded[i]) != (bits & 0xffff0000u);
      changed += !same_bits(rt.decoded[i], x[i]);
    }
    CHECK(wrong_code == 0);
    CHECK(wrong_value == 0);
    CHECK(changed > 999000);  // random low halves are almost never all zero
  }
  SUBCASE("the relative error reaches almost 2^-7 but never 2^-7") {
    const auto x = make_block(BlockKind::mixed, 100000, 12);
    const RoundTrip rt = round_trip(*codec, x);
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i)
      worst = std::max(worst, std::abs(static_cast<double>(rt.decoded[i]) - x[i]) / std::abs(x[i]));
    CHECK(worst < 0x1p-7);
    CHECK(worst > 0x1p-7 * 0.99);
    CHECK(codec->error_bound(1.0, 1.0) < 0x1p-7 * 1.0001);  // the bound is tight, not a fudge
  }
}

TEST_CASE("quantize8 sends a float scale then one int8 per value") {
  const auto codec = make_codec("quantize8");
  SUBCASE("hand-checked block: scale = max/127, q = x/scale rounded half to even") {
    // max 127 → scale 1: q is x rounded; 2.5 → 2, 1.5 → 2, −0.5 → 0 (half to even). Repeated
    // to 70 values so that both the vector loops and the scalar tail see every value.
    const std::vector<float> pattern{127.0f, -64.0f, 3.4f, -0.6f, 0.0f, 2.5f, 1.5f, -0.5f, -127.0f};
    const std::vector<int8_t> expected_q{127, -64, 3, -1, 0, 2, 2, 0, -127};
    std::vector<float> x;
    while (x.size() < 70) x.push_back(pattern[x.size() % pattern.size()]);
    const RoundTrip rt = round_trip(*codec, x);
    REQUIRE(rt.encoded.size() == 4 + x.size());
    CHECK(encoded_scale(rt.encoded) == 1.0f);
    for (size_t i = 0; i < x.size(); ++i) {
      CAPTURE(i);
      const auto q = static_cast<int8_t>(rt.encoded[4 + i]);
      CHECK(q == expected_q[i % pattern.size()]);
      CHECK(rt.decoded[i] == static_cast<float>(q));
    }
  }
  SUBCASE("the error reaches almost scale/2, so the codec really is 8-bit") {
    const auto x = make_block(BlockKind::gradient, 100000, 13);
    const RoundTrip rt = round_trip(*codec, x);
    const double scale = block_max_abs(x, 0) / 127;  // the first scale block's
    CHECK(encoded_scale(rt.encoded) == doctest::Approx(scale).epsilon(1e-6));
    const std::vector<float> first(x.begin(), x.begin() + kScaleBlock);
    const std::vector<float> first_decoded(rt.decoded.begin(), rt.decoded.begin() + kScaleBlock);
    const BoundCheck b = check_bound(*codec, x, rt.decoded);
    CHECK(b.first_violation == -1);
    CHECK(check_bound(*codec, first, first_decoded).max_error > 0.49 * scale);
    CHECK(codec->error_bound(127.0, 0.0) < 0.5001);  // the bound is tight, not a fudge
  }
  SUBCASE("the largest magnitude may be negative; it maps to -127") {
    const auto x = make_block(BlockKind::negative, 1001, 14);
    const RoundTrip rt = round_trip(*codec, x);
    size_t at = 0;
    for (size_t i = 0; i < x.size(); ++i)
      if (std::abs(x[i]) > std::abs(x[at])) at = i;
    CHECK(static_cast<int8_t>(rt.encoded[4 + at]) == -127);
    CHECK(encoded_scale(rt.encoded) == doctest::Approx(-x[at] / 127.0).epsilon(1e-6));
  }
  SUBCASE("one huge value flushes the small ones of its scale block to zero, and only those") {
    const auto x = make_block(BlockKind::one_huge, 4097, 15);
    const RoundTrip rt = round_trip(*codec, x);
    size_t huge = 0;
    for (size_t i = 0; i < x.size(); ++i)
      if (std::abs(x[i]) > std::abs(x[huge])) huge = i;
    int64_t nonzero_beside = 0, exact_elsewhere = 0, elsewhere = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (i / kScaleBlock == huge / kScaleBlock) {
        nonzero_beside += i != huge && rt.decoded[i] != 0.0f;
      } else {
        ++elsewhere;  // the other blocks keep their small values to 8 bits of their own range
        exact_elsewhere +=
            std::abs(rt.decoded[i] - x[i]) <= 0.5 * block_max_abs(x, i) / 127 * 1.001;
      }
    }
    CHECK(nonzero_beside == 0);
    CHECK(elsewhere > 3000);
    CHECK(exact_elsewhere == elsewhere);
    CHECK(check_bound(*codec, x, rt.decoded).first_violation == -1);
  }
  SUBCASE("a block of large values beside one of small ones: each keeps 8 bits of its range") {
    // A transformer's gradient: the head's values 1000× an attention layer's. With one range
    // for both, every small value would round to zero.
    std::vector<float> x(2 * kScaleBlock);
    for (int64_t i = 0; i < kScaleBlock; ++i)
      x[i] = 1.0f + 0.001f * static_cast<float>(i), x[kScaleBlock + i] = 1e-3f * x[i];
    const RoundTrip rt = round_trip(*codec, x);
    double worst_small = 0;
    for (int64_t i = kScaleBlock; i < 2 * kScaleBlock; ++i)
      worst_small =
          std::max(worst_small, std::abs(static_cast<double>(rt.decoded[i]) - x[i]) / x[i]);
    CHECK(worst_small < 0.01);  // 8 bits of the small block's own range
  }
  SUBCASE("±FLT_MAX decodes to finite values") {
    std::vector<float> x = make_block(BlockKind::gradient, 100, 16);
    x[10] = std::numeric_limits<float>::max(), x[90] = -std::numeric_limits<float>::max();
    const RoundTrip rt = round_trip(*codec, x);
    CHECK(std::isfinite(rt.decoded[10]));
    CHECK(std::isfinite(rt.decoded[90]));
    CHECK(check_bound(*codec, x, rt.decoded).first_violation == -1);
  }
  SUBCASE("an all-zero block has scale 0, not NaN, and decodes to zeros") {
    const std::vector<float> x(1000, 0.0f);
    const RoundTrip rt = round_trip(*codec, x);
    CHECK(same_bits(encoded_scale(rt.encoded), 0.0f));
    for (size_t i = 0; i < x.size(); ++i) REQUIRE(rt.encoded[4 + i] == 0);
    for (float v : rt.decoded) REQUIRE(same_bits(v, 0.0f));
  }
  SUBCASE("a block too small for a normal scale is sent as zeros") {
    std::vector<float> x(100, 1e-38f);
    x[3] = -1e-37f;
    const RoundTrip rt = round_trip(*codec, x);
    CHECK(encoded_scale(rt.encoded) == 0.0f);
    for (float v : rt.decoded) REQUIRE(v == 0.0f);
    CHECK(check_bound(*codec, x, rt.decoded).first_violation == -1);
  }
}

TEST_CASE("NaN and Inf: truncate16 keeps them per element, quantize8 poisons the whole block") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // A signalling NaN whose payload lies only in the low 16 bits: plain truncation would make it
  // Inf.
  const float low_nan = std::bit_cast<float>(0x7f800001u);
  std::vector<float> x = make_block(BlockKind::gradient, 1000, 21);
  x[3] = nan, x[100] = -inf, x[101] = inf, x[500] = low_nan, x[998] = -nan;

  SUBCASE("truncate16") {
    const RoundTrip rt = round_trip(*make_codec("truncate16"), x);
    CHECK(std::isnan(rt.decoded[3]));
    CHECK(rt.decoded[100] == -inf);
    CHECK(rt.decoded[101] == inf);
    CHECK(std::isnan(rt.decoded[500]));
    CHECK(std::isnan(rt.decoded[998]));
    int64_t non_finite = 0;
    for (float v : rt.decoded) non_finite += !std::isfinite(v);
    CHECK(non_finite == 5);  // the others are untouched
  }
  SUBCASE("quantize8: a NaN anywhere makes every value NaN") {
    const RoundTrip rt = round_trip(*make_codec("quantize8"), x);
    CHECK(std::isnan(encoded_scale(rt.encoded)));
    for (float v : rt.decoded) REQUIRE(std::isnan(v));
  }
  SUBCASE("quantize8: an Inf alone also makes every value NaN") {
    std::vector<float> y = make_block(BlockKind::gradient, 77, 22);
    y[76] = -inf;
    const auto codec = make_codec("quantize8");
    const RoundTrip rt = round_trip(*codec, y);
    CHECK(std::isnan(encoded_scale(rt.encoded)));
    for (float v : rt.decoded) REQUIRE(std::isnan(v));
    GuardedFloats sum(77, 1.0f);  // and the reduce step propagates it
    GuardedBytes encoded(codec->encoded_bytes(77));
    codec->encode(y.data(), 77, encoded.data());
    codec->decode_add(encoded.data(), 77, sum.data());
    for (int64_t i = 0; i < 77; ++i) REQUIRE(std::isnan(sum.data()[i]));
  }
}

TEST_CASE("n = 0 is a no-op apart from quantize8's header") {
  for (const auto& name : codec_names()) {
    CAPTURE(name);
    const auto codec = make_codec(name);
    GuardedBytes encoded(codec->encoded_bytes(0));
    const float none = 0.0f;
    codec->encode(&none, 0, encoded.data());
    CHECK(encoded.guards_intact());
    GuardedFloats out(0);
    codec->decode(encoded.data(), 0, out.data());
    codec->decode_add(encoded.data(), 0, out.data());
    CHECK(out.guards_intact());
  }
}
