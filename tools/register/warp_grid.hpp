// From a Transform to the sampling grid of one pyramid level, and back: the
// chain rule that turns the library's dgrid into the gradient of the
// transform's parameters.
//
// The control grid's displacement field d is upsampled by the library's own
// bicubic grid_sample (align_corners = true, border padding) at the level's
// pixel centres; the chain rule through that upsampling is then that call's
// GridSampler2DGrad dx, given dgrid as its output gradient.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "gridsampler/gridsampler.hpp"
#include "host/tensor.hpp"
#include "register/transform.hpp"

namespace gridsampler::registration {

// (1, H, W, 2): the normalised coordinates of the pixel centres of an H x W
// image (align_corners = false), in dtype_of<T>().
template <class T>
host::Tensor identity_grid(int64_t height, int64_t width);

template <class T>
class WarpGrid {
 public:
  WarpGrid(int64_t height, int64_t width, int num_threads);

  int64_t height() const { return height_; }
  int64_t width() const { return width_; }

  // grid (1, H, W, 2), dtype_of<T>(), made here if its shape differs: g(p)
  // at every pixel centre p.
  Status build(const Transform& t, host::Tensor* grid);

  // Given dL/dg at every pixel (dgrid, as build's grid), dL/d(a00, a01, a10,
  // a11, b0, b1) and, if `t` has a control grid, dL/dcontrol ((2, rows,
  // cols)). Uses the control grid of the latest build() call, which must be
  // of `t`'s shape.
  Status chain(const Transform& t, const host::Tensor& dgrid, std::array<double, 6>* d_affine,
               std::vector<double>* d_control);

  // The mean over the level's pixels of each control point's interpolation
  // weight ((2, rows, cols), the same for both components): how much of the
  // image a control point moves.
  Status control_coverage(const Transform& t, std::vector<double>* coverage);

 private:
  Status upsample(const Transform& t);

  int64_t height_, width_;
  Options upsample_options_;
  host::Tensor identity_;      // (1, H, W, 2)
  host::Tensor control_;       // (1, 2, rows, cols)
  host::Tensor displacement_;  // (1, 2, H, W): d at the pixel centres
  host::Tensor d_displacement_;
  host::Tensor d_control_;
};

extern template class WarpGrid<float>;
extern template class WarpGrid<double>;

}  // namespace gridsampler::registration
