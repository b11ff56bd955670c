// Stencil builders: a tile of output pixels -> its taps (tile.hpp). The
// only kernel code specialised on padding and align_corners; compiled per
// SIMD target and dtype, and exported as a table of builder functions
// (fill_builders) that drivers call once per tile.
//
// Bilinear and nearest pad each pixel's coordinates with the scalar policy
// (core/coords.hpp), then form taps with vector code; bicubic forms its taps
// with vector code throughout (padding per tap in int32). Where the vector
// shortcuts are not exact (huge images, non-finite or huge coordinates,
// reflected taps that need more than two folds) the scalar stencil
// (stencil.hpp) makes the pixel's taps, so every target gives the scalar
// policy's result. The strided form (planar kernels) is made by the scalar
// stencil alone.

// Target-independent includes (normal include guards).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/coords.hpp"
#include "core/dtype.hpp"
#include "cpu/dispatch.hpp"
#include "cpu/stencil.hpp"
#include "cpu/tile.hpp"

// Per-target part: re-included once for every target.
#if defined(GRIDSAMPLER_CPU_BUILDERS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GRIDSAMPLER_CPU_BUILDERS_INL_H_
#undef GRIDSAMPLER_CPU_BUILDERS_INL_H_
#else
#define GRIDSAMPLER_CPU_BUILDERS_INL_H_
#endif

#include "cpu/layout-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace gridsampler::cpu {
namespace HWY_NAMESPACE {
namespace {


// Stores one pixel's stencil into the tile; in the flat form only what the
// interleaved kernels read (flat indices and weights).
template <bool kStrided, class T, int K>
inline void put_stencil(const Stencil<T, K>& s, int64_t i, int64_t plane, int64_t in_w,
                        const Shape4& in_strides, Tile<T, K>* t) {
  for (int k = 0; k < K; ++k) {
    const bool ok = s.valid[k];
    if constexpr (kStrided) {
      t->valid[k][i] = ok;
      t->in_off[k][i] = ok ? s.y[k] * in_strides[2] + s.x[k] * in_strides[3] : 0;
    }
    t->acc[k][i] = ok ? s.y[k] * in_w + s.x[k] : plane;
    if constexpr (!kStrided && std::is_same_v<T, float>) t->acc32[k][i] = static_cast<int32_t>(t->acc[k][i]);
    t->w[k][i] = ok ? s.w[k] : T(0);
    t->dw[0][k][i] = ok ? s.dw_dx[k] : T(0);
    t->dw[1][k][i] = ok ? s.dw_dy[k] : T(0);
  }
}

// Grid values -> padded source coordinates and their multipliers, as
// coords::source_index, for one vector of pixels along one axis of `size`
// pixels. Every step is the scalar policy's operation on the same values, so
// the results are its bits. Reflection folds with an exact fmod: k =
// floor(d / span) rounded like the policy's flip count, d - k * span exact
// (k * span is an integer multiple of 1/2 below 2^22), then at most one
// correction by a span. Lanes it cannot do that way (not finite, or folded
// coordinates of 2^21 and beyond) are left out of *fast, and the caller
// takes the scalar policy for them; when `vector_ok` is false (reflection
// on an empty span, a 1-pixel axis with align_corners, or a huge axis,
// where the fold would divide by zero or lose exactness) every lane must.
// With kMult false the multipliers are not made (*mult is left alone): a
// forward has no use for them.
template <Padding P, bool kAlign, class D>
struct SourceIndexLanes {
  using T = hwy::HWY_NAMESPACE::TFromD<D>;
  using V = hwy::HWY_NAMESPACE::Vec<D>;
  using M = hwy::HWY_NAMESPACE::Mask<D>;
  D d;
  int64_t size = 0;
  V zero, one, half, last, slope, low, span, limit;
  bool vector_ok = true;

  SourceIndexLanes() = default;
  SourceIndexLanes(D tag, int64_t axis) : d(tag), size(axis) {
    namespace hn = hwy::HWY_NAMESPACE;
    zero = hn::Zero(d);
    one = hn::Set(d, T(1));
    half = hn::Set(d, T(0.5));
    last = hn::Set(d, static_cast<T>(size - 1));
    slope = hn::Set(d, coords::unnormalize_slope<T>(size, kAlign));
    // Reflection about twice_low / 2 and twice_high / 2 (coords::reflect).
    const int64_t twice_low = kAlign ? 0 : -1, twice_high = kAlign ? 2 * (size - 1) : 2 * size - 1;
    low = hn::Set(d, static_cast<T>(twice_low) / 2);
    span = hn::Set(d, static_cast<T>(twice_high - twice_low) / 2);
    limit = hn::Set(d, T(1 << 21));
    if (P == Padding::kReflection) vector_ok = twice_low != twice_high && size < (int64_t{1} << 20);
  }

