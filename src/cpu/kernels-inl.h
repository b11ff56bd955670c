// The CPU kernels, compiled once per SIMD target by Highway's
// foreach_target (see kernels_f32.cpp and its siblings, one per dtype) and
// chosen at run time for the CPU at hand. The loops are plain C++ written so
// that the compiler vectorises them for each target (see NOTE [Deterministic
// parallel backward] in kernels.hpp for how the work is split).
//
// Both directions work on tiles of kTile output pixels: the stencils of a
// tile are built once (coordinates, tap offsets, weights) into small arrays
// and then applied to every channel, so the coordinate work is amortised over
// the channels and each channel's loop is a tight gather/scatter over the
// tile. Values are computed in the compute type T (float32 for the 16-bit
// dtypes and float32, float64 for float64) and rounded once when stored.

// Target-independent includes (normal include guards).
#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>

#include <omp.h>

#include "core/dtype.hpp"
#include "core/memory.hpp"
#include "cpu/kernels.hpp"
#include "cpu/stencil.hpp"
#include "cpu/tuning.hpp"
#include "hwy/cache_control.h"

// Per-target part: re-included once for every target.
#if defined(GRIDSAMPLER_CPU_KERNELS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GRIDSAMPLER_CPU_KERNELS_INL_H_
#undef GRIDSAMPLER_CPU_KERNELS_INL_H_
#else
#define GRIDSAMPLER_CPU_KERNELS_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace gridsampler::cpu {
namespace HWY_NAMESPACE {
namespace {

using detail::Problem;

// float16 <-> float32 in hardware (F16C: exact widening, narrowing to
// nearest even). Highway emulates the conversions on other targets, and
// there its narrowing came out an ulp off round-to-nearest-even (seen in the
// sanitizer build's baseline target), so those convert on the bits
// (half.hpp).
#if HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL)
constexpr bool kHardwareHalf = true;
#else
constexpr bool kHardwareHalf = false;
#endif


// The stencils of up to kTile consecutive output pixels of one image, laid
// out tap-major so each channel's loop reads them sequentially. Invalid taps
// have zero weights, input offset 0 and accumulator index `plane` (a dummy
// slot past the real pixels), so loops need no branches; the gathered value
// of an invalid tap is replaced by 0 so that nothing from outside leaks in.
template <class T, int K>
struct Tile {
  int count = 0;
  int64_t out_off[kTile];  // pixel offset in a grad/output channel plane
  int64_t in_off[K][kTile];
  int64_t acc[K][kTile];  // y * Win + x
  bool valid[K][kTile];
  T w[K][kTile];
  T dwx[K][kTile];
  T dwy[K][kTile];
  T mult_x[kTile];
  T mult_y[kTile];
};

// Whether a grid-shaped tensor (N, Hout, Wout, 2), the grid or dgrid, is
// dense within an image: its pixels are then consecutive (x, y) pairs.
inline bool dense_pairs(const Shape4& strides, int64_t out_w) {
  return strides[3] == 1 && strides[2] == 2 && strides[1] == 2 * out_w;
}

// Stores one pixel's stencil into the tile; without kOffsets, only what the
// interleaved backward reads (accumulator indices and weights).
template <bool kOffsets, class T, int K>
inline void put_stencil(const Stencil<T, K>& s, int64_t i, int64_t plane, int64_t in_w,
                        const Shape4& in_strides, Tile<T, K>* t) {
  for (int k = 0; k < K; ++k) {
    const bool ok = s.valid[k];
    if constexpr (kOffsets) {
      t->valid[k][i] = ok;
      t->in_off[k][i] = ok ? s.y[k] * in_strides[2] + s.x[k] * in_strides[3] : 0;
    }
    t->acc[k][i] = ok ? s.y[k] * in_w + s.x[k] : plane;
    t->w[k][i] = ok ? s.w[k] : T(0);
    t->dwx[k][i] = ok ? s.dw_dx[k] : T(0);
    t->dwy[k][i] = ok ? s.dw_dy[k] : T(0);
  }
}

// The bilinear taps of a tile's padded coordinates, vectorised over pixels
// with Highway: accumulator indices and weights only (what the interleaved
// backward reads). The arithmetic is bilinear_taps' (stencil.hpp), with two
// shortcuts the caller guarantees to be exact: validity is decided on the
// floating-point coordinates (0 <= floor <= size - 1, exact while Hin and
// Win are at most 2^24 for float, 2^53 for double; NaN, infinite and huge
// coordinates fail it as to_index makes them fail), and indices are formed in
// int32 for float (Hin * Win + Win < 2^31) and in double, converted to
// int64, for double (Hin * Win + Win < 2^53: integers, so exact).
template <class T, class D, class VF>
inline auto tap_index(D di, VF row, VF col, int64_t in_w) {
  namespace hn = hwy::HWY_NAMESPACE;
  if constexpr (std::is_same_v<T, float>) {
    return hn::ConvertTo(di, row) * hn::Set(di, static_cast<int32_t>(in_w)) + hn::ConvertTo(di, col);
  } else {
    const hn::DFromV<VF> df;
    return hn::ConvertTo(di, hn::Add(hn::Mul(row, hn::Set(df, static_cast<T>(in_w))), col));
  }
}

// Where the builders store one tap's indices: straight into the tile's
// int64 row for double; for float an int32 buffer, widened afterwards.
template <class TI>
inline TI* tap_index_out(TI (&idx)[kTile], int64_t* acc) {
  if constexpr (std::is_same_v<TI, int64_t>) {
    return acc;
  } else {
    return idx;
  }
}

template <class T>
inline void bilinear_taps_lanes(const T* ix, const T* iy, int count, int64_t in_h, int64_t in_w,
                                Tile<T, 4>* t) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<T> df;
  const hn::RebindToSigned<decltype(df)> di;
  using TI = hn::TFromD<decltype(di)>;
  const int n = static_cast<int>(hn::Lanes(df));
  const auto zero = hn::Zero(df), one = hn::Set(df, T(1)), minus_one = hn::Set(df, T(-1));
  const auto x_last = hn::Set(df, static_cast<T>(in_w - 1));
  const auto x_before_last = hn::Set(df, static_cast<T>(in_w - 2));
  const auto y_last = hn::Set(df, static_cast<T>(in_h - 1));
  const auto y_before_last = hn::Set(df, static_cast<T>(in_h - 2));
  const auto dummy = hn::Set(di, static_cast<TI>(in_h * in_w));
  const auto one_i = hn::Set(di, TI(1));
  const auto width = hn::Set(di, static_cast<TI>(in_w));
  alignas(64) TI idx[4][kTile];
  TI* out[4];
  for (int k = 0; k < 4; ++k) out[k] = tap_index_out(idx[k], t->acc[k]);
  for (int i = 0; i < count; i += n) {
    const auto x = hn::LoadU(df, ix + i), y = hn::LoadU(df, iy + i);
    const auto fx = hn::Floor(x), fy = hn::Floor(y);
    const auto west = x - fx, east = (fx + one) - x;
    const auto north = y - fy, south = (fy + one) - y;
    const auto x0 = hn::And(fx >= zero, fx <= x_last), x1 = hn::And(fx >= minus_one, fx <= x_before_last);
    const auto y0 = hn::And(fy >= zero, fy <= y_last), y1 = hn::And(fy >= minus_one, fy <= y_before_last);
    // Integral values in [-1, size - 1] where a tap may be valid, 0 elsewhere.
    const auto base = tap_index<T>(di, hn::IfThenElseZero(hn::Or(y0, y1), fy), hn::IfThenElseZero(hn::Or(x0, x1), fx),
                                   in_w);
    auto put = [&](int k, auto valid, auto index, auto w, auto dx, auto dy) {
      hn::StoreU(hn::IfThenElse(hn::RebindMask(di, valid), index, dummy), di, out[k] + i);
      hn::StoreU(hn::IfThenElseZero(valid, w), df, t->w[k] + i);
      hn::StoreU(hn::IfThenElseZero(valid, dx), df, t->dwx[k] + i);
      hn::StoreU(hn::IfThenElseZero(valid, dy), df, t->dwy[k] + i);
    };
    put(0, hn::And(y0, x0), base, south * east, hn::Neg(south), hn::Neg(east));
    put(1, hn::And(y0, x1), base + one_i, south * west, south, hn::Neg(west));
    put(2, hn::And(y1, x0), base + width, north * east, hn::Neg(north), east);
    put(3, hn::And(y1, x1), base + width + one_i, north * west, north, west);
  }
  if constexpr (!std::is_same_v<TI, int64_t>) {
    for (int k = 0; k < 4; ++k) {
      for (int i = 0; i < count; ++i) t->acc[k][i] = idx[k][i];
    }
  }
}

// The nearest taps likewise (the same shortcuts; rounding half to even like
// nearbyint).
template <class T>
inline void nearest_taps_lanes(const T* ix, const T* iy, int count, int64_t in_h, int64_t in_w,
                               Tile<T, 1>* t) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<T> df;
  const hn::RebindToSigned<decltype(df)> di;
  using TI = hn::TFromD<decltype(di)>;
  const int n = static_cast<int>(hn::Lanes(df));
  const auto zero = hn::Zero(df), one = hn::Set(df, T(1));
  const auto x_last = hn::Set(df, static_cast<T>(in_w - 1));
  const auto y_last = hn::Set(df, static_cast<T>(in_h - 1));
  const auto dummy = hn::Set(di, static_cast<TI>(in_h * in_w));
  alignas(64) TI idx[kTile];
  TI* out = tap_index_out(idx, t->acc[0]);
  for (int i = 0; i < count; i += n) {
    const auto rx = hn::Round(hn::LoadU(df, ix + i)), ry = hn::Round(hn::LoadU(df, iy + i));
    const auto valid = hn::And(hn::And(rx >= zero, rx <= x_last), hn::And(ry >= zero, ry <= y_last));
    const auto index = tap_index<T>(di, hn::IfThenElseZero(valid, ry), hn::IfThenElseZero(valid, rx), in_w);
    hn::StoreU(hn::IfThenElse(hn::RebindMask(di, valid), index, dummy), di, out + i);
    hn::StoreU(hn::IfThenElseZero(valid, one), df, t->w[0] + i);
    hn::StoreU(zero, df, t->dwx[0] + i);
    hn::StoreU(zero, df, t->dwy[0] + i);
  }
  if constexpr (!std::is_same_v<TI, int64_t>) {
    for (int i = 0; i < count; ++i) t->acc[0][i] = idx[i];
  }
}

