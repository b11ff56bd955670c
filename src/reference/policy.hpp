// What the 2-D and 3-D references share: the coordinate policy of
// core/coords.hpp with the padding mode as a run-time value, and strided
// element access of any rank. Plain scalar code, independent of the kernels.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "core/coords.hpp"
#include "gridsampler/gridsampler.hpp"

namespace gridsampler::reference {

template <class T>
T source_index(Padding p, T coord, int64_t size, bool align, T* mult) {
  switch (p) {
    case Padding::kZeros: return coords::source_index<Padding::kZeros>(coord, size, align, mult);
    case Padding::kBorder: return coords::source_index<Padding::kBorder>(coord, size, align, mult);
    case Padding::kReflection: break;
  }
  return coords::source_index<Padding::kReflection>(coord, size, align, mult);
}

template <class T>
T bicubic_source(Padding p, T coord, int64_t size, bool align, T* mult) {
  switch (p) {
    case Padding::kZeros: return coords::bicubic_source<Padding::kZeros>(coord, size, align, mult);
    case Padding::kBorder: return coords::bicubic_source<Padding::kBorder>(coord, size, align, mult);
    case Padding::kReflection: break;
  }
  return coords::bicubic_source<Padding::kReflection>(coord, size, align, mult);
}

template <class T>
int64_t tap_index(Padding p, T pos, int64_t size, bool align) {
  switch (p) {
    case Padding::kZeros: return coords::tap_index<Padding::kZeros>(pos, size, align);
    case Padding::kBorder: return coords::tap_index<Padding::kBorder>(pos, size, align);
    case Padding::kReflection: break;
  }
  return coords::tap_index<Padding::kReflection>(pos, size, align);
}

// Strided element access: at(i0, i1, ...) with one index per dimension.
template <class S, std::size_t Rank>
struct View {
  S* data;
  std::array<int64_t, Rank> st;
  template <class... I>
  S& at(I... index) const {
    static_assert(sizeof...(I) == Rank, "one index per dimension");
    const int64_t i[] = {static_cast<int64_t>(index)...};
    int64_t offset = 0;
    for (std::size_t d = 0; d < Rank; ++d) offset += i[d] * st[d];
    return data[offset];
  }
};
template <class S, std::size_t Rank>
View<const S, Rank> view(const BasicTensorView<const void*, Rank>& t) {
  return {static_cast<const S*>(t.data), t.strides};
}
template <class S, std::size_t Rank>
View<S, Rank> view(const BasicTensorView<void*, Rank>& t) {
  return {static_cast<S*>(t.data), t.strides};
}

}  // namespace gridsampler::reference