  // coords::clip: [0, size - 1], slope 1 strictly inside; NaN -> 0.
  V clip(V in, V* clip_slope) const {
    namespace hn = hwy::HWY_NAMESPACE;
    const auto positive = hn::Gt(in, zero), high = hn::Ge(in, last);
    *clip_slope = hn::IfThenElseZero(hn::AndNot(high, positive), one);
    return hn::IfThenElseZero(positive, hn::IfThenElse(high, last, in));
  }

  template <bool kMult = true>
  V operator()(V c, V* mult, M* fast) const {
    namespace hn = hwy::HWY_NAMESPACE;
    const V in = kAlign ? hn::Mul(hn::Mul(hn::Add(c, one), half), last)
                        : hn::Mul(hn::Sub(hn::Mul(hn::Add(c, one), hn::Set(d, static_cast<T>(size))), one), half);
    if constexpr (P == Padding::kZeros) {
      if constexpr (kMult) *mult = slope;
      *fast = hn::FirstN(d, hn::Lanes(d));
      return in;
    } else if constexpr (P == Padding::kBorder) {
      V clip_slope;
      const V out = clip(in, &clip_slope);
      if constexpr (kMult) *mult = hn::Mul(slope, clip_slope);
      *fast = hn::FirstN(d, hn::Lanes(d));
      return out;
    } else {
      const V signed_dist = hn::Sub(in, low);
      // |d|: the policy negates negative distances; -0 becoming +0 here
      // changes no result (the folded coordinate is then 0 + low either way).
      V dist = hn::Abs(signed_dist);
      // Inside one span (most coordinates) no fold is needed: the flip count
      // floor(dist / span) is then 0, since a quotient of two values of T
      // below 1 rounds to at most 1 - 2^-digits, never up to 1. So the full
      // path below would give these same bits with extra = dist, even parity.
      if (hn::AllTrue(d, hn::Lt(dist, span))) {
        *fast = hn::FirstN(d, hn::Lanes(d));
        V clip_slope;
        const V out = clip(hn::Add(dist, low), &clip_slope);
        if constexpr (kMult) *mult = hn::Mul(slope, hn::Mul(sign_of(signed_dist), clip_slope));
        return out;
      }
      // Not (dist < limit): NaN and infinities included.
      *fast = hn::Lt(dist, limit);
      dist = hn::IfThenElseZero(*fast, dist);
      // With k = floor(q'), q' the rounded quotient: d / span >= k + 1 would
      // round to at least k + 1, so d - k * span < span; and q' exceeds the
      // exact quotient by less than 1, so d - k * span > -span, and one
      // correction gives fmod's [0, span). Below one span k is 0 and the
      // remainder d itself, as the policy takes it.
      const V flips = hn::Floor(hn::Div(dist, span));
      V extra = hn::Sub(dist, hn::Mul(flips, span));
      extra = hn::IfThenElse(hn::Lt(extra, zero), hn::Add(extra, span), extra);
      // Parity of the flip count (an integer below 2^22).
      const hn::RebindToSigned<D> di;
      const auto odd_i = hn::And(hn::ConvertTo(di, flips), hn::Set(di, 1));
      const auto odd = hn::RebindMask(d, hn::Eq(odd_i, hn::Set(di, 1)));
      const V folded = hn::Add(hn::IfThenElse(odd, hn::Sub(span, extra), extra), low);
      V clip_slope;
      const V out = clip(folded, &clip_slope);
      if constexpr (kMult) {
        const V sign = sign_of(signed_dist);
        const V fold_slope = hn::IfThenElse(odd, hn::Neg(sign), sign);
        *mult = hn::Mul(slope, hn::Mul(fold_slope, clip_slope));
      }
      return out;
    }
  }

