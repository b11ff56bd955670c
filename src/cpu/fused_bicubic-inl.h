// Fused bicubic tiles: one dense float channel plane sampled bicubically,
// each vector of output pixels' 16 taps kept in registers from the grid
// values to the forward's sum (the backward's dgrid sums), instead of going
// through a Tile in memory. The backward's dx terms go through arrays of
// indices and products, scattered tap-major over the tile as
// backward_channel does.
//
// Why: with one channel the builder's 16 index, 16 weight (and 32 weight
// derivative) vectors per pixel vector are written and read back for a
// single plane, and that round trip cost about as much as the gathers
// themselves (one-channel bicubic forwards ran 0.62x-0.94x of PyTorch
// 2.15's, and 1.6x faster fused; backwards 1.5x-2.4x faster fused;
// docs/performance.md, "Fused tiles in registers, fused bicubic forward"
// and "Fused bicubic backward").
//
// The same bits as the builder (bicubic_taps_lanes, from the same
// BicubicLanes) and forward_channel / backward_channel: the weights
// cx[k] * cy[j] and their derivatives, zero where a tap is outside; the
// values gathered, zero there; the sums from +0 in tap order (rows j, then
// columns k). A vector with a lane the vector stencil cannot do exactly
// (BicubicLanes::bad) runs through a tile of its own, the builder itself.
// Tests: fused_tiles_test.

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
// planar microkernel, as the unfused forward runs them, for `channels`
// planes (src.in_strides[1] and src.out_strides[1] apart). Out of line, so
// that its tile (about 34 KiB) is on the stack only when a vector needs it.
template <Padding P, bool kAlign>
HWY_NOINLINE void forward_bicubic_through_tile(const TileSource& src, int64_t n, int64_t p0, int64_t count,
                                               int64_t channels, const float* ip, float* image_out) {
  Tile<float, 16> tile;
  fill_tile<Interpolation::kBicubic, P, kAlign, /*kStrided=*/false, float>(src, n, p0, count, &tile);
  for (int64_t ch = 0; ch < channels; ++ch) {
    forward_channel<true>(tile, ip + ch * src.in_strides[1], src.in_h * src.in_w,
                          image_out + ch * src.out_strides[1]);
  }
}

// The forward of output pixels [p0, p0 + count) of image n in `channels`
// channels: `input` is the first one's plane, `output` its output plane
// (dense), the others src.in_strides[1] and src.out_strides[1] elements
// apart. Each vector's stencil is computed once; its weights and indices
// again per channel (a multiply and an add: 16 of each kept for all
// channels would not stay in registers).
template <Padding P, bool kAlign>
void forward_fused_bicubic(const TileSource& src, int64_t n, int64_t p0, int64_t count, int64_t channels,
                           const void* points, const void* input, void* output) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const int lanes = static_cast<int>(hn::Lanes(d));
  const float* g = static_cast<const float*>(points);
  const float* input_planes = static_cast<const float*>(input);
  float* image_out = static_cast<float*>(output);
  const int64_t in_channel = src.in_strides[1], out_channel = src.out_strides[1];
  const auto width = hn::Set(di, static_cast<int32_t>(src.in_w));
  const int c = static_cast<int>(count);
  for (int i = 0; i < c; i += lanes) {
    hn::Vec<decltype(d)> gx, gy;
    alignas(64) float tail[2 * hn::MaxLanes(d)];
    hn::LoadInterleaved2(d, vector_values<2>(g, i, c, lanes, tail), gx, gy);
    BicubicLanes<hn::ScalableTag<float>> s;
    bicubic_lanes<P, kAlign>(d, gx, gy, src.in_h, src.in_w, /*derivatives=*/false, &s);
    if (!hn::AllFalse(di, s.bad)) {
      forward_bicubic_through_tile<P, kAlign>(src, n, p0 + i, std::min(lanes, c - i), channels, input_planes,
                                              image_out);
      continue;
    }
    for (int64_t ch = 0; ch < channels; ++ch) {
      const float* ip = input_planes + ch * in_channel;
      auto acc = hn::Zero(d);
      for (int j = 0; j < 4; ++j) {
        const auto row = hn::Mul(s.ty[j], width);
        for (int k = 0; k < 4; ++k) {
          const auto valid = hn::And(s.y_in[j], s.x_in[k]);
          const auto valid_f = hn::RebindMask(d, valid);
          const auto w = hn::IfThenElseZero(valid_f, hn::Mul(s.cx[k], s.cy[j]));
          const auto index = hn::IfThenElseZero(valid, hn::Add(row, s.tx[k]));
          acc = hn::MulAdd(w, hn::IfThenElseZero(valid_f, hn::GatherIndex(d, ip, index)), acc);
        }
      }
      store_lanes_n(d, acc, c - i, image_out + ch * out_channel + p0 + i);
    }
  }
}

