// Storage types per DType, the type each is computed in, and loads/stores.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/half.hpp"
#include "gridsampler/gridsampler.hpp"

namespace gridsampler {

// Storage type S -> compute type: float for the 16-bit types and float32,
// double for float64 (docs/design.md §2, "Precision").
template <class S> struct ComputeOf { using type = float; };
template <> struct ComputeOf<double> { using type = double; };
template <class S> using compute_t = typename ComputeOf<S>::type;

template <class S> constexpr DType dtype_of();
template <> constexpr DType dtype_of<Half>() { return DType::kFloat16; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::kBFloat16; }
template <> constexpr DType dtype_of<float>() { return DType::kFloat32; }
template <> constexpr DType dtype_of<double>() { return DType::kFloat64; }

inline float load_as_float(Half v) { return half_to_float(v); }
inline float load_as_float(BFloat16 v) { return bfloat16_to_float(v); }
inline float load_as_float(float v) { return v; }

// Widen a stored value to its compute type (exact).
template <class S> inline compute_t<S> load(const S& v) {
  if constexpr (std::is_same_v<S, double>) return v;
  else return load_as_float(v);
}

// Round a value once to the storage type (to nearest even).
template <class S, class V> inline S store(V v) {
  if constexpr (std::is_same_v<S, Half>) {
    if constexpr (std::is_same_v<V, float>) return half_from_float(v);
    else return half_from_double(static_cast<double>(v));
  }
  else if constexpr (std::is_same_v<S, BFloat16>) {
    if constexpr (std::is_same_v<V, float>) return bfloat16_from_float(v);
    else return bfloat16_from_double(static_cast<double>(v));
  } else return static_cast<S>(v);
}

// Calls f(S{}) with S the storage type of `dtype`.
template <class F> inline decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat16: return f(Half{});
    case DType::kBFloat16: return f(BFloat16{});
    case DType::kFloat32: return f(float{});
    case DType::kFloat64: break;
  }
  return f(double{});
}

}  // namespace gridsampler
