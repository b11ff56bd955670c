// The 16-bit conversions: exact, round to nearest even, one rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/half.hpp"

namespace gridsampler {
namespace {

TEST(Half, EveryBitPatternRoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const Half h{static_cast<uint16_t>(b)};
    const double d = half_to_double(h);
    if (std::isnan(d)) {
      EXPECT_TRUE(std::isnan(half_to_double(half_from_double(d))));
      continue;
    }
    EXPECT_EQ(half_from_double(d).bits, h.bits) << b;
    EXPECT_EQ(half_from_float(static_cast<float>(d)).bits, h.bits) << b;
  }
}

TEST(Half, KnownValues) {
  EXPECT_EQ(half_from_double(1.0).bits, 0x3c00);
  EXPECT_EQ(half_from_double(-2.0).bits, 0xc000);
  EXPECT_EQ(half_from_double(65504.0).bits, 0x7bff);
  EXPECT_EQ(half_from_double(65519.99).bits, 0x7bff);
  EXPECT_EQ(half_from_double(65520.0).bits, 0x7c00);  // ties to even: overflows
  EXPECT_EQ(half_from_double(std::ldexp(1.0, -24)).bits, 0x0001);
  EXPECT_EQ(half_from_double(std::ldexp(1.0, -25)).bits, 0x0000);  // tie to even (0)
  EXPECT_EQ(half_from_double(std::ldexp(3.0, -25)).bits, 0x0002);  // tie to even (2)
  EXPECT_EQ(half_from_double(1.0 + std::ldexp(1.0, -11)).bits, 0x3c00);  // tie to even
  EXPECT_EQ(half_from_double(1.0 + std::ldexp(3.0, -11)).bits, 0x3c02);
  EXPECT_EQ(half_from_double(-0.0).bits, 0x8000);
  EXPECT_EQ(half_from_double(INFINITY).bits, 0x7c00);
  EXPECT_EQ(half_from_double(-INFINITY).bits, 0xfc00);
}

// Rounding a double straight to half differs from rounding it to float first
// when the float rounding lands on a half tie.
TEST(Half, SingleRoundingFromDouble) {
  const double v = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);  // just above a tie
  EXPECT_EQ(static_cast<double>(static_cast<float>(v)), 1.0 + std::ldexp(1.0, -11));
  EXPECT_EQ(half_from_double(v).bits, 0x3c01);
  const BFloat16 b = bfloat16_from_double(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40));
  EXPECT_EQ(b.bits, 0x3f81);
}

// The fast float path (bit tricks) against the double path, on the floats
// where rounding is decided: every half, its float neighbours, and every
// midpoint between consecutive halves (ties) and its neighbours, both signs,
// up to the overflow threshold 65520 and beyond.
TEST(Half, FloatPathMatchesDoublePathAtEveryTie) {
  for (uint32_t b = 0; b < 0x7c00; ++b) {
    const float lo = static_cast<float>(half_to_double(Half{static_cast<uint16_t>(b)}));
    const float hi = b + 1 == 0x7c00 ? 65536.0f : static_cast<float>(half_to_double(Half{static_cast<uint16_t>(b + 1)}));
    const float mid = lo + (hi - lo) / 2;  // exact: halves have 11 significant bits
    for (float f : {lo, mid, hi}) {
      for (float g : {f, std::nextafter(f, 0.0f), std::nextafter(f, INFINITY)}) {
        for (float v : {g, -g}) {
          ASSERT_EQ(half_from_float(v).bits, half_from_double(v).bits) << v << " near half " << b;
          EXPECT_EQ(half_to_float(Half{static_cast<uint16_t>(b)}), lo);
        }
      }
    }
  }
  for (float v : {65504.0f, 65519.996f, 65520.0f, 1e10f, INFINITY, -INFINITY, 0x1p-25f, 0x1p-24f, 0x1.8p-25f}) {
    EXPECT_EQ(half_from_float(v).bits, half_from_double(v).bits) << v;
  }
  EXPECT_TRUE(std::isnan(half_to_float(half_from_float(NAN))));
  EXPECT_EQ(half_from_float(NAN).bits & 0x7fffu, 0x7e00u);
}

#if defined(__FLT16_MAX__) && !defined(__clang__)
TEST(Half, MatchesCompilerFloat16OnRandomFloats) {
  std::mt19937 rng(1);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    const _Float16 want = static_cast<_Float16>(f);
    uint16_t want_bits;
    std::memcpy(&want_bits, &want, 2);
    ASSERT_EQ(half_from_float(f).bits, want_bits) << f;
  }
}
#endif

TEST(BFloat16, EveryBitPatternRoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const BFloat16 h{static_cast<uint16_t>(b)};
    const float f = bfloat16_to_float(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bfloat16_to_float(bfloat16_from_float(f))));
      EXPECT_TRUE(std::isnan(bfloat16_to_double(bfloat16_from_double(f))));
      continue;
    }
    EXPECT_EQ(bfloat16_from_float(f).bits, h.bits) << b;
    EXPECT_EQ(bfloat16_from_double(f).bits, h.bits) << b;
  }
}

// The float fast path and the general double path agree on every float.
TEST(BFloat16, FloatAndDoublePathsAgree) {
  std::mt19937 rng(2);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(bfloat16_from_float(f).bits, bfloat16_from_double(f).bits) << f;
  }
}

}  // namespace
}  // namespace gridsampler
