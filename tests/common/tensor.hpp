// Test helpers: owned tensors in any layout, random fills, and comparisons.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "gridsampler/gridsampler.hpp"

namespace gstest {

using gridsampler::DType;
using gridsampler::Shape4;

enum class Layout { kContiguous, kChannelsLast, kPadded, kTransposedHW, kNegative };
const char* to_string(Layout layout);

// A 4-D tensor that owns its memory. Its storage is larger than the view
// where the layout needs it (kPadded leaves gaps, kNegative walks W backwards)
// and everything outside the view holds a sentinel so tests can check that
// nothing outside was written.
class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, const Shape4& shape, Layout layout = Layout::kContiguous);

  gridsampler::TensorView view() const;
  gridsampler::MutableTensorView mutable_view();

  // Element access in double (rounded once to the dtype on set).
  double get(int64_t a, int64_t b, int64_t c, int64_t d) const;
  void set(int64_t a, int64_t b, int64_t c, int64_t d, double v);
  int64_t numel() const { return shape_[0] * shape_[1] * shape_[2] * shape_[3]; }
  const Shape4& shape() const { return shape_; }
  DType dtype() const { return dtype_; }

  // Values in logical (row-major) order, as double.
  std::vector<double> values() const;
  void fill_uniform(std::mt19937_64& rng, double lo, double hi);
  void fill(double v);
  // Copy of the same values in another layout.
  Tensor relayout(Layout layout) const;
  // Raw storage, for "nothing written" checks.
  const std::vector<unsigned char>& storage() const { return storage_; }
  void fill_storage_bytes(unsigned char byte);

 private:
  int64_t offset(int64_t a, int64_t b, int64_t c, int64_t d) const;
  DType dtype_ = DType::kFloat32;
  Shape4 shape_{};
  Shape4 strides_{};
  int64_t base_ = 0;  // element offset of [0,0,0,0] in storage
  Layout layout_ = Layout::kContiguous;
  std::vector<unsigned char> storage_;
};

// max |a - b| over all elements, and where.
struct Diff {
  double max_abs = 0;
  double max_ref = 0;  // max |b|
  int64_t index = -1;
};
Diff compare(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace gstest