  // -1 where the distance from the low end is negative, else +1 (the
  // policy's reflection slope before any flip).
  V sign_of(V signed_dist) const {
    namespace hn = hwy::HWY_NAMESPACE;
    return hn::IfThenElse(hn::Lt(signed_dist, zero), hn::Set(d, T(-1)), one);
  }
};

// The same over a tile's pixels (g and out hold kTile values; lanes past
// `count` are computed and ignored), with the scalar policy where the
// vector form cannot be exact; the multipliers too when kMult.
template <Padding P, bool kAlign, bool kMult, class T>
inline void source_index_lanes(const T* g, int count, int64_t size, T* out, T* mult) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<T> d;
  const int n = static_cast<int>(hn::Lanes(d));
  const SourceIndexLanes<P, kAlign, hn::ScalableTag<T>> axis(d, size);
  auto scalar_lanes = [&](int from, int to) {
    for (int l = from; l < to; ++l) {
      T m;
      out[l] = coords::source_index<P>(g[l], size, kAlign, &m);
      if constexpr (kMult) mult[l] = m;
    }
  };
  for (int i = 0; i < count; i += n) {
    if (!axis.vector_ok) {
      scalar_lanes(i, i + n);
      continue;
    }
    hn::Mask<hn::ScalableTag<T>> fast;
    hn::Vec<hn::ScalableTag<T>> m;
    hn::StoreU(axis.template operator()<kMult>(hn::LoadU(d, g + i), &m, &fast), d, out + i);
    if constexpr (kMult) hn::StoreU(m, d, mult + i);
    if (!hn::AllTrue(d, fast)) scalar_lanes(i, std::min(count, i + n));
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

// Copies the int32 indices of K taps into the tile's int64 rows (float).
template <class T, int K, int G>
inline void widen_indices(int count, Tile<T, K, G>* t) {
  if constexpr (std::is_same_v<T, float>) {
    for (int k = 0; k < K; ++k) {
      for (int i = 0; i < count; ++i) t->acc[k][i] = t->acc32[k][i];
    }
  }
}

// One vector of pixels' bilinear (K = 4, G = 2) or trilinear (K = 8, G = 3)
// taps: tap k = c * 4 + b * 2 + a reads flat index base + a + b * Win +
// c * Hin * Win (linear_tap_index) where valid[k]; weights and their
// derivatives by coordinate unmasked (the caller zeroes invalid taps).
// Images: base = row * Win + col, the first tap's row and column, kept as
// integral floating-point values (volumes leave them 0).
template <class DF, int K, int G>
struct LinearLanes {
  using VF = hwy::HWY_NAMESPACE::Vec<DF>;
  using VI = hwy::HWY_NAMESPACE::Vec<hwy::HWY_NAMESPACE::RebindToSigned<DF>>;
  static constexpr int kTaps = K;
  VI base;
  VF row, col;
  hwy::HWY_NAMESPACE::Mask<DF> valid[K];
  VF w[K], dw[G][K];
};

template <class DF, class VF = hwy::HWY_NAMESPACE::Vec<DF>>
HWY_INLINE LinearLanes<DF, 4, 2> bilinear_lanes(DF df, VF x, VF y, int64_t in_h, int64_t in_w) {
  namespace hn = hwy::HWY_NAMESPACE;
  using T = hn::TFromD<DF>;
  const hn::RebindToSigned<DF> di;
  const auto zero = hn::Zero(df), one = hn::Set(df, T(1)), minus_one = hn::Set(df, T(-1));
  const auto x_last = hn::Set(df, static_cast<T>(in_w - 1));
  const auto x_before_last = hn::Set(df, static_cast<T>(in_w - 2));
  const auto y_last = hn::Set(df, static_cast<T>(in_h - 1));
  const auto y_before_last = hn::Set(df, static_cast<T>(in_h - 2));
  const auto fx = hn::Floor(x), fy = hn::Floor(y);
  const auto west = x - fx, east = one - west;  // as bilinear_taps
  const auto north = y - fy, south = one - north;
  const auto x0 = hn::And(fx >= zero, fx <= x_last), x1 = hn::And(fx >= minus_one, fx <= x_before_last);
  const auto y0 = hn::And(fy >= zero, fy <= y_last), y1 = hn::And(fy >= minus_one, fy <= y_before_last);
  LinearLanes<DF, 4, 2> b;
  // Integral values in [-1, size - 1] where a tap may be valid, 0 elsewhere.
  b.row = hn::IfThenElseZero(hn::Or(y0, y1), fy);
  b.col = hn::IfThenElseZero(hn::Or(x0, x1), fx);
  b.base = tap_index<T>(di, b.row, b.col, in_w);
  b.valid[0] = hn::And(y0, x0);
  b.valid[1] = hn::And(y0, x1);
  b.valid[2] = hn::And(y1, x0);
  b.valid[3] = hn::And(y1, x1);
  b.w[0] = south * east;
  b.w[1] = south * west;
  b.w[2] = north * east;
  b.w[3] = north * west;
  b.dw[0][0] = hn::Neg(south);
  b.dw[0][1] = south;
  b.dw[0][2] = hn::Neg(north);
  b.dw[0][3] = north;
  b.dw[1][0] = hn::Neg(east);
  b.dw[1][1] = hn::Neg(west);
  b.dw[1][2] = east;
  b.dw[1][3] = west;
  return b;
}

// The flat index of tap k of a LinearLanes' base (integers: exact in any
// order).
template <class DI, class VI = hwy::HWY_NAMESPACE::Vec<DI>>
inline VI linear_tap_index(DI di, VI base, int k, int64_t in_w, int64_t in_hw = 0) {
  namespace hn = hwy::HWY_NAMESPACE;
  using TI = hn::TFromD<DI>;
  const int64_t step = (k & 1) + ((k >> 1) & 1) * in_w + (k >> 2) * in_hw;
  return step == 0 ? base : hn::Add(base, hn::Set(di, static_cast<TI>(step)));
}

template <class T>
inline void bilinear_taps_lanes(const T* ix, const T* iy, int count, int64_t in_h, int64_t in_w,
                                bool derivatives, bool wide, Tile<T, 4>* t) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<T> df;
  const hn::RebindToSigned<decltype(df)> di;
  using TI = hn::TFromD<decltype(di)>;
  const int n = static_cast<int>(hn::Lanes(df));
  const auto dummy = hn::Set(di, static_cast<TI>(in_h * in_w));
  TI* out[4];
  for (int k = 0; k < 4; ++k) out[k] = gather_indices(t, k);
  for (int i = 0; i < count; i += n) {
    const auto b = bilinear_lanes(df, hn::LoadU(df, ix + i), hn::LoadU(df, iy + i), in_h, in_w);
    for (int k = 0; k < 4; ++k) {
      const auto valid = b.valid[k];
      hn::StoreU(hn::IfThenElse(hn::RebindMask(di, valid), linear_tap_index(di, b.base, k, in_w), dummy), di,
                 out[k] + i);
      hn::StoreU(hn::IfThenElseZero(valid, b.w[k]), df, t->w[k] + i);
      if (!derivatives) continue;
      hn::StoreU(hn::IfThenElseZero(valid, b.dw[0][k]), df, t->dw[0][k] + i);
      hn::StoreU(hn::IfThenElseZero(valid, b.dw[1][k]), df, t->dw[1][k] + i);
    }
  }
  if (wide) widen_indices(count, t);
}

// The nearest tap of a vector of padded coordinates x[G] (x, y[, z]) in an
// image (volume) of size[] = {Win, Hin, Din} pixels: rounded half to even
// like nearbyint, valid inside, and its flat index (y * Win + x, or
// (z * Hin + y) * Win + x), 0 where invalid. The same shortcuts as
// bilinear_lanes. Shared by the nearest builders and the fused forward;
// made once per tile, like SourceIndexLanes, so that its constants stay in
// registers across the tile's vectors. kInside: the padding has put every
// coordinate in [0, size - 1] (border and reflection clip, NaN to 0), so
// every tap is valid and the range tests are skipped (same bits).
template <class D, int G, bool kInside = false>
struct NearestLanes {
  using T = hwy::HWY_NAMESPACE::TFromD<D>;
  using V = hwy::HWY_NAMESPACE::Vec<D>;
  using DI = hwy::HWY_NAMESPACE::RebindToSigned<D>;
  struct Tap {
    hwy::HWY_NAMESPACE::Mask<D> valid;
    hwy::HWY_NAMESPACE::Vec<DI> index;
  };
  D d;
  V zero, last[G], extent_v[G];
  int64_t size[3];
  // Float, and every flat index below 2^24: the index is formed in float,
  // where it is exact, with one conversion and no integer multiplies (on a
  // Zen 4 the one-channel nearest forward ran 1.0x-1.1x faster).
  bool float_index = false;

