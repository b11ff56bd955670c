#include "register/warp_grid.hpp"

#include <algorithm>

#include "register/typed.hpp"

namespace gridsampler::registration {

template <class T>
host::Tensor identity_grid(int64_t height, int64_t width) {
  host::Tensor grid(dtype_of<T>(), {1, height, width, 2});
  T* g = data<T>(grid);
  for (int64_t i = 0; i < height; ++i) {
    const double y = (2.0 * static_cast<double>(i) + 1) / static_cast<double>(height) - 1;
    for (int64_t j = 0; j < width; ++j) {
      g[(i * width + j) * 2] = static_cast<T>((2.0 * static_cast<double>(j) + 1) / static_cast<double>(width) - 1);
      g[(i * width + j) * 2 + 1] = static_cast<T>(y);
    }
  }
  return grid;
}
template host::Tensor identity_grid<float>(int64_t, int64_t);
template host::Tensor identity_grid<double>(int64_t, int64_t);

template <class T>
WarpGrid<T>::WarpGrid(int64_t height, int64_t width, int num_threads)
    : height_(height),
      width_(width),
      upsample_options_{Interpolation::kBicubic, Padding::kBorder, /*align_corners=*/true, num_threads},
      identity_(identity_grid<T>(height, width)) {}

template <class T>
Status WarpGrid<T>::upsample(const Transform& t) {
  const Shape4 control_shape{1, 2, t.rows, t.cols};
  if (control_.shape() != control_shape) {
    control_ = host::Tensor(dtype_of<T>(), control_shape);
    d_control_ = host::Tensor(dtype_of<T>(), control_shape);
  }
  std::copy(t.control.begin(), t.control.end(), data<T>(control_));
  if (displacement_.numel() == 0) displacement_ = host::Tensor(dtype_of<T>(), {1, 2, height_, width_});
  return grid_sampler_2d(control_.view(), identity_.view(), displacement_.mutable_view(), upsample_options_);
}

template <class T>
Status WarpGrid<T>::build(const Transform& t, host::Tensor* grid) {
  const Shape4 shape{1, height_, width_, 2};
  if (grid->shape() != shape || grid->dtype() != dtype_of<T>()) *grid = host::Tensor(dtype_of<T>(), shape);
  const int64_t plane = height_ * width_;
  const T* d = nullptr;
  if (t.elastic()) {
    if (Status s = upsample(t); !s.ok()) return s;
    d = data<T>(displacement_);
  }
  const auto& a = t.affine;
  const T* p = data<T>(identity_);
  T* g = data<T>(*grid);
  for (int64_t k = 0; k < plane; ++k) {
    const double x = p[2 * k], y = p[2 * k + 1];
    double gx = a[0] * x + a[1] * y + a[4], gy = a[2] * x + a[3] * y + a[5];
    if (d) {
      gx += d[k];
      gy += d[plane + k];
    }
    g[2 * k] = static_cast<T>(gx);
    g[2 * k + 1] = static_cast<T>(gy);
  }
  return Status::Ok();
}

template <class T>
Status WarpGrid<T>::chain(const Transform& t, const host::Tensor& dgrid, std::array<double, 6>* d_affine,
                          std::vector<double>* d_control) {
  const int64_t plane = height_ * width_;
  const T* p = data<T>(identity_);
  const T* dg = data<T>(dgrid);
  std::array<double, 6> sum{};
  for (int64_t k = 0; k < plane; ++k) {
    const double x = p[2 * k], y = p[2 * k + 1], gx = dg[2 * k], gy = dg[2 * k + 1];
    sum[0] += gx * x;
    sum[1] += gx * y;
    sum[2] += gy * x;
    sum[3] += gy * y;
    sum[4] += gx;
    sum[5] += gy;
  }
  *d_affine = sum;
  if (!t.elastic()) {
    d_control->clear();
    return Status::Ok();
  }
  // dL/dd is dgrid itself (g = A p + b + d), laid out as the upsampling's
  // output (1, 2, H, W); its backward's dx is dL/dcontrol.
  if (d_displacement_.numel() == 0) d_displacement_ = host::Tensor(dtype_of<T>(), {1, 2, height_, width_});
  T* dd = data<T>(d_displacement_);
  for (int64_t k = 0; k < plane; ++k) {
    dd[k] = dg[2 * k];
    dd[plane + k] = dg[2 * k + 1];
  }
  if (Status s = grid_sampler_2d_backward(d_displacement_.view(), control_.view(), identity_.view(),
                                          d_control_.mutable_view(), MutableTensorView{}, upsample_options_,
                                          OutputMask{/*input=*/true, /*grid=*/false});
      !s.ok()) {
    return s;
  }
  const T* dc = data<T>(d_control_);
  d_control->assign(dc, dc + 2 * t.rows * t.cols);
  return Status::Ok();
}

template <class T>
Status WarpGrid<T>::control_coverage(const Transform& t, std::vector<double>* coverage) {
  Transform zero = t;
  std::fill(zero.control.begin(), zero.control.end(), 0.0);
  if (Status s = upsample(zero); !s.ok()) return s;
  host::Tensor dgrid(dtype_of<T>(), {1, height_, width_, 2});
  T* dg = data<T>(dgrid);
  std::fill(dg, dg + 2 * height_ * width_, static_cast<T>(1.0 / static_cast<double>(height_ * width_)));
  std::array<double, 6> unused;
  return chain(zero, dgrid, &unused, coverage);
}

template class WarpGrid<float>;
template class WarpGrid<double>;

}  // namespace gridsampler::registration
