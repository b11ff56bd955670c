// The tap representation shared by stencil builders, microkernels and drivers.
//
// A tile holds the stencils of up to kTile consecutive output pixels of one
// image: for each of K taps, where the tap reads (a flat index into an
// interleaved or planar copy, and for planar kernels the strided offset in
// the caller's input), its interpolation weight, and the derivative of that
// weight with respect to each of the G pixel coordinates; per pixel, the
// factor d coordinate / d grid value of each component. Nothing here assumes
// two dimensions: a trilinear stencil is K = 8, G = 3; a tricubic one
// K = 64.
//
// Arrays are tap-major so that a microkernel's loop over pixels reads them
// sequentially. An invalid tap (outside the image) has weight and
// derivatives 0, flat index `plane` (a zero slot past the real pixels) and,
// when strided offsets are built, valid = false and offset 0: loops need no
// branches, and no value from outside leaks in through a zero weight.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/validate.hpp"
#include "cpu/tuning.hpp"
#include "gridsampler/gridsampler.hpp"
#include "hwy/base.h"

namespace gridsampler::cpu {

template <class T, int K, int G = 2>
struct Tile {
  using Value = T;
  int count = 0;
  bool out_dense = false;  // out_off[i] == p0 + i: the tile's outputs are consecutive
  // Taps 2j + 1 are the right-hand neighbours of taps 2j (same row, next
  // column), so that a kernel may read them as pairs (flat form).
  bool pairs = false;
  // Pixel offset in a grad/output channel plane; where out_dense only
  // out_off[0] (= p0) is set, and pixel i is at out_off[0] + i.
  int64_t out_off[kTile];
  int64_t in_off[K][kTile];  // strided input offset (strided form only)
  int64_t acc[K][kTile];     // flat index: y * Win + x (volumes: (z * Hin + y) * Win + x), or `plane` when invalid
  // The flat index again as int32, for float gathers, which take 32-bit
  // indices (flat form, float compute type, Hin * Win + Win < 2^31 only).
  int32_t acc32[K][kTile];
  bool valid[K][kTile];      // (strided form only)
  T w[K][kTile];
  T dw[G][K][kTile];  // d w / d coordinate g (g = 0: x, 1: y, 2: z)
  T mult[G][kTile];   // d coordinate g / d grid value g (0 where not differentiable)
};

// The flat indices of tap k at the width vector gathers take for the
// compute type: acc32 (int32) for float, acc (int64) for double. For
// builders (writing) and microkernels (reading, through a const tile).
template <class TileT>
inline auto* gather_indices(TileT* t, int k) {
  if constexpr (std::is_same_v<typename std::remove_const_t<TileT>::Value, float>) {
    return t->acc32[k];
  } else {
    return t->acc[k];
  }
}

// What a builder reads to make the tiles of one call.
struct TileSource {
  const void* grid = nullptr;  // storage type of the call's dtype
  // Volumes are read through 4-D views whose depth and height merge into
  // one dimension of rows (the grid (N, Dout * Hout, Wout, 3), the planes
  // (N, C, D * H, W)): a voxel's flat index (z * Hin + y) * Win + x is then
  // its row times Win plus x, as for an image.
  Shape4 grid_strides{};
  Shape4 out_strides{};  // of the grad (backward) or output (forward): for out_off
  Shape4 in_strides{};   // of the input: for in_off (strided form)
  int64_t in_d = 1, in_h = 0, in_w = 0, out_w = 0;
  // Whether the weights' derivatives (dw) and the coordinates' multipliers
  // (mult) are wanted: a forward, or a backward without dgrid, has no use
  // for them, and the vector builders then skip them. (The scalar stencil
  // makes them anyway.)
  bool derivatives = true;
  // Whether float tiles' flat indices are wanted as int64 (acc) as well as
  // int32 (acc32). The first-order kernels read flat indices as int32 for
  // float (planar gathers and interleaved blocks alike), so their drivers
  // skip the widening; the double backward asks for it. (The strided form
  // always has acc.)
  bool wide_indices = true;
  // Whether fused tiles may read windows of the plane (the plan's choice).
  bool window_reads = false;
  // Fused forward runs across tiny images (ForwardPlan::batched): a run's
  // pixels may cross into the next images, of this many output pixels
  // each, their planes in_strides[0] elements apart; 0: a run lies in one
  // image.
  int64_t image_pixels = 0;
};

inline TileSource tile_source(const detail::Problem& p, const TensorView& grid, const Shape4& out_strides,
                              const Shape4& in_strides, bool derivatives, bool wide_indices) {
  TileSource src;
  src.grid = grid.data;
  src.grid_strides = grid.strides;
  src.out_strides = out_strides;
  src.in_strides = in_strides;
  src.in_d = p.in_d;
  src.in_h = p.in_h;
  src.in_w = p.in_w;
  src.out_w = p.out_w;
  src.derivatives = derivatives;
  src.wide_indices = wide_indices;
  return src;
}

// Fills `tile` (a Tile<compute type, K>) with the stencils of output pixels
// [p0, p0 + count) of image n. One call per tile, never per pixel.
using BuildTileFn = void (*)(const TileSource& src, int64_t n, int64_t p0, int64_t count, void* tile);

// Whether a grid-shaped tensor (N, Hout, Wout, G), the grid or dgrid, is
// dense within an image: its pixels are then consecutive points of G
// components ((x, y) or (x, y, z)).
template <int G>
inline bool dense_points(const Shape4& strides, int64_t out_w) {
  return strides[3] == 1 && strides[2] == G && strides[1] == G * out_w;
}

// Calls f(q, m, y, x) for the runs of pixels [q, q + m) in [q0, q1) that lie
// in one image row (y, from x) of an image `width` pixels wide. Tensors of
// other strides (planes copied channel-minor, a grid permuted from
// (N, G, H, W), a grad broadcast over the output) are walked this way, a row
// segment at a time rather than a pixel at a time. Always inlined: this
// header is compiled for no SIMD target, and without it f, which is, could
// not be inlined into it (a call per run instead).
template <class F>
HWY_INLINE void for_each_row_run(int64_t width, int64_t q0, int64_t q1, F&& f) {
  for (int64_t q = q0; q < q1;) {
    const int64_t y = q / width, x = q % width, m = std::min(q1 - q, width - x);
    f(q, m, y, x);
    q += m;
  }
}

}  // namespace gridsampler::cpu
