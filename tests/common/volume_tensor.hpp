// 5-D test tensors for the volume kernel tests: any dtype, in the layouts
// the sweeps need, over a storage that starts as the byte 0xA5 so that a
// write outside the view shows. Values are read and written as double.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gridsampler/gridsampler.hpp"

namespace gstest {

enum class VolLayout {
  kContiguous,    // NCDHW
  kChannelsLast,  // NDHWC
  kPaddedRows,    // rows of W + 3 elements: depth and height still merge
  kSlicedH,       // a slice of every other H row: depth and height do not merge (packed)
  kNegativeW,     // W walked backwards
  kNegativeD,     // D walked backwards (does not merge: packed)
};
const char* to_string(VolLayout layout);

class VolTensor {
 public:
  VolTensor() = default;
  VolTensor(gridsampler::DType dtype, const gridsampler::Shape5& shape, VolLayout layout = VolLayout::kContiguous);

  gridsampler::DType dtype() const { return dtype_; }
  const gridsampler::Shape5& shape() const { return shape_; }
  int64_t numel() const;
  gridsampler::VolumeView view() const;
  gridsampler::MutableVolumeView mutable_view();

  double get(const gridsampler::Shape5& i) const;
  void set(const gridsampler::Shape5& i, double v);
  // Every element in logical (row-major) order.
  std::vector<double> values() const;
  void assign(const std::vector<double>& v);
  void fill(double v);
  void fill_uniform(std::mt19937_64& rng, double lo, double hi);
  VolTensor relayout(VolLayout layout) const;
  // Whether every storage byte outside the view still holds 0xA5.
  bool outside_untouched() const;
  // The storage bytes of the view's elements in logical order (bitwise comparisons).
  std::vector<unsigned char> element_bytes() const;

 private:
  int64_t offset_of(const gridsampler::Shape5& i) const;
  gridsampler::DType dtype_ = gridsampler::DType::kFloat32;
  gridsampler::Shape5 shape_{}, strides_{};
  int64_t origin_ = 0;  // element offset of (0, 0, 0, 0, 0)
  std::vector<unsigned char> storage_;
};

}  // namespace gstest
