#include "register/pyramid.hpp"

#include <algorithm>

#include "register/typed.hpp"
#include "register/warp_grid.hpp"

namespace gridsampler::registration {

std::vector<std::pair<int64_t, int64_t>> pyramid_sizes(int64_t height, int64_t width) {
  std::vector<std::pair<int64_t, int64_t>> sizes = {{height, width}};
  while (true) {
    const int64_t h = (sizes.back().first + 1) / 2, w = (sizes.back().second + 1) / 2;
    if (std::min(h, w) < kMinLevelSide) break;
    sizes.emplace_back(h, w);
  }
  return sizes;
}

namespace {

// The binomial blur along one axis of a plane: `n` values `stride` apart,
// `count` such lines `step` apart.
template <class T>
void blur_lines(const T* in, T* out, int64_t n, int64_t stride, int64_t count, int64_t step) {
  static constexpr double kTaps[5] = {1 / 16.0, 4 / 16.0, 6 / 16.0, 4 / 16.0, 1 / 16.0};
  for (int64_t line = 0; line < count; ++line) {
    const T* src = in + line * step;
    T* dst = out + line * step;
    for (int64_t i = 0; i < n; ++i) {
      double sum = 0;
      for (int64_t k = -2; k <= 2; ++k) sum += kTaps[k + 2] * src[std::clamp<int64_t>(i + k, 0, n - 1) * stride];
      dst[i * stride] = static_cast<T>(sum);
    }
  }
}

}  // namespace

template <class T>
Status downsample(const host::Tensor& image, int64_t height, int64_t width, int num_threads, host::Tensor* out) {
  const Shape4& s = image.shape();
  const int64_t channels = s[1], h = s[2], w = s[3];
  host::Tensor rows(dtype_of<T>(), s), blurred(dtype_of<T>(), s);
  for (int64_t c = 0; c < channels; ++c) {
    const T* src = data<T>(image) + c * h * w;
    blur_lines(src, data<T>(rows) + c * h * w, w, 1, h, w);
    blur_lines(data<T>(rows) + c * h * w, data<T>(blurred) + c * h * w, h, w, w, 1);
  }
  *out = host::Tensor(dtype_of<T>(), {1, channels, height, width});
  const host::Tensor grid = identity_grid<T>(height, width);
  return grid_sampler_2d(blurred.view(), grid.view(), out->mutable_view(),
                         {Interpolation::kBilinear, Padding::kBorder, /*align_corners=*/false, num_threads});
}

template Status downsample<float>(const host::Tensor&, int64_t, int64_t, int, host::Tensor*);
template Status downsample<double>(const host::Tensor&, int64_t, int64_t, int, host::Tensor*);

}  // namespace gridsampler::registration