  NearestLanes(D tag, const int64_t extent[3]) : d(tag), size{extent[0], extent[1], extent[2]} {
    namespace hn = hwy::HWY_NAMESPACE;
    zero = hn::Zero(d);
    for (int a = 0; a < G; ++a) last[a] = hn::Set(d, static_cast<T>(size[a] - 1));
    for (int a = 0; a < G; ++a) extent_v[a] = hn::Set(d, static_cast<T>(size[a]));
    float_index = std::is_same_v<T, float> && size[0] * size[1] * size[2] <= (int64_t{1} << 24);
  }

  Tap operator()(const V x[G]) const {
    namespace hn = hwy::HWY_NAMESPACE;
    using TI = hn::TFromD<DI>;
    const DI di;
    V r[G];
    for (int a = 0; a < G; ++a) r[a] = hn::Round(x[a]);
    auto valid = hn::FirstN(d, hn::Lanes(d));
    if constexpr (!kInside) {
      for (int a = 0; a < G; ++a) valid = hn::And(valid, hn::And(r[a] >= zero, r[a] <= last[a]));
      for (int a = 0; a < G; ++a) r[a] = hn::IfThenElseZero(valid, r[a]);
    }
    Tap t;
    t.valid = valid;
    if (float_index) {
      V flat = r[G - 1];
      for (int a = G - 2; a >= 0; --a) flat = hn::Add(hn::Mul(flat, extent_v[a]), r[a]);
      t.index = hn::ConvertTo(di, flat);
    } else if constexpr (G == 2) {
      t.index = tap_index<T>(di, r[1], r[0], size[0]);
    } else if constexpr (std::is_same_v<T, float>) {
      const auto row = hn::ConvertTo(di, r[2]) * hn::Set(di, static_cast<TI>(size[1])) + hn::ConvertTo(di, r[1]);
      t.index = row * hn::Set(di, static_cast<TI>(size[0])) + hn::ConvertTo(di, r[0]);
    } else {
      const auto row = hn::Add(hn::Mul(r[2], hn::Set(d, static_cast<T>(size[1]))), r[1]);
      t.index = hn::ConvertTo(di, hn::Add(hn::Mul(row, hn::Set(d, static_cast<T>(size[0]))), r[0]));
    }
    return t;
  }
};

// The nearest taps of a tile's padded coordinates (G = 2: ix, iy; G = 3:
// ix, iy, iz; size[2] = 1 for images), as NearestLanes forms them; an
// invalid tap's index is `plane`. kInside as NearestLanes.
template <class T, int G, bool kInside>
inline void nearest_taps_lanes(const T* const coords[G], int count, const int64_t size[3], bool derivatives,
                               bool wide, Tile<T, 1, G>* t) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<T> df;
  const hn::RebindToSigned<decltype(df)> di;
  using TI = hn::TFromD<decltype(di)>;
  const int n = static_cast<int>(hn::Lanes(df));
  const auto zero = hn::Zero(df), one = hn::Set(df, T(1));
  const auto dummy = hn::Set(di, static_cast<TI>(size[0] * size[1] * size[2]));
  const NearestLanes<decltype(df), G, kInside> nearest(df, size);
  TI* out = gather_indices(t, 0);
  for (int i = 0; i < count; i += n) {
    hn::Vec<decltype(df)> x[G];
    for (int a = 0; a < G; ++a) x[a] = hn::LoadU(df, coords[a] + i);
    const auto tap = nearest(x);
    hn::StoreU(hn::IfThenElse(hn::RebindMask(di, tap.valid), tap.index, dummy), di, out + i);
    hn::StoreU(hn::IfThenElseZero(tap.valid, one), df, t->w[0] + i);
    if (!derivatives) continue;
    for (int a = 0; a < G; ++a) hn::StoreU(zero, df, t->dw[a][0] + i);
  }
  if (wide) widen_indices(count, t);
}

// One axis of the cubic vector builders (bicubic here, tricubic in
// builders_3d-inl.h), for a vector of float pixels, with the arithmetic of
// the scalar stencil (stencil.hpp, coords.hpp) in the same order.

// Grid value -> unpadded source coordinate (coords::unnormalize).
template <bool kAlign, class DF, class VF = hwy::HWY_NAMESPACE::Vec<DF>>
inline VF cubic_unnormalize(DF df, VF g, int64_t size) {
  namespace hn = hwy::HWY_NAMESPACE;
  const auto one = hn::Set(df, 1.0f), half = hn::Set(df, 0.5f);
  if constexpr (kAlign) return hn::Mul(hn::Mul(hn::Add(g, one), half), hn::Set(df, static_cast<float>(size - 1)));
  return hn::Mul(hn::Sub(hn::Mul(hn::Add(g, one), hn::Set(df, static_cast<float>(size))), one), half);
}

// coords::cubic_weights and, when `g` is given, coords::cubic_weight_grads,
// term by term.
template <class DF, class VF = hwy::HWY_NAMESPACE::Vec<DF>>
inline void cubic_weights_lanes(DF df, VF frac, VF w[4], VF* g) {
  namespace hn = hwy::HWY_NAMESPACE;
  const auto one = hn::Set(df, 1.0f), a = hn::Set(df, -0.75f);
  const auto a2 = hn::Add(a, hn::Set(df, 2.0f)), a3 = hn::Add(a, hn::Set(df, 3.0f));
  const auto a5 = hn::Mul(hn::Set(df, 5.0f), a), a8 = hn::Mul(hn::Set(df, 8.0f), a);
  const auto a4 = hn::Mul(hn::Set(df, 4.0f), a);
  auto near = [&](VF x) { return hn::Add(hn::Mul(hn::Mul(hn::Sub(hn::Mul(a2, x), a3), x), x), one); };
  auto far = [&](VF x) { return hn::Sub(hn::Mul(hn::Add(hn::Mul(hn::Sub(hn::Mul(a, x), a5), x), a8), x), a4); };
  const auto x2 = hn::Sub(one, frac);
  w[0] = far(hn::Add(frac, one));
  w[1] = near(frac);
  w[2] = near(x2);
  w[3] = far(hn::Add(x2, one));
  if (g == nullptr) return;
  const auto a10 = hn::Mul(hn::Set(df, 10.0f), a);
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
}

// Pads the tap positions base - 1 + i along an axis of `size` pixels, in
// int32: the padded indices, which are inside, and (reflection) which are
// not done by two folds (added to *bad). Border clamps; reflection folds at
// most twice (below 0, then above the last pixel), which is exactly what the
// float policy does to integral positions.
template <Padding P, bool kAlign, class DI, class VI = hwy::HWY_NAMESPACE::Vec<DI>,
          class MI = hwy::HWY_NAMESPACE::Mask<DI>>
inline void pad_cubic_taps(DI di, VI base, int64_t size, VI pos[4], MI inside[4], MI* bad) {
  namespace hn = hwy::HWY_NAMESPACE;
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
}

// The limit on |source coordinate| of the cubic vector builders: beyond
// 2^22, floor(ix) - 1 + i is not exact in float.
constexpr float kCubicLanesLimit = 4194304.0f;

// The bicubic stencil of one vector of float pixels from their grid values:
// each axis' cubic weights (and, with `derivatives`, their derivatives), the
// padded tap columns tx and rows ty with which of them are inside, and the
// lanes this cannot do exactly (`bad`, for the scalar path): a non-finite or
// large coordinate (|ix| >= 2^22), or a reflected tap still outside the
// image after two folds. The tile builder and the fused bicubic forward
// (fused_bicubic-inl.h) both take their taps from here.
template <class DF>
struct BicubicLanes {
  using DI = hwy::HWY_NAMESPACE::RebindToSigned<DF>;
  hwy::HWY_NAMESPACE::Vec<DF> cx[4], cy[4], gcx[4], gcy[4];
  hwy::HWY_NAMESPACE::Vec<DI> tx[4], ty[4];
  hwy::HWY_NAMESPACE::Mask<DI> x_in[4], y_in[4], bad;
};

template <Padding P, bool kAlign, class DF, class VF = hwy::HWY_NAMESPACE::Vec<DF>>
HWY_INLINE void bicubic_lanes(DF df, VF gx, VF gy, int64_t in_h, int64_t in_w, bool derivatives,
                              BicubicLanes<DF>* s) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::RebindToSigned<DF> di;
  const auto limit = hn::Set(df, kCubicLanesLimit);
  VF ix = cubic_unnormalize<kAlign>(df, gx, in_w);
  VF iy = cubic_unnormalize<kAlign>(df, gy, in_h);
  // Not (|ix| < 2^22 and |iy| < 2^22): NaN and infinities included.
  const auto ok = hn::And(hn::Lt(hn::Abs(ix), limit), hn::Lt(hn::Abs(iy), limit));
  ix = hn::IfThenElseZero(ok, ix);
  iy = hn::IfThenElseZero(ok, iy);
  const VF fx = hn::Floor(ix), fy = hn::Floor(iy);
  // The fractions, + 0: x - floor(x) is never -0 in scalar arithmetic, but
  // a target whose Floor drops the sign of -0 (EMU128: -0 from a 1-pixel
  // axis with align_corners) would make it -0 here and flip the sign of
  // zero weights.
  const VF zero = hn::Zero(df);
  const VF frac_x = hn::Add(hn::Sub(ix, fx), zero), frac_y = hn::Add(hn::Sub(iy, fy), zero);
  cubic_weights_lanes(df, frac_x, s->cx, derivatives ? s->gcx : nullptr);
  cubic_weights_lanes(df, frac_y, s->cy, derivatives ? s->gcy : nullptr);
  s->bad = hn::RebindMask(di, hn::Not(ok));
  pad_cubic_taps<P, kAlign>(di, hn::ConvertTo(di, fx), in_w, s->tx, s->x_in, &s->bad);
  pad_cubic_taps<P, kAlign>(di, hn::ConvertTo(di, fy), in_h, s->ty, s->y_in, &s->bad);
}