// The bicubic taps of a tile's grid values, likewise (accumulator indices
// and weights), with the arithmetic of build_stencil (stencil.hpp, coords.hpp)
// in the same order. A tap position p = floor(ix) - 1 + i is padded in int32:
// border clamps it; reflection folds it at most twice (below 0, then above
// the last pixel), which is exactly what the float policy does to integral
// positions. Pixels this cannot do exactly are marked in `fallback` for the
// scalar path: a non-finite or large coordinate (|ix| >= 2^22, beyond which
// floor(ix) - 1 + i is not exact in float), or a reflected tap still outside
// the image after two folds. Requires Hin * Win + Win < 2^31.
template <Padding P, bool kAlign>
inline void bicubic_taps_lanes(const float* grid_x, const float* grid_y, int count, int64_t in_h, int64_t in_w,
                               Tile<float, 16>* t, bool* fallback) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  using VF = hn::Vec<decltype(df)>;
  using VI = hn::Vec<decltype(di)>;
  using MI = hn::Mask<decltype(di)>;
  const int n = static_cast<int>(hn::Lanes(df));
  const auto one = hn::Set(df, 1.0f), half = hn::Set(df, 0.5f);
  const auto limit = hn::Set(df, 4194304.0f);  // 2^22
  const auto a = hn::Set(df, -0.75f);
  const auto width = hn::Set(di, static_cast<int32_t>(in_w));
  const auto dummy = hn::Set(di, static_cast<int32_t>(in_h * in_w));
  const float mult_x = coords::unnormalize_slope<float>(in_w, kAlign);
  const float mult_y = coords::unnormalize_slope<float>(in_h, kAlign);
  alignas(64) int32_t idx[16][kTile];
  // Grid value -> unpadded source coordinate (coords::unnormalize).
  auto unnormalize = [&](VF g, int64_t size) {
    if constexpr (kAlign) return hn::Mul(hn::Mul(hn::Add(g, one), half), hn::Set(df, static_cast<float>(size - 1)));
    return hn::Mul(hn::Sub(hn::Mul(hn::Add(g, one), hn::Set(df, static_cast<float>(size))), one), half);
  };
  // coords::cubic_weights and coords::cubic_weight_grads, term by term.
  auto weights = [&](VF frac, VF w[4], VF g[4]) {
    const auto a2 = hn::Add(a, hn::Set(df, 2.0f)), a3 = hn::Add(a, hn::Set(df, 3.0f));
    const auto a5 = hn::Mul(hn::Set(df, 5.0f), a), a8 = hn::Mul(hn::Set(df, 8.0f), a);
    const auto a4 = hn::Mul(hn::Set(df, 4.0f), a), a10 = hn::Mul(hn::Set(df, 10.0f), a);
    auto near = [&](VF x) { return hn::Add(hn::Mul(hn::Mul(hn::Sub(hn::Mul(a2, x), a3), x), x), one); };
    auto far = [&](VF x) { return hn::Sub(hn::Mul(hn::Add(hn::Mul(hn::Sub(hn::Mul(a, x), a5), x), a8), x), a4); };
    const auto x2 = hn::Sub(one, frac);
    w[0] = far(hn::Add(frac, one));
    w[1] = near(frac);
    w[2] = near(x2);
    w[3] = far(hn::Add(x2, one));
    const auto m3a = hn::Mul(hn::Set(df, -3.0f), a), p3a = hn::Mul(hn::Set(df, 3.0f), a);
    const auto m3a2 = hn::Mul(hn::Set(df, -3.0f), a2), p3a2 = hn::Mul(hn::Set(df, 3.0f), a2);
    const auto two_a3 = hn::Mul(hn::Set(df, 2.0f), a3);
    VF x = hn::Sub(hn::Set(df, -1.0f), frac);
    g[0] = hn::Sub(hn::Mul(hn::Sub(hn::Mul(m3a, x), a10), x), a8);
    x = hn::Neg(frac);
    g[1] = hn::Mul(hn::Sub(hn::Mul(m3a2, x), two_a3), x);
    x = hn::Sub(one, frac);
    g[2] = hn::Mul(hn::Sub(hn::Mul(p3a2, x), two_a3), x);
    x = hn::Sub(hn::Set(df, 2.0f), frac);
    g[3] = hn::Add(hn::Mul(hn::Sub(hn::Mul(p3a, x), a10), x), a8);
  };
  // Pads the tap positions base - 1 + i along an axis of `size` pixels:
  // the padded indices, which are inside, and (reflection) which are not
  // done by two folds.
  auto pad_taps = [&](VI base, int64_t size, VI pos[4], MI inside[4], MI* bad) {
    const auto last = hn::Set(di, static_cast<int32_t>(size - 1));
    const auto zero = hn::Zero(di);
    for (int i = 0; i < 4; ++i) {
      VI v = hn::Add(base, hn::Set(di, i - 1));
      if constexpr (P == Padding::kBorder) {
        v = hn::Min(hn::Max(v, zero), last);
      } else if constexpr (P == Padding::kReflection) {
        if constexpr (kAlign) {  // about 0 and size - 1
          v = hn::IfThenElse(hn::Lt(v, zero), hn::Neg(v), v);
          v = hn::IfThenElse(hn::Gt(v, last), hn::Sub(hn::Add(last, last), v), v);
        } else {  // about -1/2 and size - 1/2
          v = hn::IfThenElse(hn::Lt(v, zero), hn::Sub(hn::Set(di, -1), v), v);
          v = hn::IfThenElse(hn::Gt(v, last), hn::Sub(hn::Add(last, hn::Add(last, hn::Set(di, 1))), v), v);
        }
      }
      inside[i] = hn::Not(hn::Or(hn::Lt(v, zero), hn::Gt(v, last)));
      if constexpr (P == Padding::kReflection) *bad = hn::Or(*bad, hn::Not(inside[i]));
      pos[i] = v;
    }
  };
  for (int i = 0; i < count; i += n) {
    VF ix = unnormalize(hn::LoadU(df, grid_x + i), in_w);
    VF iy = unnormalize(hn::LoadU(df, grid_y + i), in_h);
    // Not (|ix| < 2^22 and |iy| < 2^22): NaN and infinities included.
    const auto ok = hn::And(hn::Lt(hn::Abs(ix), limit), hn::Lt(hn::Abs(iy), limit));
    ix = hn::IfThenElseZero(ok, ix);
    iy = hn::IfThenElseZero(ok, iy);
    const VF fx = hn::Floor(ix), fy = hn::Floor(iy);
    VF cx[4], cy[4], gcx[4], gcy[4];
    weights(hn::Sub(ix, fx), cx, gcx);
    weights(hn::Sub(iy, fy), cy, gcy);
    VI tx[4], ty[4];
    MI x_in[4], y_in[4];
    MI bad = hn::RebindMask(di, hn::Not(ok));
    pad_taps(hn::ConvertTo(di, fx), in_w, tx, x_in, &bad);
    pad_taps(hn::ConvertTo(di, fy), in_h, ty, y_in, &bad);
    hn::StoreU(hn::Set(df, mult_x), df, t->mult_x + i);
    hn::StoreU(hn::Set(df, mult_y), df, t->mult_y + i);
    alignas(64) int32_t bad_lanes[hn::MaxLanes(di)];
    hn::Store(hn::VecFromMask(di, bad), di, bad_lanes);
    for (int l = 0; l < n && i + l < kTile; ++l) fallback[i + l] = bad_lanes[l] != 0;
    for (int j = 0; j < 4; ++j) {
      const VI row = hn::Mul(ty[j], width);
      for (int k = 0; k < 4; ++k) {
        const int tap = j * 4 + k;
        const auto valid = hn::And(y_in[j], x_in[k]);
        const auto valid_f = hn::RebindMask(df, valid);
        hn::StoreU(hn::IfThenElse(valid, hn::Add(row, tx[k]), dummy), di, idx[tap] + i);
        hn::StoreU(hn::IfThenElseZero(valid_f, hn::Mul(cx[k], cy[j])), df, t->w[tap] + i);
        hn::StoreU(hn::IfThenElseZero(valid_f, hn::Mul(hn::Neg(gcx[k]), cy[j])), df, t->dwx[tap] + i);
        hn::StoreU(hn::IfThenElseZero(valid_f, hn::Mul(hn::Neg(gcy[j]), cx[k])), df, t->dwy[tap] + i);
      }
    }
  }
  for (int k = 0; k < 16; ++k) {
    for (int i = 0; i < count; ++i) t->acc[k][i] = idx[k][i];
  }
}

