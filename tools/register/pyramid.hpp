// The image pyramid of a coarse-to-fine registration: each level half the
// size of the one below (rounded up), down to kMinLevelSide pixels on the
// shorter side, so that a shift of tens of pixels at full resolution is a
// few pixels at the coarsest level, within reach of gradient descent.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "gridsampler/gridsampler.hpp"
#include "host/tensor.hpp"

namespace gridsampler::registration {

inline constexpr int64_t kMinLevelSide = 6;

// (height, width) of each level, full resolution first.
std::vector<std::pair<int64_t, int64_t>> pyramid_sizes(int64_t height, int64_t width);

// `image` (1, C, H, W) of dtype_of<T>() at `height` x `width`: blurred by
// the binomial filter [1 4 6 4 1] / 16 along each axis (edges repeated),
// then sampled bilinearly by the library at the smaller image's pixel
// centres (align_corners = false, so both images cover the same square).
template <class T>
Status downsample(const host::Tensor& image, int64_t height, int64_t width, int num_threads, host::Tensor* out);

}  // namespace gridsampler::registration
