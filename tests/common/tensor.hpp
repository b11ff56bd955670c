// Test helpers: host tensors in the layouts the tests sweep, filled with a
// sentinel outside the view, random fills, and comparisons.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "gridsampler/gridsampler.hpp"
#include "host/tensor.hpp"

namespace gstest {

using gridsampler::DType;
using gridsampler::Shape4;

enum class Layout { kContiguous, kChannelsLast, kPadded, kTransposedHW, kNegative };
const char* to_string(Layout layout);

// A host tensor in one of the test layouts. Its storage is larger than the
// view where the layout needs it (kPadded leaves gaps, kNegative walks W
// backwards) and starts out holding the byte 0xA5 everywhere, so that tests
// can check that nothing outside the view was written.
class Tensor : public gridsampler::host::Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, const Shape4& shape, Layout layout = Layout::kContiguous);

  // Uniform in [lo, hi], drawn in logical (row-major) order.
  void fill_uniform(std::mt19937_64& rng, double lo, double hi);
  // Copy of the same values in another layout.
  Tensor relayout(Layout layout) const;
  void fill_storage_bytes(unsigned char byte);
};

// max |a - b| over all elements, and where.
struct Diff {
  double max_abs = 0;
  double max_ref = 0;  // max |b|
  int64_t index = -1;
};
Diff compare(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace gstest