// The backward's dx terms and dgrid sums of pixels [i, i + live) of the
// tile at p0 through a tile of their own (the builder, then what
// backward_channel computes per pixel): index[tap] and product[tap] from i
// as backward_fused_bicubic_tile writes them, sums and mult likewise.
// grad points at the pixels' grad values. Out of line for the tile's sake, as
// forward_bicubic_through_tile.
template <Padding P, bool kAlign, bool kDx, bool kDgrid>
HWY_NOINLINE void backward_bicubic_through_tile(const TileSource& src, int64_t n, int64_t p0, int i, int live,
                                                const float* grad, const float* ip, int32_t (*index)[kTile],
                                                float (*product)[kTile], float (*sums)[kTile],
                                                float (*mult)[kTile]) {
  Tile<float, 16> tile;
  fill_tile<Interpolation::kBicubic, P, kAlign, /*kStrided=*/false, float>(src, n, p0 + i, live, &tile);
  const int64_t plane = src.in_h * src.in_w;
  float s[2][kTile] = {};
  for (int k = 0; k < 16; ++k) {
    const auto* idx = gather_indices(&tile, k);
    for (int l = 0; l < live; ++l) {
      const bool valid = idx[l] != plane;
      if constexpr (kDx) {
        index[k][i + l] = valid ? static_cast<int32_t>(idx[l]) : 0;
        product[k][i + l] = valid ? tile.w[k][l] * grad[l] : 0.0f;
      }
      if constexpr (kDgrid) {
        const float v = valid ? ip[idx[l]] : 0.0f;
        for (int a = 0; a < 2; ++a) s[a][l] += tile.dw[a][k][l] * v;
      }
    }
  }
  if constexpr (kDgrid) {
    for (int a = 0; a < 2; ++a) {
      for (int l = 0; l < live; ++l) {
        sums[a][i + l] = 0.0f + s[a][l] * grad[l];
        mult[a][i + l] = tile.mult[a][l];
      }
    }
  }
}

