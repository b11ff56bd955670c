// The fused bicubic forward: one dense float channel plane sampled
// bicubically, each vector of output pixels' 16 taps kept in registers from
// the grid values to the sum, instead of going through a Tile in memory.
//
// Why: with one channel the builder's 16 index and 16 weight vectors per
// pixel vector are written and read back for a single plane, and that
// round trip cost about as much as the gathers themselves (one-channel
// bicubic forwards ran 0.62x-0.94x of PyTorch 2.15's, and 1.6x faster
// fused; docs/performance.md, "Fused tiles in registers, fused bicubic
// forward").
//
// The same bits as the builder (bicubic_taps_lanes, from the same
// BicubicLanes) and forward_channel: the weights cx[k] * cy[j], zero where a
// tap is outside; the values gathered, zero there; the sum from +0 in tap
// order (rows j, then columns k). A vector with a lane the vector stencil
// cannot do exactly (BicubicLanes::bad) runs through a tile of its own,
// the builder and forward_channel themselves. Tests: fused_tiles_test.

// Target-independent includes (normal include guards).
#include <algorithm>
#include <cstdint>

#include "cpu/dispatch.hpp"
#include "cpu/tile.hpp"

// Per-target part: re-included once for every target.
#if defined(GRIDSAMPLER_CPU_FUSED_BICUBIC_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GRIDSAMPLER_CPU_FUSED_BICUBIC_INL_H_
#undef GRIDSAMPLER_CPU_FUSED_BICUBIC_INL_H_
#else
#define GRIDSAMPLER_CPU_FUSED_BICUBIC_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace gridsampler::cpu {
namespace HWY_NAMESPACE {
namespace {

#if HWY_TARGET != HWY_SCALAR

// Pixels [p0, p0 + count) of image n through a tile: the builder and the
// planar microkernel, as the unfused forward runs them. Out of line, so that
// its tile (about 34 KiB) is on the stack only when a vector needs it.
template <Padding P, bool kAlign>
HWY_NOINLINE void forward_bicubic_through_tile(const TileSource& src, int64_t n, int64_t p0, int64_t count,
                                               const float* ip, float* image_out) {
  Tile<float, 16> tile;
  fill_tile<Interpolation::kBicubic, P, kAlign, /*kStrided=*/false, float>(src, n, p0, count, &tile);
  forward_channel<true>(tile, ip, src.in_h * src.in_w, image_out);
}

// The forward of output pixels [p0, p0 + count) of image n in one channel:
// `input` is its plane, `output` its output plane (dense).
template <Padding P, bool kAlign>
void forward_fused_bicubic(const TileSource& src, int64_t n, int64_t p0, int64_t count, const void* input,
                           void* output) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const int lanes = static_cast<int>(hn::Lanes(d));
  const float* g = static_cast<const float*>(src.grid) + n * src.grid_strides[0] + 2 * p0;
  const float* ip = static_cast<const float*>(input);
  float* image_out = static_cast<float*>(output);
  float* op = image_out + p0;
  const auto width = hn::Set(di, static_cast<int32_t>(src.in_w));
  const int c = static_cast<int>(count);
  for (int i = 0; i < c; i += lanes) {
    hn::Vec<decltype(d)> gx, gy;
    alignas(64) float tail[2 * hn::MaxLanes(d)];
    hn::LoadInterleaved2(d, vector_values<2>(g, i, c, lanes, tail), gx, gy);
    BicubicLanes<hn::ScalableTag<float>> s;
    bicubic_lanes<P, kAlign>(d, gx, gy, src.in_h, src.in_w, /*derivatives=*/false, &s);
    if (!hn::AllFalse(di, s.bad)) {
      forward_bicubic_through_tile<P, kAlign>(src, n, p0 + i, std::min(lanes, c - i), ip, image_out);
      continue;
    }
    auto acc = hn::Zero(d);
    for (int j = 0; j < 4; ++j) {
      const auto row = hn::Mul(s.ty[j], width);
      for (int k = 0; k < 4; ++k) {
        const auto valid = hn::And(s.y_in[j], s.x_in[k]);
        const auto valid_f = hn::RebindMask(d, valid);
        const auto w = hn::IfThenElseZero(valid_f, hn::Mul(s.cx[k], s.cy[j]));
        const auto index = hn::IfThenElseZero(valid, hn::Add(row, s.tx[k]));
        acc = hn::Add(acc, hn::Mul(w, hn::IfThenElseZero(valid_f, hn::GatherIndex(d, ip, index))));
      }
    }
    store_lanes_n(d, acc, c - i, op + i);
  }
}

template <Padding P, bool kAlign>
void fill_fused_bicubic(KernelTable* table) {
  table->fused_forward_bicubic[static_cast<int>(P)][kAlign ? 1 : 0] = &forward_fused_bicubic<P, kAlign>;
}

#endif  // HWY_TARGET != HWY_SCALAR

// The fused bicubic forward for float storage (the vector bicubic stencil is
// float's; none for the scalar target).
template <class S>
void fill_fused_bicubic(KernelTable* table) {
#if HWY_TARGET != HWY_SCALAR
  if constexpr (std::is_same_v<S, float>) {
    fill_fused_bicubic<Padding::kZeros, false>(table);
    fill_fused_bicubic<Padding::kZeros, true>(table);
    fill_fused_bicubic<Padding::kBorder, false>(table);
    fill_fused_bicubic<Padding::kBorder, true>(table);
    fill_fused_bicubic<Padding::kReflection, false>(table);
    fill_fused_bicubic<Padding::kReflection, true>(table);
  }
#else
  (void)table;
#endif
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace gridsampler::cpu
HWY_AFTER_NAMESPACE();

#endif  // GRIDSAMPLER_CPU_FUSED_BICUBIC_INL_H_
