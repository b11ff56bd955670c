// Clearing a strided view: every element set to all-zero bits, which is +0.0
// in every supported dtype. Outputs that an empty problem or a masked
// computation leaves at zero can be huge (a dgrid of billions of elements
// for a problem with no channels), so the fill must cost one memset per
// dense run, not one per element.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "gridsampler/gridsampler.hpp"

namespace gridsampler::detail {

// `shape` and `strides` (in elements) describe a view that does not overlap
// itself. A fill does not depend on the order of the dimensions, so they are
// taken in any order that helps: negative strides flipped, sorted from the
// largest stride to the smallest, and neighbours that form one dense run
// merged. The innermost run is cleared with one memset when it is
// contiguous, element by element otherwise.
template <std::size_t Rank>
void zero_fill(void* data, std::size_t elem, const std::array<int64_t, Rank>& shape,
               const std::array<int64_t, Rank>& strides) {
  struct Dim {
    int64_t size, stride;
  };
  // An empty view first: its data may be null, and even moving a null
  // pointer to a negative stride's lowest address is undefined.
  for (std::size_t i = 0; i < Rank; ++i) {
    if (shape[i] == 0) return;
  }
  auto* base = static_cast<unsigned char*>(data);
  std::array<Dim, Rank> dims{};
  std::size_t rank = 0;
  for (std::size_t i = 0; i < Rank; ++i) {
    if (shape[i] == 1) continue;
    int64_t s = strides[i];
    if (s < 0) {  // start at the lowest address instead
      base += (shape[i] - 1) * s * static_cast<int64_t>(elem);
      s = -s;
    }
    dims[rank++] = {shape[i], s};
  }
  // Insertion sort: at most five dims (std::sort draws a false -Warray-bounds
  // from GCC 12 on arrays this small).
  for (std::size_t i = 1; i < rank; ++i) {
    for (std::size_t j = i; j > 0 && dims[j - 1].stride < dims[j].stride; --j) std::swap(dims[j - 1], dims[j]);
  }
  // Merge from the inside out: an outer dim whose stride is the inner dim's
  // extent continues the inner run.
  std::size_t merged = 0;
  std::array<Dim, Rank> runs{};
  for (std::size_t i = rank; i-- > 0;) {
    if (merged > 0 && dims[i].stride == runs[merged - 1].size * runs[merged - 1].stride) {
      runs[merged - 1].size *= dims[i].size;
    } else {
      runs[merged++] = dims[i];
    }
  }
  // runs[0] is now the innermost; a view of one element has no runs.
  const int64_t inner = merged > 0 ? runs[0].size : 1;
  const int64_t inner_stride = merged > 0 ? runs[0].stride : 1;
  auto clear_run = [&](unsigned char* p) {
    if (inner_stride == 1) {
      std::memset(p, 0, static_cast<std::size_t>(inner) * elem);
    } else {
      for (int64_t k = 0; k < inner; ++k) std::memset(p + k * inner_stride * static_cast<int64_t>(elem), 0, elem);
    }
  };
  if (merged <= 1) {
    clear_run(base);
    return;
  }
  // An odometer over the outer runs (runs[1..merged)).
  std::array<int64_t, Rank> index{};
  for (;;) {
    int64_t offset = 0;
    for (std::size_t r = 1; r < merged; ++r) offset += index[r] * runs[r].stride;
    clear_run(base + offset * static_cast<int64_t>(elem));
    std::size_t r = 1;
    while (r < merged && ++index[r] == runs[r].size) index[r++] = 0;
    if (r == merged) return;
  }
}

// zero_fill over an output view of either rank (validated: not
// self-overlapping).
template <std::size_t Rank>
void zero_view(const BasicTensorView<void*, Rank>& v) {
  zero_fill(v.data, dtype_size(v.dtype), v.shape, v.strides);
}

}  // namespace gridsampler::detail
