// Fused tiles: one channel plane sampled bilinearly with each vector of
// output pixels' stencil kept in registers, from the grid values to the
// taps' reads, instead of going through a Tile in memory.
//
// Why: with one channel a tile's stencils serve a single plane, so writing
// them out and reading them back (indices, weights, derivatives, the padded
// coordinates before them) is not amortised over channels; on one-channel
// workloads the builder, the round trip and the tile's zeroing took about
// as much time as the reads of the taps themselves (docs/performance.md,
// "Fused one-channel tiles").
//
// A fused tile computes what the builder (builders-inl.h) and the planar
// microkernel (microkernels-inl.h) compute for the same tile, from the same
// per-vector pieces (SourceIndexLanes, bilinear_lanes, pair_lanes), in the
// same order: the same bits, which tests check on every target. The
// drivers (forward-inl.h, backward-inl.h) call one per tile in place of the
// builder and the microkernel when the plan has one (dense float or double
// planes of one channel, 2-D bilinear) and the grid and the output or grad
// are dense; everything around the tile (tasks, accumulators, dgrid stores,
// fixed-order sums) is the drivers' as before.

// Target-independent includes (normal include guards).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/coords.hpp"
#include "cpu/dispatch.hpp"
#include "cpu/tile.hpp"

// Per-target part: re-included once for every target.
#if defined(GRIDSAMPLER_CPU_FUSED_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GRIDSAMPLER_CPU_FUSED_INL_H_
#undef GRIDSAMPLER_CPU_FUSED_INL_H_
#else
#define GRIDSAMPLER_CPU_FUSED_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace gridsampler::cpu {
namespace HWY_NAMESPACE {
namespace {

#if HWY_TARGET != HWY_SCALAR

// The padded coordinates and bilinear taps of one vector of pixels (lanes
// from `i` of a tile whose grid values start at g, dense (x, y) pairs;
// lanes past `count` read grid value 0), and the coordinates' multipliers.
template <Padding P, bool kAlign, class D>
struct FusedStencil {
  using T = hwy::HWY_NAMESPACE::TFromD<D>;
  using V = hwy::HWY_NAMESPACE::Vec<D>;
  D d;
  SourceIndexLanes<P, kAlign, D> ax, ay;
  int64_t in_h, in_w;

  FusedStencil(D tag, int64_t h, int64_t w) : d(tag), ax(tag, w), ay(tag, h), in_h(h), in_w(w) {}