// The backward of output pixels [p0, p0 + count) (one tile) of image n in
// one channel, as backward_fused_tile (fused-inl.h) for bilinear: dx terms
// w * grad scattered into `acc` tap-major over the tile, the dgrid sums
// (sum over taps of dw * value, times grad) into sums, the coordinates'
// multipliers into mult. The same bits as the builder and backward_channel:
// the weights and their derivatives as bicubic_taps_lanes writes them, 0
// where a tap is outside; the values 0 there; the scatter in the tile's
// order (an invalid tap adds +0 to element 0, which changes nothing).
template <Padding P, bool kAlign, bool kDx, bool kDgrid>
void backward_fused_bicubic_tile(const TileSource& src, int64_t n, int64_t p0, int count, const float* g,
                                 const float* gp, const float* ip, float* acc, float (*sums)[kTile],
                                 float (*mult)[kTile]) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const int lanes = static_cast<int>(hn::Lanes(d));
  const auto width = hn::Set(di, static_cast<int32_t>(src.in_w));
  const auto mult_x = hn::Set(d, coords::unnormalize_slope<float>(src.in_w, kAlign));
  const auto mult_y = hn::Set(d, coords::unnormalize_slope<float>(src.in_h, kAlign));
  alignas(64) int32_t index[16][kTile];
  alignas(64) float product[16][kTile];
  for (int i = 0; i < count; i += lanes) {
    hn::Vec<decltype(d)> gx, gy;
    alignas(64) float tail[2 * hn::MaxLanes(d)];
    hn::LoadInterleaved2(d, vector_values<2>(g, i, count, lanes, tail), gx, gy);
    alignas(64) float grad_tail[hn::MaxLanes(d)];
    const auto grad = hn::LoadU(d, vector_values<1>(gp, i, count, lanes, grad_tail));
    BicubicLanes<hn::ScalableTag<float>> s;
    bicubic_lanes<P, kAlign>(d, gx, gy, src.in_h, src.in_w, /*derivatives=*/kDgrid, &s);
    if (!hn::AllFalse(di, s.bad)) {
      backward_bicubic_through_tile<P, kAlign, kDx, kDgrid>(src, n, p0, i, std::min(lanes, count - i), gp + i,
                                                             ip, index, product, sums, mult);
      continue;
    }
    auto sx = hn::Zero(d), sy = hn::Zero(d);
    for (int j = 0; j < 4; ++j) {
      const auto row = hn::Mul(s.ty[j], width);
      for (int k = 0; k < 4; ++k) {
        const int tap = 4 * j + k;
        const auto valid = hn::And(s.y_in[j], s.x_in[k]);
        const auto valid_f = hn::RebindMask(d, valid);
        const auto at = hn::IfThenElseZero(valid, hn::Add(row, s.tx[k]));
        if constexpr (kDx) {
          hn::StoreU(at, di, index[tap] + i);
          // (Zero where invalid, whatever grad is: an infinite grad times
          // a zero weight would add NaN to element 0.)
          hn::StoreU(hn::IfThenElseZero(valid_f, hn::Mul(hn::Mul(s.cx[k], s.cy[j]), grad)), d, product[tap] + i);
        }
        if constexpr (kDgrid) {
          const auto v = hn::IfThenElseZero(valid_f, hn::GatherIndex(d, ip, at));
          sx = hn::Add(sx, hn::Mul(hn::IfThenElseZero(valid_f, hn::Mul(hn::Neg(s.gcx[k]), s.cy[j])), v));
          sy = hn::Add(sy, hn::Mul(hn::IfThenElseZero(valid_f, hn::Mul(hn::Neg(s.gcy[j]), s.cx[k])), v));
        }
      }
    }
    if constexpr (kDgrid) {
      hn::StoreU(hn::Add(hn::Zero(d), hn::Mul(sx, grad)), d, sums[0] + i);
      hn::StoreU(hn::Add(hn::Zero(d), hn::Mul(sy, grad)), d, sums[1] + i);
      hn::StoreU(mult_x, d, mult[0] + i);
      hn::StoreU(mult_y, d, mult[1] + i);
    }
  }
  if constexpr (kDx) {
    const bool runs = mostly_runs(index[0], count);
    for (int k = 0; k < 16; ++k) scatter_add(acc, index[k], product[k], count, runs);
  }
}

// As a table entry: the wanted outputs chosen at run time.
template <Padding P, bool kAlign>
void backward_fused_bicubic(const TileSource& src, int64_t n, int64_t p0, int count, const void* points,
                            const FusedPlanes& planes, bool want_dx, bool want_dgrid, void* sums, void* mult) {
  const float* g = static_cast<const float*>(points);
  const float* gp = static_cast<const float*>(planes.grad);  // (one channel: plan.cpp)
  const float* ip = static_cast<const float*>(planes.input);
  float* a = static_cast<float*>(planes.acc);
  auto* s = static_cast<float(*)[kTile]>(sums);
  auto* m = static_cast<float(*)[kTile]>(mult);
  if (want_dx && want_dgrid) {
    backward_fused_bicubic_tile<P, kAlign, true, true>(src, n, p0, count, g, gp, ip, a, s, m);
  } else if (want_dx) {
    backward_fused_bicubic_tile<P, kAlign, true, false>(src, n, p0, count, g, gp, ip, a, s, m);
  } else {
    backward_fused_bicubic_tile<P, kAlign, false, true>(src, n, p0, count, g, gp, ip, a, s, m);
  }
}

template <Padding P, bool kAlign>
void fill_fused_bicubic(KernelTable* table) {
  table->fused_forward_bicubic[static_cast<int>(P)][kAlign ? 1 : 0] = &forward_fused_bicubic<P, kAlign>;
  table->fused_backward_bicubic[static_cast<int>(P)][kAlign ? 1 : 0] = &backward_fused_bicubic<P, kAlign>;
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