// The bicubic taps of a tile's grid values, likewise (accumulator indices
// and weights; their derivatives when `derivatives`). Pixels this cannot do
// exactly (BicubicLanes::bad) are marked in `fallback` for the scalar path.
// Requires Hin * Win + Win < 2^31.
template <Padding P, bool kAlign>
inline void bicubic_taps_lanes(const float* grid_x, const float* grid_y, int count, int64_t in_h, int64_t in_w,
                               bool derivatives, bool wide, Tile<float, 16>* t, bool* fallback) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  using VI = hn::Vec<decltype(di)>;
  const int n = static_cast<int>(hn::Lanes(df));
  const auto width = hn::Set(di, static_cast<int32_t>(in_w));
  const auto dummy = hn::Set(di, static_cast<int32_t>(in_h * in_w));
  const float mult_x = coords::unnormalize_slope<float>(in_w, kAlign);
  const float mult_y = coords::unnormalize_slope<float>(in_h, kAlign);
  for (int i = 0; i < count; i += n) {
    BicubicLanes<hn::ScalableTag<float>> s;
    bicubic_lanes<P, kAlign>(df, hn::LoadU(df, grid_x + i), hn::LoadU(df, grid_y + i), in_h, in_w, derivatives, &s);
    hn::StoreU(hn::Set(df, mult_x), df, t->mult[0] + i);
    hn::StoreU(hn::Set(df, mult_y), df, t->mult[1] + i);
    alignas(64) int32_t bad_lanes[hn::MaxLanes(di)];
    hn::Store(hn::VecFromMask(di, s.bad), di, bad_lanes);
    for (int l = 0; l < n && i + l < kTile; ++l) fallback[i + l] = bad_lanes[l] != 0;
    for (int j = 0; j < 4; ++j) {
      const VI row = hn::Mul(s.ty[j], width);
      for (int k = 0; k < 4; ++k) {
        const int tap = j * 4 + k;
        const auto valid = hn::And(s.y_in[j], s.x_in[k]);
        const auto valid_f = hn::RebindMask(df, valid);
        hn::StoreU(hn::IfThenElse(valid, hn::Add(row, s.tx[k]), dummy), di, t->acc32[tap] + i);
        hn::StoreU(hn::IfThenElseZero(valid_f, hn::Mul(s.cx[k], s.cy[j])), df, t->w[tap] + i);
        if (!derivatives) continue;
        hn::StoreU(hn::IfThenElseZero(valid_f, hn::Mul(hn::Neg(s.gcx[k]), s.cy[j])), df, t->dw[0][tap] + i);
        hn::StoreU(hn::IfThenElseZero(valid_f, hn::Mul(hn::Neg(s.gcy[j]), s.cx[k])), df, t->dw[1][tap] + i);
      }
    }
  }
  if (wide) widen_indices(count, t);
}

