// The double backward (the gradient of GridSampler2DGrad and
// GridSampler3DGrad themselves): its plan and its driver, one for images and
// volumes. One fused pass per output pixel builds the stencil with
// the weights' first and second derivatives and, per channel, forms d_grad,
// scatters d_input and sums d_grid (docs/design.md, "Second order").
//
// Parallel and deterministic like the backward (NOTE [Deterministic
// parallel backward] in plan.hpp): tasks (n, channel block, pixel chunk)
// scatter d_input into accumulators of their own and sum d_grid over their
// channels; sums that span tasks (pixel chunks for d_input, channel blocks
// for d_grid) are added afterwards in a fixed order. The split depends on
// the shape only, so results are the same bits for any thread count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/validate.hpp"
#include "gridsampler/gridsampler.hpp"

namespace gridsampler::cpu {

struct DoubleBackwardPlan {
  detail::Problem problem;
  DoubleBackwardMask mask;
  bool has_gg_dx = false;
  int threads = 1;
  int64_t channel_block = 1;  // channels per task
  int64_t channel_blocks = 1;
  int64_t pixel_chunks = 1;  // output-pixel chunks per (n, channel block)
  int64_t chunk_pixels = 0;
  // d_input's accumulators are d_input itself (zeroed first) when it is in
  // the compute type and one chunk covers each plane; otherwise workspace
  // planes, dense, one per (n, c, chunk), summed and rounded once at the end.
  bool direct_input = false;
  // Channels interleaved: each task reads channel-minor copies of its
  // block's input and gg_dx ([pixel][channel], made once per (n, block)) and
  // accumulates d_input channel-minor, so that a tap's channels are one
  // contiguous run (a vector loop) instead of one cache line per channel.
  bool interleaved = false;
  std::size_t values = 0, gg_values = 0;  // the copies, [n][block][pixel][channel_block]
  std::size_t input_partials = 0;  // workspace byte offsets
  std::size_t grid_partials = 0;   // per (n, channel block, pixel) d_grid sums, when blocks > 1
  std::size_t workspace_bytes = 0;
};

// For calls with gg_dgrid: without it the entry points (src/api.cpp) make
// two first-order calls instead.
DoubleBackwardPlan plan_double_backward(const detail::Problem& problem, DoubleBackwardMask mask,
                                        bool has_gg_dx);

// `workspace` holds plan.workspace_bytes bytes, at any alignment.
void run_double_backward(const DoubleBackwardPlan& plan, const TensorView& gg_dx, const TensorView& gg_dgrid,
                         const TensorView& grad, const TensorView& input, const TensorView& grid,
                         const MutableTensorView& d_grad, const MutableTensorView& d_input,
                         const MutableTensorView& d_grid, void* workspace);
void run_double_backward(const DoubleBackwardPlan& plan, const VolumeView& gg_dx, const VolumeView& gg_dgrid,
                         const VolumeView& grad, const VolumeView& input, const VolumeView& grid,
                         const MutableVolumeView& d_grad, const MutableVolumeView& d_input,
                         const MutableVolumeView& d_grid, void* workspace);

}  // namespace gridsampler::cpu
