#include "host/element_access.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/dtype.hpp"

namespace gridsampler::host {
namespace {

// double -> float, rounded to nearest even, without the undefined behaviour
// of a C++ conversion of an out-of-range value.
float float_from_double(double v) {
  const double a = std::fabs(v);
  const float sign = std::signbit(v) ? -1.0f : 1.0f;
  // Halfway between FLT_MAX and 2^128: from there on (ties to even) it is Inf.
  constexpr double kOverflow = 0x1.ffffffp127;
  if (a >= kOverflow) return std::copysign(std::numeric_limits<float>::infinity(), sign);
  if (a > std::numeric_limits<float>::max()) return std::copysign(std::numeric_limits<float>::max(), sign);
  return static_cast<float>(v);  // NaN included
}

}  // namespace

double load_element(const void* p, DType dtype) {
  return visit_dtype(dtype, [p](auto tag) {
    using S = decltype(tag);
    S s;
    std::memcpy(&s, p, sizeof s);
    return static_cast<double>(load(s));
  });
}

void store_element(void* p, DType dtype, double v) {
  visit_dtype(dtype, [p, v](auto tag) {
    using S = decltype(tag);
    S s;
    if constexpr (std::is_same_v<S, float>) s = float_from_double(v);
    else s = store<S>(v);
    std::memcpy(p, &s, sizeof s);
  });
}

}  // namespace gridsampler::host
