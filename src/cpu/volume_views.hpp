// Volumes through the image drivers: a 5-D view is read as a 4-D view whose
// depth and height dimensions merge into one of rows (the input, grad,
// output and dx as (N, C, D * H, W); the grid and dgrid as
// (N, Dout * Hout, Wout, 3)). That holds when one of the two has size 1 or
// stride(depth) == size(height) * stride(height): NCDHW, NDHWC, slices along
// N, C or W, and negative strides alike. Other views (a slice along H, say)
// are packed into a contiguous copy first and, for outputs, copied back
// after the call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "gridsampler/gridsampler.hpp"

namespace gridsampler::cpu {

// Whether dimensions `dim` and `dim + 1` of a 5-D view merge.
bool dims_merge(const Shape5& shape, const Shape5& strides, int dim);

// Whether a view can be read or written through a 4-D one: its dimensions
// merge, or its packed copy fits this machine's memory (a valid view may
// reach few elements through zero strides and still be larger than that).
bool mergeable_or_packable(const Shape5& shape, const Shape5& strides, DType dtype, int dim);
template <class Ptr>
bool mergeable_or_packable(const BasicTensorView<Ptr, 5>& v, int dim) {
  return mergeable_or_packable(v.shape, v.strides, v.dtype, dim);
}

// The strides of the 4-D view the drivers read for a 5-D view of `shape` and
// `strides` (merged at `dim`, or, when the dimensions do not merge, of its
// packed contiguous copy): the same numbers VolumeViews gives, from shapes
// and strides alone, so that a plan can be made before any data is touched.
Shape4 merged_strides(const Shape5& shape, const Shape5& strides, int dim);

// The 4-D views of one volume call, and the packed copies some of them may
// need. Inputs are packed when they are made; outputs are copied back by
// finish().
class VolumeViews {
 public:
  // dim: the first merged dimension (2 for input-shaped tensors, 1 for
  // grid-shaped ones). False when a packed copy cannot be allocated.
  bool input(const VolumeView& v, int dim, TensorView* out);
  bool output(const MutableVolumeView& v, int dim, MutableTensorView* out);
  // Copies packed outputs into the caller's views.
  void finish();

 private:
  struct Packed {
    std::unique_ptr<unsigned char[]> data;
    MutableVolumeView target;  // the caller's output (outputs only)
    bool is_output = false;
  };
  void* pack(const VolumeView& v, bool copy_in, const MutableVolumeView* target);
  std::vector<Packed> packed_;
};

}  // namespace gridsampler::cpu
