// The reference implementation: plain scalar loops, coordinates in the
// compute dtype exactly as PyTorch forms them, every sum in float64. It is
// the oracle the optimised kernels are tested against and the last fallback.
// Same contract as the public functions of gridsampler.hpp.
#pragma once

#include "gridsampler/gridsampler.hpp"

namespace gridsampler::reference {

Status grid_sampler_2d(TensorView input, TensorView grid, MutableTensorView output,
                       const Options& options = {});

Status grid_sampler_2d_backward(TensorView grad, TensorView input, TensorView grid,
                                MutableTensorView dx, MutableTensorView dgrid,
                                const Options& options = {}, OutputMask mask = {});

Status grid_sampler_2d_double_backward(TensorView gg_dx, TensorView gg_dgrid, TensorView grad,
                                       TensorView input, TensorView grid, MutableTensorView d_grad,
                                       MutableTensorView d_input, MutableTensorView d_grid,
                                       const Options& options = {}, DoubleBackwardMask mask = {});

Status grid_sampler_3d(VolumeView input, VolumeView grid, MutableVolumeView output,
                       const Options& options = {});

Status grid_sampler_3d_backward(VolumeView grad, VolumeView input, VolumeView grid,
                                MutableVolumeView dx, MutableVolumeView dgrid,
                                const Options& options = {}, OutputMask mask = {});

Status grid_sampler_3d_double_backward(VolumeView gg_dx, VolumeView gg_dgrid, VolumeView grad,
                                       VolumeView input, VolumeView grid, MutableVolumeView d_grad,
                                       MutableVolumeView d_input, MutableVolumeView d_grid,
                                       const Options& options = {}, DoubleBackwardMask mask = {});

}  // namespace gridsampler::reference
