// The library's calls and the host tensor type of one rank (4: images, 5:
// volumes), so that the command-line tool's code is written once for both.
#pragma once

#include <cstddef>

#include "gridsampler/gridsampler.hpp"
#include "host/tensor.hpp"

namespace gridsampler::tool {

template <std::size_t Rank>
using HostTensor = host::StridedTensor<Rank>;

inline Shape4 contiguous(const Shape4& s) { return contiguous_strides(s); }
inline Shape5 contiguous(const Shape5& s) { return contiguous_strides_5d(s); }
inline Shape4 channels_last(const Shape4& s) { return channels_last_strides(s); }
inline Shape5 channels_last(const Shape5& s) { return channels_last_strides_5d(s); }

inline Status sample(const TensorView& input, const TensorView& grid, const MutableTensorView& out,
                     const Options& o) {
  return grid_sampler_2d(input, grid, out, o);
}
inline Status sample(const VolumeView& input, const VolumeView& grid, const MutableVolumeView& out,
                     const Options& o) {
  return grid_sampler_3d(input, grid, out, o);
}
inline Status sample_backward(const TensorView& grad, const TensorView& input, const TensorView& grid,
                              const MutableTensorView& dx, const MutableTensorView& dgrid, const Options& o,
                              OutputMask mask) {
  return grid_sampler_2d_backward(grad, input, grid, dx, dgrid, o, mask);
}
inline Status sample_backward(const VolumeView& grad, const VolumeView& input, const VolumeView& grid,
                              const MutableVolumeView& dx, const MutableVolumeView& dgrid, const Options& o,
                              OutputMask mask) {
  return grid_sampler_3d_backward(grad, input, grid, dx, dgrid, o, mask);
}

}  // namespace gridsampler::tool