  BilinearLanes<D> operator()(const T* g, int i, int count, V* mult_x, V* mult_y) const {
    namespace hn = hwy::HWY_NAMESPACE;
    const int n = static_cast<int>(hn::Lanes(d));
    V gx, gy;
    if (i + n <= count) {
      hn::LoadInterleaved2(d, g + 2 * i, gx, gy);
    } else {
      alignas(64) T tail[2 * hn::MaxLanes(d)] = {};
      std::copy(g + 2 * i, g + 2 * count, tail);
      hn::LoadInterleaved2(d, tail, gx, gy);
    }
    hn::Mask<D> fast_x, fast_y;
    V x = ax(gx, mult_x, &fast_x), y = ay(gy, mult_y, &fast_y);
    if (!ax.vector_ok || !ay.vector_ok || !hn::AllTrue(d, hn::And(fast_x, fast_y))) {
      // The scalar policy for the whole vector (its bits, as the builder's
      // per-lane fallback gives).
      alignas(64) T c[4][hn::MaxLanes(d)], out[4][hn::MaxLanes(d)];
      hn::Store(gx, d, c[0]);
      hn::Store(gy, d, c[1]);
      for (int l = 0; l < n; ++l) {
        out[0][l] = coords::source_index<P>(c[0][l], in_w, kAlign, &out[2][l]);
        out[1][l] = coords::source_index<P>(c[1][l], in_h, kAlign, &out[3][l]);
      }
      x = hn::Load(d, out[0]);
      y = hn::Load(d, out[1]);
      *mult_x = hn::Load(d, out[2]);
      *mult_y = hn::Load(d, out[3]);
    }
    return bilinear_lanes(d, x, y, in_h, in_w);
  }
};

// The four taps' values (0 where invalid) in one plane: the rows' taps as
// pairs for float planes of two pixels or more, one gather per tap
// otherwise.
template <class D, class T>
inline void fused_values(D d, const BilinearLanes<D>& b, const T* __restrict ip, int64_t plane, int64_t in_w,
                         hwy::HWY_NAMESPACE::Vec<D> v[4]) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::RebindToSigned<D> di;
  if constexpr (std::is_same_v<T, float>) {
    if (plane >= 2) {
      for (int k = 0; k < 4; k += 2) {
        pair_lanes(di, bilinear_tap_index(di, b.base, k, in_w), bilinear_tap_index(di, b.base, k + 1, in_w),
                   hn::RebindMask(di, b.valid[k]), hn::RebindMask(di, b.valid[k + 1]), ip, plane, &v[k], &v[k + 1]);
      }
      return;
    }
  }
  for (int k = 0; k < 4; ++k) {
    const auto valid = hn::RebindMask(di, b.valid[k]);
    const auto index = hn::IfThenElseZero(valid, bilinear_tap_index(di, b.base, k, in_w));
    v[k] = hn::IfThenElseZero(b.valid[k], hn::GatherIndex(d, ip, index));
  }
}

// Stores the first `count` lanes of v at out.
template <class D, class T>
inline void store_lanes_n(D d, hwy::HWY_NAMESPACE::Vec<D> v, int count, T* out) {
  namespace hn = hwy::HWY_NAMESPACE;
  if (count >= static_cast<int>(hn::Lanes(d))) {
    hn::StoreU(v, d, out);
    return;
  }
  alignas(64) T tail[hn::MaxLanes(d)];
  hn::Store(v, d, tail);
  std::copy(tail, tail + count, out);
}

// The forward of output pixels [p0, p0 + count) of image n in one channel:
// op[p0 + i] = sum over taps of w * value, in tap order from 0 (as
// forward_channel).
template <class T, Padding P, bool kAlign>
void forward_fused(const TileSource& src, int64_t n, int64_t p0, int64_t count, const void* input, void* output) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<T> d;
  const int lanes = static_cast<int>(hn::Lanes(d));
  const T* g = static_cast<const T*>(src.grid) + n * src.grid_strides[0] + 2 * p0;
  const T* ip = static_cast<const T*>(input);
  T* op = static_cast<T*>(output) + p0;
  const int64_t plane = src.in_h * src.in_w;
  const FusedStencil<P, kAlign, hn::ScalableTag<T>> stencil(d, src.in_h, src.in_w);
  const int c = static_cast<int>(count);
  for (int i = 0; i < c; i += lanes) {
    hn::Vec<decltype(d)> mx, my, v[4];
    const auto b = stencil(g, i, c, &mx, &my);
    fused_values(d, b, ip, plane, src.in_w, v);
    auto acc = hn::Zero(d);
    for (int k = 0; k < 4; ++k) acc = hn::Add(acc, hn::Mul(hn::IfThenElseZero(b.valid[k], b.w[k]), v[k]));
    store_lanes_n(d, acc, c - i, op + i);
  }
}

