// One element of any dtype, read and written as double: the only place the
// host side converts between storage types and double.
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#include "core/dtype.hpp"
#include "gridsampler/gridsampler.hpp"

namespace gridsampler::host {

// double -> float, rounded to nearest even, without the undefined behaviour
// of a C++ conversion of an out-of-range value.
inline float float_from_double(double v) {
  const double a = std::fabs(v);
  const float sign = std::signbit(v) ? -1.0f : 1.0f;
  // Halfway between FLT_MAX and 2^128: from there on (ties to even) it is Inf.
  constexpr double kOverflow = 0x1.ffffffp127;
  if (a >= kOverflow) return std::copysign(std::numeric_limits<float>::infinity(), sign);
  if (a > std::numeric_limits<float>::max()) return std::copysign(std::numeric_limits<float>::max(), sign);
  return static_cast<float>(v);  // NaN included
}

// `v` rounded once to the storage type S (as store_element does).
template <class S>
inline S element_from_double(double v) {
  if constexpr (std::is_same_v<S, float>) {
    return float_from_double(v);
  } else {
    return store<S>(v);
  }
}

// The element at `p`, widened exactly to double.
double load_element(const void* p, DType dtype);

// Rounds `v` once to `dtype` (to nearest even) and stores it at `p`. Values
// beyond a type's range become its largest finite value or infinity, as the
// rounding dictates; NaN stays NaN.
void store_element(void* p, DType dtype, double v);

}  // namespace gridsampler::host
