// The installed C++ API from an outside project: identity warp of a 2x3
// image with align_corners returns the image.
#include <gridsampler/gridsampler.hpp>

#include <cstdio>

int main() {
  using namespace gridsampler;
  float image[6] = {1, 2, 3, 4, 5, 6}, out[6] = {};
  float grid[12] = {-1, -1, 0, -1, 1, -1, -1, 1, 0, 1, 1, 1};
  const Status s = grid_sampler_2d(TensorView::contiguous(image, DType::kFloat32, {1, 1, 2, 3}),
                                   TensorView::contiguous(grid, DType::kFloat32, {1, 2, 3, 2}),
                                   MutableTensorView::contiguous(out, DType::kFloat32, {1, 1, 2, 3}),
                                   Options{Interpolation::kBilinear, Padding::kZeros, true});
  if (!s.ok()) {
    std::printf("error: %s\n", s.message().c_str());
    return 1;
  }
  for (int i = 0; i < 6; ++i) {
    if (out[i] != image[i]) {
      std::printf("out[%d] = %g, expected %g\n", i, out[i], image[i]);
      return 1;
    }
  }
  std::printf("cpp_api_smoke: ok\n");
  return 0;
}
