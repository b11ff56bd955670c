#include "common/tensor.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace gstest {

const char* to_string(Layout layout) {
  switch (layout) {
    case Layout::kContiguous: return "contiguous";
    case Layout::kChannelsLast: return "channels_last";
    case Layout::kPadded: return "padded";
    case Layout::kTransposedHW: return "transposed_hw";
    case Layout::kNegative: return "negative_w";
  }
  return "?";
}

namespace {

// Strides, offset of element (0, 0, 0, 0) and storage size (elements, at
// least one) of `layout`.
struct Placement {
  Shape4 strides;
  int64_t offset = 0;
  int64_t storage = 0;
};

Placement place(const Shape4& shape, Layout layout) {
  const int64_t n = shape[0], c = shape[1], h = shape[2], w = shape[3];
  const int64_t dense = std::max<int64_t>(n * c * h * w, 1);
  switch (layout) {
    case Layout::kContiguous:
      return {gridsampler::contiguous_strides(shape), 0, dense};
    case Layout::kChannelsLast:
      return {gridsampler::channels_last_strides(shape), 0, dense};
    case Layout::kPadded: {
      // Every dimension padded: W by 3 elements, H by 2 rows, C by one plane.
      const int64_t sw = 2, sh = sw * (w + 3), sc = sh * (h + 2), sn = sc * (c + 1);
      return {{sn, sc, sh, sw}, 0, std::max<int64_t>(sn * (n + 1), 1)};
    }
    case Layout::kTransposedHW:
      // Memory is N, C, W, H.
      return {{c * h * w, h * w, 1, h}, 0, dense};
    case Layout::kNegative:
      // W runs backwards in memory.
      return {{c * h * w, h * w, w, -1}, std::max<int64_t>(w - 1, 0), dense};
  }
  throw std::logic_error("bad layout");
}

gridsampler::host::Tensor placed(DType dtype, const Shape4& shape, Layout layout) {
  const Placement p = place(shape, layout);
  return {dtype, shape, p.strides, p.offset, p.storage};
}

}  // namespace

Tensor::Tensor(DType dtype, const Shape4& shape, Layout layout)
    : gridsampler::host::Tensor(placed(dtype, shape, layout)) {
  fill_storage_bytes(0xA5);
}

void Tensor::fill_storage_bytes(unsigned char byte) { std::memset(storage().data(), byte, storage().size()); }

void Tensor::fill_uniform(std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  const Shape4& s = shape();
  for (int64_t a = 0; a < s[0]; ++a)
    for (int64_t b = 0; b < s[1]; ++b)
      for (int64_t c = 0; c < s[2]; ++c)
        for (int64_t d = 0; d < s[3]; ++d) set(a, b, c, d, dist(rng));
}

Tensor Tensor::relayout(Layout layout) const {
  Tensor t(dtype(), shape(), layout);
  t.assign_from(*this);
  return t;
}

Diff compare(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) throw std::logic_error("compare: size mismatch");
  Diff d;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isnan(b[i])) d.max_ref = std::max(d.max_ref, std::fabs(b[i]));
    double e = std::fabs(a[i] - b[i]);
    if (std::isnan(a[i]) || std::isnan(b[i])) e = std::isnan(a[i]) == std::isnan(b[i]) ? 0 : INFINITY;
    if (e > d.max_abs) {
      d.max_abs = e;
      d.index = static_cast<int64_t>(i);
    }
  }
  return d;
}

}  // namespace gstest
