// A random 3-D forward/backward problem in any dtype and layout, and a runner
// for the public API or the reference.
#pragma once

#include <string>

#include "common/volume_tensor.hpp"
#include "gridsampler/gridsampler.hpp"

namespace gstest {

struct VolDims {
  int64_t n, c, in_d, in_h, in_w, out_d, out_h, out_w;
};
std::string to_string(const VolDims& d);

struct VolProblem {
  VolDims dims{};
  gridsampler::Options options;
  VolTensor input, grid, grad;

  // input and grad uniform in [-1, 1], grid uniform in [-grid_range, grid_range].
  static VolProblem random(const VolDims& dims, gridsampler::DType dtype, const gridsampler::Options& options,
                           uint64_t seed, double grid_range = 1.1);
  VolProblem relayout(VolLayout layout) const;
};

struct VolOutputs {
  VolTensor out, dx, dgrid;
};

using ForwardFn3d = gridsampler::Status (*)(gridsampler::VolumeView, gridsampler::VolumeView,
                                            gridsampler::MutableVolumeView, const gridsampler::Options&);
using BackwardFn3d = gridsampler::Status (*)(gridsampler::VolumeView, gridsampler::VolumeView,
                                             gridsampler::VolumeView, gridsampler::MutableVolumeView,
                                             gridsampler::MutableVolumeView, const gridsampler::Options&,
                                             gridsampler::OutputMask);

// Forward and backward through `fwd` and `bwd` (the public API by default),
// outputs of `layout` pre-filled with NaN. Fails the current test on a
// non-ok status.
VolOutputs run_volume(const VolProblem& p, VolLayout layout = VolLayout::kContiguous,
                      gridsampler::OutputMask mask = {}, ForwardFn3d fwd = &gridsampler::grid_sampler_3d,
                      BackwardFn3d bwd = &gridsampler::grid_sampler_3d_backward);

}  // namespace gstest
