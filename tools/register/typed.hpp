// The registration computes in float or double throughout (the library's
// float32 or float64): its buffers are dense host::Tensors of that dtype,
// read and written through a typed pointer in the host-side loops.
#pragma once

#include <type_traits>

#include "gridsampler/gridsampler.hpp"
#include "host/tensor.hpp"

namespace gridsampler::registration {

template <class T>
constexpr DType dtype_of() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  return std::is_same_v<T, float> ? DType::kFloat32 : DType::kFloat64;
}

// The elements of a dense tensor of dtype_of<T>() (the caller made it so).
template <class T>
T* data(host::Tensor& t) {
  return static_cast<T*>(t.mutable_view().data);
}
template <class T>
const T* data(const host::Tensor& t) {
  return static_cast<const T*>(t.view().data);
}

}  // namespace gridsampler::registration
