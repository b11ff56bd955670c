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
#include "cpu/tile.hpp"
#include "gridsampler/gridsampler.hpp"

namespace gridsampler::cpu {

// The interleaved driver's channel loop, compiled per SIMD target
// (second_order-inl.h, through the kernel table): one output pixel's valid
// taps, with the scalars the driver prepares per tap, applied to a block of
// nc <= kSecondOrderMaxBlock channels.
constexpr int kSecondOrderMaxBlock = 64;
constexpr int kSecondOrderMaxTaps = 64;  // tricubic
template <class T>
struct SecondOrderTaps {
  int count = 0;                       // valid taps
  int64_t off[kSecondOrderMaxTaps];    // element offset in the copies: dense index * channel_block
  T w[kSecondOrderMaxTaps];            // weight (gg_dx's terms)
  T v[kSecondOrderMaxTaps];            // gg_dgrid . dw: d_grad's and d_input's weight
  T dw[3][kSecondOrderMaxTaps];        // d w / d coordinate a
  T sv[3][kSecondOrderMaxTaps];        // sum over b of gg_dgrid_b * d2 w / (d b d a)
};
// Which incoming gradients a call has (gg_dgrid's terms need a smooth mode).
enum class SecondOrderTerms : int { kBoth = 0, kGgDgrid = 1, kGgDx = 2 };
// (taps: SecondOrderTaps<T>; X, E: the block's input and gg_dx copies at the
// pixel's tap offsets; A: d_input's accumulators; Gc: grad per channel; dg:
// d_grad per channel, written; tv: [G][kSecondOrderMaxBlock] d_grid's terms
// per channel, written)
using SecondOrderFn = void (*)(const void* taps, const void* X, const void* E, void* A, const void* Gc, int64_t nc,
                               void* dg, void* tv);

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
  // Images, interleaved: the stencils' builder (flat form) for the SIMD
  // target in use; null where the scalar stencil serves (volumes, planes,
  // the one-lane target).
  BuildTileFn build = nullptr;
  // Interleaved: the channel loop for this call's terms and d_input.
  SecondOrderFn channels = nullptr;
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