// out[c][i] = component c of the grid point of output pixel p0 + i, for
// i < count and the G components, from one image's grid at `gr` of strides
// `gs`. A dense grid interleaves the components; any other is read by row
// segments, where a grid permuted from (N, G, H, W) (as flow fields often
// arrive) is G contiguous runs: a per-pixel walk there cost a 3-channel
// backward a sixth of its time.
template <int G, class S, class T>
HWY_INLINE void grid_points(const S* gr, const Shape4& gs, int64_t out_w, int64_t p0, int64_t count, T (*out)[kTile]) {
  if (dense_points<G>(gs, out_w)) {
    const S* g = gr + G * p0;
    if constexpr (kHalvesByVector<S, T>) {
      alignas(64) float wide[G * kTile];  // (count <= kTile)
      widen_halves(g, G * count, wide);
      for (int64_t i = 0; i < count; ++i) {
        for (int c = 0; c < G; ++c) out[c][i] = wide[G * i + c];
      }
      return;
    }
    for (int64_t i = 0; i < count; ++i) {
      for (int c = 0; c < G; ++c) out[c][i] = load(g[G * i + c]);
    }
    return;
  }
  // (Strides as locals: stores through `out` could otherwise change them as
  // far as the lambda knows.)
  const int64_t row_stride = gs[1], col_stride = gs[2], component = gs[3];
  for_each_row_run(out_w, p0, p0 + count, [&](int64_t q, int64_t len, int64_t h, int64_t w) {
    const S* row = gr + h * row_stride + w * col_stride;
    for (int c = 0; c < G; ++c) {
      const S* __restrict from = row + c * component;
      T* __restrict to = out[c] + (q - p0);
      if (col_stride == 1) {
        for (int64_t j = 0; j < len; ++j) to[j] = load(from[j]);
      } else {
        for (int64_t j = 0; j < len; ++j) to[j] = load(from[j * col_stride]);
      }
    }
  });
}