// The backward of the same pixels: dx contributions w * grad added into
// `acc` (a plane of dx or an accumulator; tap-major over the tile, pixels in
// order, as backward_channel), the dgrid sums (sum over taps of dw * value,
// times grad) into sums[2][kTile], and the coordinates' multipliers into
// mult[2][kTile].
template <class T, Padding P, bool kAlign, bool kDx, bool kDgrid>
void backward_fused_tile(const TileSource& src, int64_t n, int64_t p0, int count, const T* gp, const T* ip, T* acc,
                         T (*sums)[kTile], T (*mult)[kTile]) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<T> d;
  const hn::RebindToSigned<decltype(d)> di;
  using TI = hn::TFromD<decltype(di)>;
  const int lanes = static_cast<int>(hn::Lanes(d));
  const T* g = static_cast<const T*>(src.grid) + n * src.grid_strides[0] + 2 * p0;
  const int64_t plane = src.in_h * src.in_w;
  const FusedStencil<P, kAlign, hn::ScalableTag<T>> stencil(d, src.in_h, src.in_w);
  // An invalid tap adds +0 to element 0: it changes no value there (no
  // accumulator is -0; they start at +0, and a sum from +0 never becomes -0).
  alignas(64) TI index[4][kTile];
  alignas(64) T product[4][kTile];
  for (int i = 0; i < count; i += lanes) {
    hn::Vec<decltype(d)> mx, my, grad;
    const auto b = stencil(g, i, count, &mx, &my);
    if (i + lanes <= count) {
      grad = hn::LoadU(d, gp + p0 + i);
    } else {
      alignas(64) T tail[hn::MaxLanes(d)] = {};
      std::copy(gp + p0 + i, gp + p0 + count, tail);
      grad = hn::Load(d, tail);
    }
    hn::StoreU(mx, d, mult[0] + i);
    hn::StoreU(my, d, mult[1] + i);
    if constexpr (kDx) {
      for (int k = 0; k < 4; ++k) {
        const auto valid = hn::RebindMask(di, b.valid[k]);
        hn::StoreU(hn::IfThenElseZero(valid, bilinear_tap_index(di, b.base, k, src.in_w)), di, index[k] + i);
        hn::StoreU(hn::IfThenElseZero(b.valid[k], hn::Mul(b.w[k], grad)), d, product[k] + i);
      }
    }
    if constexpr (kDgrid) {
      hn::Vec<decltype(d)> v[4];
      fused_values(d, b, ip, plane, src.in_w, v);
      auto sx = hn::Zero(d), sy = hn::Zero(d);
      for (int k = 0; k < 4; ++k) {
        sx = hn::Add(sx, hn::Mul(hn::IfThenElseZero(b.valid[k], b.dx[k]), v[k]));
        sy = hn::Add(sy, hn::Mul(hn::IfThenElseZero(b.valid[k], b.dy[k]), v[k]));
      }
      hn::StoreU(hn::Add(hn::Zero(d), hn::Mul(sx, grad)), d, sums[0] + i);
      hn::StoreU(hn::Add(hn::Zero(d), hn::Mul(sy, grad)), d, sums[1] + i);
    }
  }
  if constexpr (kDx) {
    for (int k = 0; k < 4; ++k) {
      const TI* __restrict idx = index[k];
      const T* __restrict add = product[k];
      for (int i = 0; i < count; ++i) acc[idx[i]] += add[i];
    }
  }
}

// As a table entry: the wanted outputs chosen at run time.
template <class T, Padding P, bool kAlign>
void backward_fused(const TileSource& src, int64_t n, int64_t p0, int count, const void* grad, const void* input,
                    void* acc, bool want_dx, bool want_dgrid, void* sums, void* mult) {
  const T* gp = static_cast<const T*>(grad);
  const T* ip = static_cast<const T*>(input);
  T* a = static_cast<T*>(acc);
  auto* s = static_cast<T(*)[kTile]>(sums);
  auto* m = static_cast<T(*)[kTile]>(mult);
  if (want_dx && want_dgrid) {
    backward_fused_tile<T, P, kAlign, true, true>(src, n, p0, count, gp, ip, a, s, m);
  } else if (want_dx) {
    backward_fused_tile<T, P, kAlign, true, false>(src, n, p0, count, gp, ip, a, s, m);
  } else {
    backward_fused_tile<T, P, kAlign, false, true>(src, n, p0, count, gp, ip, a, s, m);
  }
}

template <class S, Padding P, bool kAlign>
void fill_fused(KernelTable* table) {
  if constexpr (std::is_same_v<S, compute_t<S>>) {
    table->fused_forward[static_cast<int>(P)][kAlign ? 1 : 0] = &forward_fused<S, P, kAlign>;
    table->fused_backward[static_cast<int>(P)][kAlign ? 1 : 0] = &backward_fused<S, P, kAlign>;
  }
}

#endif  // HWY_TARGET != HWY_SCALAR

// The fused tiles of storage type S (float and double; none for 16-bit
// storage, which the microkernels widen, nor for the scalar target).
template <class S>
void fill_fused(KernelTable* table) {
#if HWY_TARGET != HWY_SCALAR
  fill_fused<S, Padding::kZeros, false>(table);
  fill_fused<S, Padding::kZeros, true>(table);
  fill_fused<S, Padding::kBorder, false>(table);
  fill_fused<S, Padding::kBorder, true>(table);
  fill_fused<S, Padding::kReflection, false>(table);
  fill_fused<S, Padding::kReflection, true>(table);
#else
  (void)table;
#endif
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace gridsampler::cpu
HWY_AFTER_NAMESPACE();

#endif  // GRIDSAMPLER_CPU_FUSED_INL_H_