template <Interpolation M, Padding P, bool kAlign, bool kOffsets, class S, class T, int K>
void fill_tile(const Problem& p, const TensorView& grid, const Shape4& out_strides, int64_t n,
               int64_t p0, int64_t count, Tile<T, K>* t, const Shape4& in_strides) {
  const S* gr = static_cast<const S*>(grid.data) + n * grid.strides[0];
  const Shape4& gs = grid.strides;
  const int64_t plane = p.in_h * p.in_w;
  t->count = static_cast<int>(count);
  // Where each pixel's grid values are and where its grad/output value goes:
  // runs of consecutive pixels when the grid and the planes are dense.
  T gx[kTile], gy[kTile];
  if (dense_pairs(gs, p.out_w)) {
    const S* g = gr + 2 * p0;
    for (int64_t i = 0; i < count; ++i) {
      gx[i] = load(g[2 * i]);
      gy[i] = load(g[2 * i + 1]);
    }
  } else {
    int64_t h = p0 / p.out_w, w = p0 % p.out_w;
    for (int64_t i = 0; i < count; ++i, ++w) {
      if (w == p.out_w) {
        w = 0;
        ++h;
      }
      const S* g = gr + h * gs[1] + w * gs[2];
      gx[i] = load(g[0]);
      gy[i] = load(g[gs[3]]);
    }
  }
  if (out_strides[3] == 1 && out_strides[2] == p.out_w) {
    for (int64_t i = 0; i < count; ++i) t->out_off[i] = p0 + i;
  } else {
    int64_t h = p0 / p.out_w, w = p0 % p.out_w;
    for (int64_t i = 0; i < count; ++i, ++w) {
      if (w == p.out_w) {
        w = 0;
        ++h;
      }
      t->out_off[i] = h * out_strides[2] + w * out_strides[3];
    }
  }
  if constexpr (M != Interpolation::kBicubic) {
    // Two loops: the padding policy per pixel, then the taps of the padded
    // coordinates in a loop without calls or branches.
    T ix[kTile], iy[kTile];
    for (int64_t i = 0; i < count; ++i) {
      ix[i] = coords::source_index<P>(gx[i], p.in_w, kAlign, &t->mult_x[i]);
      iy[i] = coords::source_index<P>(gy[i], p.in_h, kAlign, &t->mult_y[i]);
    }
#if HWY_TARGET != HWY_SCALAR
    if constexpr (!kOffsets) {
      // Where the vector builders are exact (see bilinear_taps_lanes).
      constexpr bool kFloat = std::is_same_v<T, float>;
      constexpr int64_t kExact = int64_t{1} << (kFloat ? 24 : 53);
      constexpr int64_t kIndexLimit = int64_t{1} << (kFloat ? 31 : 53);
      if (p.in_w <= kExact && p.in_h <= kExact && plane + p.in_w < kIndexLimit) {
        std::fill(ix + count, ix + kTile, T(0));
        std::fill(iy + count, iy + kTile, T(0));
        if constexpr (M == Interpolation::kBilinear) {
          bilinear_taps_lanes(ix, iy, static_cast<int>(count), p.in_h, p.in_w, t);
        } else {
          nearest_taps_lanes(ix, iy, static_cast<int>(count), p.in_h, p.in_w, t);
        }
        return;
      }
    }
#endif
    for (int64_t i = 0; i < count; ++i) {
      Stencil<T, K> s;
      if constexpr (M == Interpolation::kBilinear) {
        bilinear_taps(ix[i], iy[i], p.in_h, p.in_w, &s);
      } else {
        nearest_tap(ix[i], iy[i], p.in_h, p.in_w, &s);
      }
      put_stencil<kOffsets>(s, i, plane, p.in_w, in_strides, t);
    }
  } else {
    auto scalar_stencil = [&](int64_t i) {
      Stencil<T, K> s;
      build_stencil<M, P, kAlign>(gx[i], gy[i], p.in_h, p.in_w, &s);
      t->mult_x[i] = s.mult_x;
      t->mult_y[i] = s.mult_y;
      put_stencil<kOffsets>(s, i, plane, p.in_w, in_strides, t);
    };
#if HWY_TARGET != HWY_SCALAR
    if constexpr (!kOffsets && std::is_same_v<T, float>) {
      if (plane + p.in_w < (int64_t{1} << 31)) {
        std::fill(gx + count, gx + kTile, T(0));
        std::fill(gy + count, gy + kTile, T(0));
        bool fallback[kTile];
        bicubic_taps_lanes<P, kAlign>(gx, gy, static_cast<int>(count), p.in_h, p.in_w, t, fallback);
        for (int64_t i = 0; i < count; ++i) {
          if (fallback[i]) scalar_stencil(i);
        }
        return;
      }
    }
#endif
    for (int64_t i = 0; i < count; ++i) scalar_stencil(i);
  }
}

// ---------------------------------------------------------------------------
// Forward: tasks are (n, tile); each writes its own output pixels.