template <Interpolation M, Padding P, bool kAlign, bool kStrided, class S, class T, int K>
void fill_tile(const TileSource& p, int64_t n, int64_t p0, int64_t count, Tile<T, K>* t) {
  const Shape4& gs = p.grid_strides;
  const Shape4& out_strides = p.out_strides;
  const Shape4& in_strides = p.in_strides;
  const S* gr = static_cast<const S*>(p.grid) + n * gs[0];
  const int64_t plane = p.in_h * p.in_w;
  t->count = static_cast<int>(count);
  t->pairs = M == Interpolation::kBilinear;
  // Where each pixel's grid values are and where its grad/output value goes:
  // runs of consecutive pixels when the grid and the planes are dense.
  T points[2][kTile];
  T* gx = points[0];
  T* gy = points[1];
  grid_points<2, S>(gr, gs, p.out_w, p0, count, points);
  t->out_dense = out_strides[3] == 1 && out_strides[2] == p.out_w;
  if (t->out_dense) {
    t->out_off[0] = p0;  // (the rest follow; kernels read only the first)
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
#if HWY_TARGET != HWY_SCALAR
    std::fill(gx + count, gx + kTile, T(0));
    std::fill(gy + count, gy + kTile, T(0));
    if (p.derivatives) {
      source_index_lanes<P, kAlign, true>(gx, static_cast<int>(count), p.in_w, ix, t->mult[0]);
      source_index_lanes<P, kAlign, true>(gy, static_cast<int>(count), p.in_h, iy, t->mult[1]);
    } else {
      source_index_lanes<P, kAlign, false>(gx, static_cast<int>(count), p.in_w, ix, t->mult[0]);
      source_index_lanes<P, kAlign, false>(gy, static_cast<int>(count), p.in_h, iy, t->mult[1]);
    }
#else
    for (int64_t i = 0; i < count; ++i) {
      ix[i] = coords::source_index<P>(gx[i], p.in_w, kAlign, &t->mult[0][i]);
      iy[i] = coords::source_index<P>(gy[i], p.in_h, kAlign, &t->mult[1][i]);
    }
#endif
#if HWY_TARGET != HWY_SCALAR
    if constexpr (!kStrided) {
      // Where the vector builders are exact (see bilinear_taps_lanes).
      constexpr bool kFloat = std::is_same_v<T, float>;
      constexpr int64_t kExact = int64_t{1} << (kFloat ? 24 : 53);
      constexpr int64_t kIndexLimit = int64_t{1} << (kFloat ? 31 : 53);
      if (p.in_w <= kExact && p.in_h <= kExact && plane + p.in_w < kIndexLimit) {
        if constexpr (M == Interpolation::kBilinear) {
          bilinear_taps_lanes(ix, iy, static_cast<int>(count), p.in_h, p.in_w, p.derivatives, p.wide_indices, t);
        } else {
          const T* const padded[2] = {ix, iy};
          const int64_t size[3] = {p.in_w, p.in_h, 1};
          nearest_taps_lanes<T, 2, P != Padding::kZeros>(padded, static_cast<int>(count), size, p.derivatives, p.wide_indices, t);
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
      put_stencil<kStrided>(s, i, plane, p.in_w, in_strides, t);
    }
  } else {
    auto scalar_stencil = [&](int64_t i) {
      Stencil<T, K> s;
      build_stencil<M, P, kAlign>(gx[i], gy[i], p.in_h, p.in_w, &s);
      t->mult[0][i] = s.mult_x;
      t->mult[1][i] = s.mult_y;
      put_stencil<kStrided>(s, i, plane, p.in_w, in_strides, t);
    };
#if HWY_TARGET != HWY_SCALAR
    if constexpr (!kStrided && std::is_same_v<T, float>) {
      if (plane + p.in_w < (int64_t{1} << 31)) {
        std::fill(gx + count, gx + kTile, T(0));
        std::fill(gy + count, gy + kTile, T(0));
        bool fallback[kTile];
        bicubic_taps_lanes<P, kAlign>(gx, gy, static_cast<int>(count), p.in_h, p.in_w, p.derivatives, p.wide_indices, t,
                                      fallback);
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

// The builder of one (mode, padding, align_corners, tap form) for storage
// type S, as a table entry.
template <class S, Interpolation M, Padding P, bool kAlign, bool kStrided>
void build_tile(const TileSource& src, int64_t n, int64_t p0, int64_t count, void* tile) {
  fill_tile<M, P, kAlign, kStrided, S>(src, n, p0, count, static_cast<Tile<compute_t<S>, kTaps<M>>*>(tile));
}

template <class S, Interpolation M, Padding P, bool kAlign>
void fill_builders(KernelTable* table) {
  auto& entry = table->build[static_cast<int>(M)][static_cast<int>(P)][kAlign ? 1 : 0];
  entry[static_cast<int>(TapForm::kFlat)] = &build_tile<S, M, P, kAlign, false>;
  entry[static_cast<int>(TapForm::kStrided)] = &build_tile<S, M, P, kAlign, true>;
}

template <class S, Interpolation M>
void fill_builders(KernelTable* table) {
  fill_builders<S, M, Padding::kZeros, false>(table);
  fill_builders<S, M, Padding::kZeros, true>(table);
  fill_builders<S, M, Padding::kBorder, false>(table);
  fill_builders<S, M, Padding::kBorder, true>(table);
  fill_builders<S, M, Padding::kReflection, false>(table);
  fill_builders<S, M, Padding::kReflection, true>(table);
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace gridsampler::cpu
HWY_AFTER_NAMESPACE();

#endif  // GRIDSAMPLER_CPU_BUILDERS_INL_H_
