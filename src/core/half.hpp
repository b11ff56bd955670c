// 16-bit floating-point storage types and their exact conversions.
//
// Why hand-written: Highway 1.0.3 (Debian 12) has no scalar float16 helpers,
// g++'s _Float16 is x86-only and clang 14 lacks it, and the project needs a
// *direct* double -> 16-bit rounding (one rounding, never double -> float ->
// half). The conversions are checked exhaustively in tests/half_test.cpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace gridsampler {

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

namespace detail {

// Rounds `v` to the nearest value of a binary format with `kMantBits`
// fraction bits and exponent range [1 - kBias, kBias], ties to even, and
// returns its bit pattern. Exact for every double input (a single rounding).
template <int kMantBits, int kBias, uint16_t kQuietNan>
inline uint16_t round_to_bits(double v) {
  uint64_t raw;
  std::memcpy(&raw, &v, sizeof raw);
  const uint16_t sign = static_cast<uint16_t>((raw >> 63) << 15);
  const uint16_t inf = static_cast<uint16_t>(((2 * kBias + 1) << kMantBits));
  if (std::isnan(v)) return static_cast<uint16_t>(sign | kQuietNan);
  const double a = std::fabs(v);
  if (std::isinf(a)) return static_cast<uint16_t>(sign | inf);
  constexpr int kEMin = 1 - kBias;
  if (a < std::ldexp(1.0, kEMin)) {
    // Subnormal range: a multiple of 2^(kEMin - kMantBits). A result of
    // exactly 2^kMantBits is the smallest normal, whose bits are the same.
    const double m = std::nearbyint(std::ldexp(a, kMantBits - kEMin));
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(m));
  }
  int e2 = 0;
  std::frexp(a, &e2);  // a = f * 2^e2, f in [0.5, 1)
  int e = e2 - 1;      // a in [2^e, 2^(e+1))
  double m = std::nearbyint(std::ldexp(a, kMantBits - e));  // in [2^k, 2^(k+1)]
  if (m == std::ldexp(1.0, kMantBits + 1)) {
    m = std::ldexp(1.0, kMantBits);
    ++e;
  }
  if (e > kBias) return static_cast<uint16_t>(sign | inf);
  const uint32_t frac = static_cast<uint32_t>(m) - (1u << kMantBits);
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(e + kBias) << kMantBits) | frac);
}

template <int kMantBits, int kBias>
inline double bits_to_double(uint16_t bits) {
  const bool neg = (bits & 0x8000u) != 0;
  const uint32_t exp = (bits & 0x7fffu) >> kMantBits;
  const uint32_t frac = bits & ((1u << kMantBits) - 1);
  double mag;
  if (exp == 0) {
    mag = std::ldexp(static_cast<double>(frac), 1 - kBias - kMantBits);
  } else if (exp == static_cast<uint32_t>(2 * kBias + 1)) {
    mag = frac == 0 ? INFINITY : NAN;
  } else {
    mag = std::ldexp(static_cast<double>(frac | (1u << kMantBits)),
                     static_cast<int>(exp) - kBias - kMantBits);
  }
  return neg ? -mag : mag;
}

}  // namespace detail

inline Half half_from_double(double v) { return {detail::round_to_bits<10, 15, 0x7e00>(v)}; }
inline double half_to_double(Half h) { return detail::bits_to_double<10, 15>(h.bits); }

// float <-> float16 on the bits, without library calls (the kernels convert
// every element they load or store, and the double-based versions above
// are far slower). Both are exact: float -> half rounds to
// nearest even once, exactly as half_from_double(double(v)) does, since
// float -> double is exact (half_test checks every half and random floats
// against the compiler's _Float16).
inline Half half_from_float(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u >= 0x7f800000u) return {static_cast<uint16_t>(sign | (u > 0x7f800000u ? 0x7e00u : 0x7c00u))};
  if (u >= 0x477ff000u) return {static_cast<uint16_t>(sign | 0x7c00u)};  // >= 65520 rounds to infinity
  if (u < 0x38800000u) {
    // Below 2^-14: a multiple of 2^-24. Adding 0.5 (whose ulp is 2^-24)
    // rounds it to nearest even; the bits above 0.5's are the result.
    float a;
    std::memcpy(&a, &u, sizeof a);
    const float shifted = a + 0.5f;
    uint32_t b;
    std::memcpy(&b, &shifted, sizeof b);
    return {static_cast<uint16_t>(sign | (b - 0x3f000000u))};
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to
  // nearest even; a carry moves into the exponent as it should.
  const uint32_t odd = (u >> 13) & 1u;
  u += 0xc8000fffu + odd;
  return {static_cast<uint16_t>(sign | (u >> 13))};
}

inline float half_to_float(Half h) {
  // Selects instead of branches, so that loops of it vectorise.
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t em = static_cast<uint32_t>(h.bits & 0x7fffu) << 13;  // exponent and fraction in place
  const uint32_t exp = em & 0x0f800000u;
  const uint32_t normal = em + (112u << 23);  // rebias 15 -> 127
  // Infinity stays infinite; a NaN becomes a quiet NaN.
  const uint32_t special = (em + (224u << 23)) | ((em & 0x007fffffu) != 0 ? 0x00400000u : 0u);
  // Zero or subnormal: 1.fraction x 2^-14 minus 2^-14, exact.
  float sub_f;
  const uint32_t sub_bits = em + (113u << 23);
  std::memcpy(&sub_f, &sub_bits, sizeof sub_f);
  sub_f -= 0x1p-14f;
  uint32_t sub;
  std::memcpy(&sub, &sub_f, sizeof sub);
  const uint32_t u = sign | (exp == 0 ? sub : exp == 0x0f800000u ? special : normal);
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline BFloat16 bfloat16_from_double(double v) {
  return {detail::round_to_bits<7, 127, 0x7fc0>(v)};
}
inline BFloat16 bfloat16_from_float(float v) {
  // float -> bfloat16 keeps the high half of the bits, rounded to nearest even.
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  if (std::isnan(v)) return {static_cast<uint16_t>((u >> 16) | 0x0040u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return {static_cast<uint16_t>(u >> 16)};
}
inline float bfloat16_to_float(BFloat16 b) {
  const uint32_t u = static_cast<uint32_t>(b.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline double bfloat16_to_double(BFloat16 b) { return bfloat16_to_float(b); }

}  // namespace gridsampler