template <class S, Interpolation M, Padding P, bool kAlign>
void forward_planar(const Problem& p, int threads, const TensorView& input, const TensorView& grid,
                    const MutableTensorView& output) {
  using T = compute_t<S>;
  constexpr int K = kTaps<M>;
  const int64_t pixels = p.out_h * p.out_w;
  const int64_t tiles = (pixels + kTile - 1) / kTile;
  const S* in = static_cast<const S*>(input.data);
  S* out = static_cast<S*>(output.data);
  const Shape4& is = input.strides;
  const Shape4& os = output.strides;
#pragma omp parallel num_threads(threads)
  {
    auto tile = std::make_unique<Tile<T, K>>();
#pragma omp for schedule(static)
    for (int64_t task = 0; task < p.n * tiles; ++task) {
      const int64_t n = task / tiles;
      const int64_t p0 = (task % tiles) * kTile;
      const int64_t count = std::min<int64_t>(kTile, pixels - p0);
      fill_tile<M, P, kAlign, true, S>(p, grid, os, n, p0, count, tile.get(), is);
      const Tile<T, K>& t = *tile;
      for (int64_t c = 0; c < p.c; ++c) {
        const S* ip = in + n * is[0] + c * is[1];
        S* op = out + n * os[0] + c * os[1];
        for (int i = 0; i < t.count; ++i) {
          T acc = 0;
          for (int k = 0; k < K; ++k) {
            const T v = t.valid[k][i] ? load(ip[t.in_off[k][i]]) : T(0);
            acc += t.w[k][i] * v;
          }
          op[t.out_off[i]] = store<S>(acc);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Backward.

// Adds one channel's contributions over a tile: dx into `acc` (one
// accumulator plane), dgrid terms into gx/gy. Written as separate simple
// loops over the tile's pixels so that the compiler can vectorise the ones
// without scatter conflicts (the grad loads and the dgrid gathers); the dx
// scatter stays scalar because neighbouring pixels may hit the same input
// pixel.
template <class S, class T, int K, bool kDx, bool kDgrid>
inline void backward_channel(const Tile<T, K>& t, const S* __restrict gp, const S* __restrict ip,
                             T* __restrict acc, T* __restrict gx, T* __restrict gy) {
  const int count = t.count;
  T g[kTile];
  for (int i = 0; i < count; ++i) g[i] = load(gp[t.out_off[i]]);
  if constexpr (kDx) {
    for (int k = 0; k < K; ++k) {
      const int64_t* __restrict idx = t.acc[k];
      const T* __restrict w = t.w[k];
      for (int i = 0; i < count; ++i) acc[idx[i]] += w[i] * g[i];
    }
  }
  if constexpr (kDgrid) {
    T sx[kTile] = {}, sy[kTile] = {};
    for (int k = 0; k < K; ++k) {
      const int64_t* __restrict off = t.in_off[k];
      const bool* __restrict valid = t.valid[k];
      const T* __restrict dwx = t.dwx[k];
      const T* __restrict dwy = t.dwy[k];
      for (int i = 0; i < count; ++i) {
        const T v = valid[i] ? load(ip[off[i]]) : T(0);
        sx[i] += dwx[i] * v;
        sy[i] += dwy[i] * v;
      }
    }
    for (int i = 0; i < count; ++i) {
      gx[i] += sx[i] * g[i];
      gy[i] += sy[i] * g[i];
    }
  }
}

// Interleaved variant: a block of L channels (kLanes, or kNarrowLanes when
// there are fewer than 8 channels) is processed together, with
// the accumulators and a copy of the input stored pixel-major and channel-minor
// ([pixel][lane]), so that every tap of every pixel is one contiguous run of
// L values: the inner loops have no gathers, no scatter conflicts and a
// fixed length the compiler turns into vector code. Both buffers end with a
// zero row that invalid taps point at.

// Moves between planes and the [pixel][lane] layout. These are written as
// plain loops in the shape compilers vectorise for every target: an
// interleaving store of L rows read contiguously, and its inverse
// through an L x L block in registers (GCC turns both into
// vpermt2ps on AVX-512, unpack/permute sequences on AVX2). Highway
// has no transpose; hand-written shuffles per target would be the only
// alternative.

// dst[q][j] = src[j * row_stride + q] for the first `rows` (1 to L) rows j
// and q < n, widened to T; lanes from `rows` on are zero.
template <int L, class S, class T>
inline void interleave_rows(const S* src, int64_t row_stride, int rows, int64_t n, T* __restrict dst) {
  if constexpr (kHardwareHalf && std::is_same_v<S, Half> && std::is_same_v<T, float>) {
    // float16: widen a stretch of each row with Highway (F16C on x86, exact
    // like half_to_float), then interleave floats. Per element the bit
    // conversion cost more than the rest of the transpose.
    namespace hn = hwy::HWY_NAMESPACE;
    const hn::ScalableTag<float> df;
    const hn::Rebind<hwy::float16_t, decltype(df)> dh;
    const auto nf = static_cast<int64_t>(hn::Lanes(df));
    constexpr int64_t kStretch = 256;
    alignas(64) float wide[L][kStretch];
    for (int64_t q0 = 0; q0 < n; q0 += kStretch) {
      const int64_t m = std::min(kStretch, n - q0);
      for (int j = 0; j < rows; ++j) {
        const S* row = src + j * row_stride + q0;
        int64_t q = 0;
        for (; q + nf <= m; q += nf) {
          hn::Store(hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(row + q))), df,
                    wide[j] + q);
        }
        for (; q < m; ++q) wide[j][q] = load(row[q]);
      }
      interleave_rows<L>(&wide[0][0], kStretch, rows, m, dst + q0 * L);
    }
    return;
  }
  if constexpr (L == 4 && std::is_same_v<S, T>) {
    // Four lanes: Highway's interleaving store of four rows (the loop below
    // would zero the missing lanes one scalar store at a time).
    namespace hn = hwy::HWY_NAMESPACE;
    const hn::ScalableTag<T> dt;
    const auto nt = static_cast<int64_t>(hn::Lanes(dt));
    const T* r[4];
    for (int j = 0; j < 4; ++j) r[j] = src + std::min(j, rows - 1) * row_stride;
    const auto zero = hn::Zero(dt);
    int64_t q = 0;
    for (; q + nt <= n; q += nt) {
      const auto v0 = hn::LoadU(dt, r[0] + q);
      const auto v1 = rows > 1 ? hn::LoadU(dt, r[1] + q) : zero;
      const auto v2 = rows > 2 ? hn::LoadU(dt, r[2] + q) : zero;
      const auto v3 = rows > 3 ? hn::LoadU(dt, r[3] + q) : zero;
      hn::StoreInterleaved4(v0, v1, v2, v3, dt, dst + q * 4);
    }
    for (; q < n; ++q) {
      for (int j = 0; j < 4; ++j) dst[q * 4 + j] = j < rows ? r[j][q] : T(0);
    }
    return;
  }
  const S* __restrict from[L];
  for (int j = 0; j < L; ++j) from[j] = src + std::min(j, rows - 1) * row_stride;
  // All L lanes (the missing ones from the last row: a loop the compiler
  // vectorises, where a select per lane kept it scalar), then zeroes.
  for (int64_t q = 0; q < n; ++q) {
#pragma GCC unroll 16
    for (int j = 0; j < L; ++j) dst[q * L + j] = load(from[j][q]);
  }
  if (rows < L) {
    for (int j = rows; j < L; ++j) {
      for (int64_t q = 0; q < n; ++q) dst[q * L + j] = T(0);
    }
  }
}

// dst[j * row_stride + q] = src[q][j] for the first `rows` lanes j, the
// inverse, rounded to S.
template <int L, class S, class T>
inline void deinterleave_rows(const T* __restrict src, int rows, int64_t n, S* dst, int64_t row_stride) {
  if constexpr (kHardwareHalf && std::is_same_v<S, Half> && std::is_same_v<T, float>) {
    // float16: transpose floats into a stretch of rows, then narrow each row
    // with Highway (F16C on x86: round to nearest even, like half_from_float;
    // NaNs are made the canonical quiet NaN first, as half_from_float does).
    namespace hn = hwy::HWY_NAMESPACE;
    const hn::ScalableTag<float> df;
    const hn::Rebind<hwy::float16_t, decltype(df)> dh;
    const auto nf = static_cast<int64_t>(hn::Lanes(df));
    const auto quiet_nan = hn::BitCast(df, hn::Set(hn::RebindToUnsigned<decltype(df)>(), 0x7fc00000u));
    constexpr int64_t kStretch = 256;
    alignas(64) float wide[L][kStretch];
    for (int64_t q0 = 0; q0 < n; q0 += kStretch) {
      const int64_t m = std::min(kStretch, n - q0);
      deinterleave_rows<L>(src + q0 * L, rows, m, &wide[0][0], kStretch);
      for (int j = 0; j < rows; ++j) {
        S* row = dst + j * row_stride + q0;
        int64_t q = 0;
        for (; q + nf <= m; q += nf) {
          auto v = hn::Load(df, wide[j] + q);
          v = hn::IfThenElse(hn::IsNaN(v), hn::CopySign(quiet_nan, v), v);
          hn::StoreU(hn::DemoteTo(dh, v), dh, reinterpret_cast<hwy::float16_t*>(row + q));
        }
        for (; q < m; ++q) row[q] = store<S>(wide[j][q]);
      }
    }
    return;
  }
  if constexpr (L == 4 && std::is_same_v<S, T>) {
    namespace hn = hwy::HWY_NAMESPACE;
    const hn::ScalableTag<T> dt;
    const auto nt = static_cast<int64_t>(hn::Lanes(dt));
    int64_t q = 0;
    for (; q + nt <= n; q += nt) {
      hn::Vec<decltype(dt)> v0, v1, v2, v3;
      hn::LoadInterleaved4(dt, src + q * 4, v0, v1, v2, v3);
      hn::StoreU(v0, dt, dst + q);
      if (rows > 1) hn::StoreU(v1, dt, dst + row_stride + q);
      if (rows > 2) hn::StoreU(v2, dt, dst + 2 * row_stride + q);
      if (rows > 3) hn::StoreU(v3, dt, dst + 3 * row_stride + q);
    }
    for (; q < n; ++q) {
      for (int j = 0; j < rows; ++j) dst[j * row_stride + q] = src[q * 4 + j];
    }
    return;
  }
  int64_t q0 = 0;
  for (; q0 + L <= n; q0 += L) {
    T t[L][L];
    for (int i = 0; i < L; ++i) {
#pragma GCC unroll 16
      for (int j = 0; j < L; ++j) t[j][i] = src[(q0 + i) * L + j];
    }
    for (int j = 0; j < rows; ++j) {
      S* __restrict d = dst + j * row_stride + q0;
      for (int i = 0; i < L; ++i) d[i] = store<S>(t[j][i]);
    }
  }
  for (; q0 < n; ++q0) {
    for (int j = 0; j < rows; ++j) dst[j * row_stride + q0] = store<S>(src[q0 * L + j]);
  }
}

// Written with Highway's vectors (CappedTag: L / N vectors of N lanes,
// N = 16 floats on AVX-512): left to itself the compiler sometimes unrolls
// these fixed-length loops into scalar code instead of vectorising them.
template <int L, class S, class T, int K, bool kDx, bool kDgrid>
inline void backward_lanes(const Tile<T, K>& t, const T* __restrict gt, const T* __restrict xin,
                           T* __restrict acc, T* __restrict gx, T* __restrict gy) {
  namespace hn = hwy::HWY_NAMESPACE;
  using D = hn::CappedTag<T, L>;
  const D d;
  constexpr int N = static_cast<int>(hn::MaxLanes(D()));
  constexpr int V = L / N;
  static_assert(V * N == L);
  constexpr int kPrefetch = 8;
  using Vec = hn::Vec<D>;
  // Four lanes in one vector: their per-pixel sums are kept and added up
  // for the whole tile afterwards (a lane sum per pixel costs more than
  // the pixel's taps).
  constexpr bool kBatchSums = L == 4 && N == 4;
  alignas(64) T lane_x[kBatchSums ? kTile * L : 1], lane_y[kBatchSums ? kTile * L : 1];
  for (int i = 0; i < t.count; ++i) {
    // The taps of a pixel kPrefetch ahead, whose lines are likely not in L1
    // (or L2) when the grid jumps about.
    if (i + kPrefetch < t.count) {
      for (int k = 0; k < K; k += (K == 16 ? 4 : 1)) {
        const int64_t q = t.acc[k][i + kPrefetch];
        if constexpr (kDx) hwy::Prefetch(acc + q * L);
        if constexpr (kDgrid) hwy::Prefetch(xin + q * L);
      }
    }
    const T* __restrict g = gt + i * L;
    Vec gv[V], sx[V], sy[V];
    for (int v = 0; v < V; ++v) {
      gv[v] = hn::LoadU(d, g + v * N);
      sx[v] = sy[v] = hn::Zero(d);
    }
    for (int k = 0; k < K; ++k) {
      const int64_t q = t.acc[k][i];
      if constexpr (kDx) {
        T* __restrict a = acc + q * L;
        const Vec w = hn::Set(d, t.w[k][i]);
        for (int v = 0; v < V; ++v) hn::StoreU(hn::MulAdd(w, gv[v], hn::LoadU(d, a + v * N)), d, a + v * N);
      }
      if constexpr (kDgrid) {
        const T* __restrict x = xin + q * L;
        const Vec wx = hn::Set(d, t.dwx[k][i]), wy = hn::Set(d, t.dwy[k][i]);
        for (int v = 0; v < V; ++v) {
          const Vec xv = hn::LoadU(d, x + v * N);
          sx[v] = hn::MulAdd(wx, xv, sx[v]);
          sy[v] = hn::MulAdd(wy, xv, sy[v]);
        }
      }
    }
    if constexpr (kDgrid) {
      // Sum over the lanes: vectors in order, then the target's lane sum
      // (a fixed order for a given target).
      Vec tx = hn::Mul(sx[0], gv[0]), ty = hn::Mul(sy[0], gv[0]);
      for (int v = 1; v < V; ++v) {
        tx = hn::MulAdd(sx[v], gv[v], tx);
        ty = hn::MulAdd(sy[v], gv[v], ty);
      }
      if constexpr (kBatchSums) {
        hn::Store(tx, d, lane_x + i * L);
        hn::Store(ty, d, lane_y + i * L);
      } else {
        gx[i] += hn::GetLane(hn::SumOfLanes(d, tx));
        gy[i] += hn::GetLane(hn::SumOfLanes(d, ty));
      }
    }
  }
  if constexpr (kDgrid && kBatchSums) {
    // The four lanes of many pixels at once: (l0 + l1) + (l2 + l3), the same
    // order in the vector loop and the tail.
    const hn::ScalableTag<T> dw;
    const int nw = static_cast<int>(hn::Lanes(dw));
    auto add_sums = [&](const T* lanes, T* out) {
      int i = 0;
      for (; i + nw <= t.count; i += nw) {
        hn::Vec<decltype(dw)> l0, l1, l2, l3;
        hn::LoadInterleaved4(dw, lanes + i * 4, l0, l1, l2, l3);
        hn::StoreU(hn::Add(hn::LoadU(dw, out + i), hn::Add(hn::Add(l0, l1), hn::Add(l2, l3))), dw, out + i);
      }
      for (; i < t.count; ++i) {
        const T* l = lanes + i * 4;
        out[i] += (l[0] + l[1]) + (l[2] + l[3]);
      }
    };
    add_sums(lane_x, gx);
    add_sums(lane_y, gy);
  }
}

// out[2 * i] = ax[i] * bx[i], out[2 * i + 1] = ay[i] * by[i] for i < count
// (a tile's dgrid; with bx and by null, ax[i] and ay[i] themselves: its
// partial sums), written as pairs with Highway: the scalar loop cost ~8% of
// the batch-1 backward (perf).
// Products are plain multiplies, so every target gives the same bits.
template <class S, class T>
inline void store_pairs(const T* ax, const T* bx, const T* ay, const T* by, int count, S* __restrict out) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<T> d;
  const int n = static_cast<int>(hn::Lanes(d));
  int i = 0;
  if constexpr (std::is_same_v<S, T>) {
    for (; i + n <= count; i += n) {
      const auto x = bx == nullptr ? hn::LoadU(d, ax + i) : hn::Mul(hn::LoadU(d, ax + i), hn::LoadU(d, bx + i));
      const auto y = by == nullptr ? hn::LoadU(d, ay + i) : hn::Mul(hn::LoadU(d, ay + i), hn::LoadU(d, by + i));
      hn::StoreInterleaved2(x, y, d, out + 2 * i);
    }
  }
  for (; i < count; ++i) {
    out[2 * i] = store<S>(bx == nullptr ? ax[i] : ax[i] * bx[i]);
    out[2 * i + 1] = store<S>(by == nullptr ? ay[i] : ay[i] * by[i]);
  }
}

// Calls f(q, y, x) for the pixels q = y * width + x in [q0, q1).
template <class F>
inline void for_each_pixel(int64_t width, int64_t q0, int64_t q1, F&& f) {
  int64_t y = q0 / width, x = q0 % width;
  for (int64_t q = q0; q < q1; ++q) {
    f(q, y, x);
    if (++x == width) {
      x = 0;
      ++y;
    }
  }
}

// Copies pixels [q0, q1) of the input channels [s0, s1) (at most L) of
// image n into xb as [pixel][lane], zero in unused lanes, and (with the
// last pixel) zeroes the dummy slot after the plane.
template <int L, class S, class T>
void copy_values(const Problem& p, const TensorView& input, int64_t n, int64_t s0, int64_t s1,
                 T* __restrict xb, int64_t q0, int64_t q1) {
  const int64_t plane = p.in_h * p.in_w;
  const Shape4& is = input.strides;
  const S* ib = static_cast<const S*>(input.data) + n * is[0] + s0 * is[1];
  if (q1 == plane) std::fill_n(xb + plane * L, L, T(0));
  if (is[3] == 1 && is[2] == p.in_w) {  // dense planes
    interleave_rows<L>(ib + q0, is[1], static_cast<int>(s1 - s0), q1 - q0, xb + q0 * L);
  } else if (is[1] == 1) {  // channels contiguous (channels-last)
    for_each_pixel(p.in_w, q0, q1, [&](int64_t q, int64_t y, int64_t x) {
      const S* __restrict px = ib + y * is[2] + x * is[3];
      T* __restrict dst = xb + q * L;
      for (int j = 0; j < L; ++j) dst[j] = j < s1 - s0 ? load(px[j]) : T(0);
    });
  } else {
    std::fill_n(xb + q0 * L, (q1 - q0) * L, T(0));
    for (int64_t c = s0; c < s1; ++c) {
      const S* ip = ib + (c - s0) * is[1];
      for_each_pixel(p.in_w, q0, q1, [&](int64_t q, int64_t y, int64_t x) {
        xb[q * L + (c - s0)] = load(ip[y * is[2] + x * is[3]]);
      });
    }
  }
}

// Interleaved forward: a task is (n, block of L channels, range of output
// pixels); it copies the block's input channels into [pixel][lane] order
// (so every tap is one contiguous run of L values), builds each tile's
// stencils with the vector builders and writes out[pixel][lane] through a
// tile buffer. Each output value is a function of its pixel alone, so
// splitting the pixels by the thread count changes no bits.
template <class S, Interpolation M, Padding P, bool kAlign, int L>
void forward_lanes(const Problem& p, int threads, const TensorView& input, const TensorView& grid,
                   const MutableTensorView& output, compute_t<S>* buffers) {
  namespace hn = hwy::HWY_NAMESPACE;
  using T = compute_t<S>;
  constexpr int K = kTaps<M>;
  using D = hn::CappedTag<T, L>;
  const D d;
  constexpr int N = static_cast<int>(hn::MaxLanes(D()));
  constexpr int V = L / N;
  static_assert(V * N == L);
  const int64_t pixels = p.out_h * p.out_w;
  const int64_t plane = p.in_h * p.in_w;
  const int64_t blocks = (p.c + L - 1) / L;
  // Enough pixel ranges to feed the threads, none much smaller than the
  // plane it copies.
  const int64_t want = (2 * static_cast<int64_t>(threads) + p.n * blocks - 1) / (p.n * blocks);
  const int64_t ranges = std::clamp<int64_t>(std::min(want, pixels / std::max<int64_t>(plane / 2, kTile)), 1, pixels);
  const int64_t range = ((pixels + ranges - 1) / ranges + kTile - 1) / kTile * kTile;
  S* out = static_cast<S*>(output.data);
  const Shape4& os = output.strides;
#pragma omp parallel num_threads(threads)
  {
    auto tile = std::make_unique<Tile<T, K>>();
    T* values = buffers + static_cast<int64_t>(omp_get_thread_num()) * (plane + 1) * L;
    int64_t loaded = -1;  // the (n, block) whose values are in `values`
    alignas(64) T ot[kTile * L];
#pragma omp for schedule(static)
    for (int64_t task = 0; task < p.n * blocks * ranges; ++task) {
      const int64_t n = task / (blocks * ranges);
      const int64_t s0 = (task / ranges) % blocks * L, s1 = std::min(p.c, s0 + L);
      const int rows = static_cast<int>(s1 - s0);
      const int64_t p_begin = task % ranges * range, p_end = std::min(pixels, p_begin + range);
      if (p_begin >= p_end) continue;
      if (loaded != task / ranges) copy_values<L, S>(p, input, n, s0, s1, values, 0, plane);
      loaded = task / ranges;
      const T* xb = values;
      S* ob = out + n * os[0] + s0 * os[1];
      for (int64_t p0 = p_begin; p0 < p_end; p0 += kTile) {
        fill_tile<M, P, kAlign, false, S>(p, grid, os, n, p0, std::min<int64_t>(kTile, p_end - p0), tile.get(),
                                          input.strides);
        const Tile<T, K>& t = *tile;
        for (int i = 0; i < t.count; ++i) {
          hn::Vec<D> acc[V];
          for (int v = 0; v < V; ++v) acc[v] = hn::Zero(d);
          for (int k = 0; k < K; ++k) {
            const T* __restrict x = xb + t.acc[k][i] * L;
            const auto w = hn::Set(d, t.w[k][i]);
            for (int v = 0; v < V; ++v) acc[v] = hn::MulAdd(w, hn::LoadU(d, x + v * N), acc[v]);
          }
          for (int v = 0; v < V; ++v) hn::Store(acc[v], d, ot + i * L + v * N);
        }
        if (os[3] == 1 && os[2] == p.out_w) {  // dense planes: a run of pixels
          deinterleave_rows<L>(ot, rows, t.count, ob + p0, os[1]);
        } else if (os[1] == 1) {  // channels contiguous (channels-last)
          for (int i = 0; i < t.count; ++i) {
            for (int j = 0; j < rows; ++j) ob[t.out_off[i] + j] = store<S>(ot[i * L + j]);
          }
        } else {
          for (int j = 0; j < rows; ++j) {
            for (int i = 0; i < t.count; ++i) ob[j * os[1] + t.out_off[i]] = store<S>(ot[i * L + j]);
          }
        }
      }
    }
  }
}

template <class S, Interpolation M, Padding P, bool kAlign, bool kInterleaved, int L>
void backward_impl(const BackwardPlan& plan, const TensorView& grad, const TensorView& input,
                   const TensorView& grid, const MutableTensorView& dx, const MutableTensorView& dgrid,
                   void* workspace) {
  using T = compute_t<S>;
  constexpr int K = kTaps<M>;
  constexpr bool kHasDgrid = M != Interpolation::kNearest;  // nearest: dgrid is 0
  const Problem& p = plan.problem;
  const bool want_dx = p.mask.input;
  const bool want_dgrid = p.mask.grid;
  const bool need_values = want_dgrid && kHasDgrid;
  const int64_t pixels = p.out_h * p.out_w;
  const int64_t plane = p.in_h * p.in_w;
  const int64_t slot = plane + 1;  // a plane and its dummy slot
  const int64_t cb_size = plan.channel_block, blocks = plan.channel_blocks;
  const int64_t chunks = plan.pixel_chunks, chunk = plan.chunk_pixels;
  const int64_t acc_elems = plan.accumulator_elems;  // one task's accumulators
  const S* go = static_cast<const S*>(grad.data);
  const S* in = static_cast<const S*>(input.data);
  S* dxp = static_cast<S*>(dx.data);
  S* dgp = static_cast<S*>(dgrid.data);
  const Shape4 &gs = grad.strides, &is = input.strides, &ds = dx.strides, &dgs = dgrid.strides;
  auto* ws = static_cast<unsigned char*>(workspace);
  T* dx_partials = reinterpret_cast<T*>(ws + plan.dx_partials);
  T* dg_partials = reinterpret_cast<T*>(ws + plan.dgrid_partials);
  T* scratch = reinterpret_cast<T*>(ws + plan.scratch);

  // Interleaved, a task's channels [c0, c1) are sub-blocks of L
  // channels, each with its own [pixel][lane] buffers of `sub` values (so
  // one tile's stencils serve every sub-block); planar, one plane each.
  const int64_t sub = slot * L;
  auto sub_blocks = [&](int64_t c0, int64_t c1) { return (c1 - c0 + L - 1) / L; };

  auto for_pixels = [&](int64_t q0, int64_t q1, auto&& f) { for_each_pixel(p.in_w, q0, q1, f); };
  // Writes pixels [q0, q1) of the accumulators of channels [c0, c1) of
  // image n to dx (`step` apart: 1 for planes, L for one lane of a block).
  auto store_dx_planes = [&](int64_t n, int64_t c0, int64_t c1, const T* a, int64_t step, int64_t q0,
                             int64_t q1) {
    for (int64_t c = c0; c < c1; ++c) {
      S* d = dxp + n * ds[0] + c * ds[1];
      const T* __restrict src = a + (c - c0) * (step == 1 ? slot : 1);
      if (ds[3] == 1 && ds[2] == p.in_w) {  // a dense plane: one flat loop
        for (int64_t q = q0; q < q1; ++q) d[q] = store<S>(src[q * step]);
      } else {
        for_pixels(q0, q1, [&](int64_t q, int64_t y, int64_t x) { d[y * ds[2] + x * ds[3]] = store<S>(src[q * step]); });
      }
    }
  };
  auto store_dx = [&](int64_t n, int64_t c0, int64_t c1, const T* a, int64_t q0, int64_t q1) {
    if constexpr (!kInterleaved) {
      store_dx_planes(n, c0, c1, a, 1, q0, q1);
    } else {
      for (int64_t b = 0; b < sub_blocks(c0, c1); ++b) {
        const int64_t s0 = c0 + b * L, s1 = std::min(c1, s0 + L);
        const T* ab = a + b * sub;
        S* d = dxp + n * ds[0] + s0 * ds[1];
        if (ds[3] == 1 && ds[2] == p.in_w) {  // dense planes
          deinterleave_rows<L>(ab + q0 * L, static_cast<int>(s1 - s0), q1 - q0, d + q0, ds[1]);
        } else if (ds[1] == 1) {  // channels contiguous (channels-last)
          for_pixels(q0, q1, [&](int64_t q, int64_t y, int64_t x) {
            S* __restrict px = d + y * ds[2] + x * ds[3];
            const T* __restrict src = ab + q * L;
            for (int64_t j = 0; j < s1 - s0; ++j) px[j] = store<S>(src[j]);
          });
        } else {
          store_dx_planes(n, s0, s1, ab, L, q0, q1);
        }
      }
    }
  };
  auto load_values = [&](int64_t n, int64_t s0, int64_t s1, T* __restrict xb, int64_t q0, int64_t q1) {
    copy_values<L, S>(p, input, n, s0, s1, xb, q0, q1);
  };
  // Copies grad channels [s0, s1) of a tile's pixels into gt as [pixel][lane],
  // zero in unused lanes.
  auto load_grad = [&](int64_t n, int64_t s0, int64_t s1, const Tile<T, K>& t, int64_t p0, T* __restrict gt) {
    const S* gb = go + n * gs[0] + s0 * gs[1];
    if (gs[3] == 1 && gs[2] == p.out_w) {  // dense planes: a run of pixels
      interleave_rows<L>(gb + p0, gs[1], static_cast<int>(s1 - s0), t.count, gt);
      return;
    }
    std::fill_n(gt, kTile * L, T(0));
    if (gs[1] == 1) {  // channels contiguous (channels-last)
      for (int i = 0; i < t.count; ++i) {
        for (int64_t j = 0; j < s1 - s0; ++j) gt[i * L + j] = load(gb[t.out_off[i] + j]);
      }
    } else {
      for (int64_t c = s0; c < s1; ++c) {
        const S* gp = gb + (c - s0) * gs[1];
        for (int i = 0; i < t.count; ++i) gt[i * L + (c - s0)] = load(gp[t.out_off[i]]);
      }
    }
  };

  // When an (n, block)'s pixels are split into chunks, its input values are
  // copied once (by `chunks` tasks, a range of pixels each) into the
  // workspace and shared by the chunks; the chunks' dx partials are summed
  // and written out by ranges of pixels too.
  const bool shared_values = kInterleaved && need_values && chunks > 1;
  T* values = reinterpret_cast<T*>(ws + plan.values);
  const int64_t span = ((plane + chunks - 1) / chunks + kLanes - 1) / kLanes * kLanes;

#pragma omp parallel num_threads(plan.threads)
  {
    auto tile = std::make_unique<Tile<T, K>>();
    T gx[kTile], gy[kTile];
    // This thread's scratch: accumulators (when tasks own whole planes) and,
    // interleaved, the block's input values (unless shared) and a grad tile.
    T* my_scratch = scratch + static_cast<int64_t>(omp_get_thread_num()) * plan.scratch_elems;
    // (The planner sizes it alike: see plan_backward.)
    T* my_acc = my_scratch;
    T* xin = kInterleaved ? my_scratch + (want_dx && chunks == 1 ? acc_elems : 0) : nullptr;
    T* gt = kInterleaved ? xin + (need_values && !shared_values ? acc_elems : 0) : nullptr;

    if (shared_values) {
#pragma omp for schedule(static)
      for (int64_t task = 0; task < p.n * blocks * chunks; ++task) {
        const int64_t nb = task / chunks, n = nb / blocks;
        const int64_t c0 = (nb % blocks) * cb_size, c1 = std::min(p.c, c0 + cb_size);
        const int64_t q0 = (task % chunks) * span, q1 = std::min(plane, q0 + span);
        if (q0 >= q1) continue;
        for (int64_t b = 0; b < sub_blocks(c0, c1); ++b) {
          load_values(n, c0 + b * L, std::min(c1, c0 + (b + 1) * L), values + nb * acc_elems + b * sub, q0, q1);
        }
      }
    }

#pragma omp for schedule(static)
    for (int64_t task = 0; task < p.n * blocks * chunks; ++task) {
      const int64_t n = task / (blocks * chunks);
      const int64_t block = (task / chunks) % blocks;
      const int64_t part = task % chunks;
      const int64_t c0 = block * cb_size, c1 = std::min(p.c, c0 + cb_size);
      const int64_t p_begin = part * chunk, p_end = std::min(pixels, p_begin + chunk);
      T* acc = !want_dx       ? nullptr  // (no workspace may have been given)
               : chunks == 1 ? my_acc
                             : dx_partials + ((n * blocks + block) * chunks + part) * acc_elems;
      if (want_dx) std::fill_n(acc, acc_elems, T(0));
      const T* block_values = shared_values ? values + (n * blocks + block) * acc_elems : xin;
      if constexpr (kInterleaved) {
        if (need_values && !shared_values) {
          for (int64_t b = 0; b < sub_blocks(c0, c1); ++b) {
            load_values(n, c0 + b * L, std::min(c1, c0 + (b + 1) * L), xin + b * sub, 0, plane);
          }
        }
      }
      for (int64_t p0 = p_begin; p0 < p_end; p0 += kTile) {
        fill_tile<M, P, kAlign, !kInterleaved, S>(p, grid, gs, n, p0, std::min<int64_t>(kTile, p_end - p0),
                                                  tile.get(), is);
        const Tile<T, K>& t = *tile;
        std::fill_n(gx, kTile, T(0));
        std::fill_n(gy, kTile, T(0));
        if constexpr (kInterleaved) {
          // Sub-blocks in order: a fixed order of the dgrid sums.
          for (int64_t b = 0; b < sub_blocks(c0, c1); ++b) {
            load_grad(n, c0 + b * L, std::min(c1, c0 + (b + 1) * L), t, p0, gt);
            T* ab = want_dx ? acc + b * sub : nullptr;
            const T* xb = block_values + b * sub;
            if (want_dx && need_values) {
              backward_lanes<L, S, T, K, true, true>(t, gt, xb, ab, gx, gy);
            } else if (want_dx) {
              backward_lanes<L, S, T, K, true, false>(t, gt, xb, ab, gx, gy);
            } else if (need_values) {
              backward_lanes<L, S, T, K, false, true>(t, gt, xb, ab, gx, gy);
            }
          }
        } else {
          for (int64_t c = c0; c < c1; ++c) {
            const S* gp = go + n * gs[0] + c * gs[1];
            const S* ip = in + n * is[0] + c * is[1];
            T* a = want_dx ? acc + (c - c0) * slot : nullptr;
            if (want_dx && need_values) {
              backward_channel<S, T, K, true, true>(t, gp, ip, a, gx, gy);
            } else if (want_dx) {
              backward_channel<S, T, K, true, false>(t, gp, ip, a, gx, gy);
            } else if (need_values) {
              backward_channel<S, T, K, false, true>(t, gp, ip, a, gx, gy);
            }
          }
        }
        if (want_dgrid && blocks == 1 && dense_pairs(dgs, p.out_w)) {
          store_pairs<S>(t.mult_x, gx, t.mult_y, gy, t.count, dgp + n * dgs[0] + 2 * p0);
        } else if (want_dgrid && blocks == 1) {
          int64_t h = p0 / p.out_w, w = p0 % p.out_w;
          for (int i = 0; i < t.count; ++i) {
            S* d = dgp + n * dgs[0] + h * dgs[1] + w * dgs[2];
            d[0] = store<S>(t.mult_x[i] * gx[i]);
            d[dgs[3]] = store<S>(t.mult_y[i] * gy[i]);
            if (++w == p.out_w) {
              w = 0;
              ++h;
            }
          }
        } else if (want_dgrid) {
          // Partial sums, and (from block 0) the multipliers, per pixel.
          T* part_sum = dg_partials + ((n * (blocks + 1) + block + 1) * pixels + p0) * 2;
          T* mult = dg_partials + (n * (blocks + 1) * pixels + p0) * 2;
          store_pairs<T, T>(gx, nullptr, gy, nullptr, t.count, part_sum);
          if (block == 0) store_pairs<T, T>(t.mult_x, nullptr, t.mult_y, nullptr, t.count, mult);
        }
      }
      if (want_dx && chunks == 1) store_dx(n, c0, c1, acc, 0, plane);
    }

    // Fixed-order sums of what spans tasks (the barrier of `omp for` above
    // has made every partial visible).
    if (want_dx && chunks > 1) {
#pragma omp for schedule(static)
      for (int64_t task = 0; task < p.n * blocks * chunks; ++task) {
        const int64_t nb = task / chunks;
        const int64_t q0 = (task % chunks) * span, q1 = std::min(plane, q0 + span);
        if (q0 >= q1) continue;
        // Chunk 0's accumulators take the sum, chunk by chunk in order.
        T* first = dx_partials + nb * chunks * acc_elems;
        const int64_t rows = kInterleaved ? acc_elems / sub : acc_elems / slot;
        const int64_t row_elems = kInterleaved ? sub : slot;
        for (int64_t r = 0; r < rows; ++r) {
          T* __restrict sum = first + r * row_elems + q0 * L;
          for (int64_t part = 1; part < chunks; ++part) {
            const T* __restrict a = first + part * acc_elems + r * row_elems + q0 * L;
            for (int64_t e = 0; e < (q1 - q0) * L; ++e) sum[e] += a[e];
          }
        }
        const int64_t c0 = (nb % blocks) * cb_size;
        store_dx(nb / blocks, c0, std::min(p.c, c0 + cb_size), first, q0, q1);
      }
    }
    if (want_dgrid && blocks > 1) {
      // Over (image, output row), so the pixel's place needs no division.
#pragma omp for schedule(static)
      for (int64_t nh = 0; nh < p.n * p.out_h; ++nh) {
        const int64_t n = nh / p.out_h, h = nh % p.out_h;
        const T* base = dg_partials + n * (blocks + 1) * pixels * 2;
        S* row = dgp + n * dgs[0] + h * dgs[1];
        for (int64_t w = 0, q = h * p.out_w; w < p.out_w; ++w, ++q) {
          T sx = 0, sy = 0;
          for (int64_t block = 0; block < blocks; ++block) {
            sx += base[((block + 1) * pixels + q) * 2];
            sy += base[((block + 1) * pixels + q) * 2 + 1];
          }
          S* d = row + w * dgs[2];
          d[0] = store<S>(base[q * 2] * sx);
          d[dgs[3]] = store<S>(base[q * 2 + 1] * sy);
        }
      }
    }
  }
}

// Interleaved for 2 channels or more when a block's copy of the input
// stays reasonable (as the backward decides), planar otherwise.
template <class S, Interpolation M, Padding P, bool kAlign>
void forward(const Problem& p, int threads, const TensorView& input, const TensorView& grid,
             const MutableTensorView& output) {
  // One channel-minor copy of a block's plane per thread (at most 64 MiB,
  // 256 MiB for all threads), in the calling thread's cached buffer;
  // without it (too large, or no memory), the planar path, which needs none.
  constexpr uint64_t kMaxCopyBytes = uint64_t{64} << 20, kMaxBuffersBytes = uint64_t{256} << 20;
  using T = compute_t<S>;
  const auto slot = static_cast<uint64_t>(p.in_h * p.in_w) + 1;
  const int lanes = p.c >= kLanes / 2 ? kLanes : kNarrowLanes;
  T* buffers = nullptr;
  if (p.c >= 2 && slot <= kMaxCopyBytes / (lanes * sizeof(T)) &&
      static_cast<uint64_t>(threads) <= kMaxBuffersBytes / (slot * lanes * sizeof(T))) {
    buffers = static_cast<T*>(detail::cached_buffer(threads * slot * lanes * sizeof(T)));
  }
  if (buffers != nullptr && lanes == kLanes) {
    forward_lanes<S, M, P, kAlign, kLanes>(p, threads, input, grid, output, buffers);
  } else if (buffers != nullptr) {
    forward_lanes<S, M, P, kAlign, kNarrowLanes>(p, threads, input, grid, output, buffers);
  } else {
    forward_planar<S, M, P, kAlign>(p, threads, input, grid, output);
  }
}

template <class S, Interpolation M, Padding P, bool kAlign>
void backward(const BackwardPlan& plan, const TensorView& grad, const TensorView& input,
              const TensorView& grid, const MutableTensorView& dx, const MutableTensorView& dgrid,
              void* workspace) {
  if (plan.lanes == kLanes) {
    backward_impl<S, M, P, kAlign, true, kLanes>(plan, grad, input, grid, dx, dgrid, workspace);
  } else if (plan.lanes == kNarrowLanes) {
    backward_impl<S, M, P, kAlign, true, kNarrowLanes>(plan, grad, input, grid, dx, dgrid, workspace);
  } else {
    backward_impl<S, M, P, kAlign, false, 1>(plan, grad, input, grid, dx, dgrid, workspace);
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// The dispatch table of one dtype: every (mode, padding, align_corners),
// indexed as (mode * 3 + padding) * 2 + align (see kernels.cpp).

template <int I>
struct Modes {
  static constexpr bool kAlign = I % 2 == 1;
  static constexpr Padding kPad = static_cast<Padding>((I / 2) % 3);
  static constexpr Interpolation kMode = static_cast<Interpolation>(I / 6);
};

template <class S, int... I>
void fill_table(KernelTable* table, std::integer_sequence<int, I...>) {
  ((table->forward[I] = &forward<S, Modes<I>::kMode, Modes<I>::kPad, Modes<I>::kAlign>), ...);
  ((table->backward[I] = &backward<S, Modes<I>::kMode, Modes<I>::kPad, Modes<I>::kAlign>), ...);
}

template <class S>
void fill_table(KernelTable* table) {
  fill_table<S>(table, std::make_integer_sequence<int, KernelTable::kEntries>{});
}

}  // namespace HWY_NAMESPACE
}  // namespace gridsampler::cpu
HWY_AFTER_NAMESPACE();

#endif  // GRIDSAMPLER_CPU_KERNELS_INL_H_
