// Layout moves: between the caller's tensors (any strides) and the kernels'
// buffers. Interleaved kernels keep a block of L channels pixel-major and
// channel-minor ([pixel][lane]), so that every tap of every pixel is one
// contiguous run of L values; these functions copy input values and grad
// tiles into that layout and write outputs, dx and dgrid back out, rounding
// once to the storage type.

// Target-independent includes (normal include guards).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/dtype.hpp"
#include "core/validate.hpp"
#include "cpu/plan.hpp"
#include "cpu/tile.hpp"
#include "gridsampler/gridsampler.hpp"

// Per-target part: re-included once for every target.
#if defined(GRIDSAMPLER_CPU_LAYOUT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GRIDSAMPLER_CPU_LAYOUT_INL_H_
#undef GRIDSAMPLER_CPU_LAYOUT_INL_H_
#else
#define GRIDSAMPLER_CPU_LAYOUT_INL_H_
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

// Whether storage S converts to and from compute type T by vector, a run at
// a time (widen_halves, narrow_to_halves below): float16 where the target
// has F16C. Elsewhere values convert one by one (load, store<S>).
template <class S, class T>
constexpr bool kHalvesByVector = kHardwareHalf && std::is_same_v<S, Half> && std::is_same_v<T, float>;

// to[i] = from[i] widened to float (exact) for i < n. Where a call converts
// a run of float16 values, whole vectors go through F16C; half_to_float per
// value (a call each: the compiler does not inline it into the kernels)
// took a third of a one-channel float16 backward.
inline void widen_halves(const Half* __restrict from, int64_t n, float* __restrict to) {
  int64_t i = 0;
  if constexpr (kHardwareHalf) {
    namespace hn = hwy::HWY_NAMESPACE;
    const hn::ScalableTag<float> df;
    const hn::Rebind<hwy::float16_t, decltype(df)> dh;
    const auto nf = static_cast<int64_t>(hn::Lanes(df));
    for (; i + nf <= n; i += nf) {
      hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(from + i))), df, to + i);
    }
  }
  for (; i < n; ++i) to[i] = load(from[i]);
}

// to[i] = from[i] rounded to float16 for i < n: F16C rounds to nearest even
// like half_from_float, and NaNs are made the canonical quiet NaN of their
// sign first, as half_from_float does.
inline void narrow_to_halves(const float* __restrict from, int64_t n, Half* __restrict to) {
  int64_t i = 0;
  if constexpr (kHardwareHalf) {
    namespace hn = hwy::HWY_NAMESPACE;
    const hn::ScalableTag<float> df;
    const hn::Rebind<hwy::float16_t, decltype(df)> dh;
    const auto nf = static_cast<int64_t>(hn::Lanes(df));
    const auto quiet_nan = hn::BitCast(df, hn::Set(hn::RebindToUnsigned<decltype(df)>(), 0x7fc00000u));
    for (; i + nf <= n; i += nf) {
      auto v = hn::LoadU(df, from + i);
      v = hn::IfThenElse(hn::IsNaN(v), hn::CopySign(quiet_nan, v), v);
      hn::StoreU(hn::DemoteTo(dh, v), dh, reinterpret_cast<hwy::float16_t*>(to + i));
    }
  }
  for (; i < n; ++i) to[i] = store<Half>(from[i]);
}

// to[i] = from[i] rounded to S for i < n: float16 by vector
// (narrow_to_halves), other types in a flat loop (which compilers
// vectorise for bfloat16; a copy where S is T).
template <class S, class T>
inline void narrow_run(const T* __restrict from, int64_t n, S* __restrict to) {
  if constexpr (kHalvesByVector<S, T>) {
    narrow_to_halves(from, n, to);
  } else {
    for (int64_t i = 0; i < n; ++i) to[i] = store<S>(from[i]);
  }
}

// Moves between planes and the [pixel][lane] layout. The general case is
// written as plain loops in the shape compilers vectorise for every target:
// an interleaving store of L rows read contiguously, and its inverse through
// an L x L block in registers (GCC turns both into vpermt2ps on AVX-512,
// unpack/permute sequences on AVX2). Highway has no general transpose;
// hand-written shuffles per target would be the only alternative. Four
// lanes and float16 go through Highway, where the plain loops were slower
// (docs/performance.md).

// dst[q][j] = src[j * row_stride + q] for the first `rows` (1 to L) rows j
// and q < n, widened to T; lanes from `rows` on are zero.
template <int L, class S, class T>
inline void interleave_rows(const S* src, int64_t row_stride, int rows, int64_t n, T* __restrict dst) {
  if constexpr (kHalvesByVector<S, T>) {
    // float16: widen a stretch of each row with Highway (F16C on x86, exact
    // like half_to_float), then interleave floats: per element, the bit
    // conversion costs more than the rest of the transpose.
    constexpr int64_t kStretch = 256;
    alignas(64) float wide[L][kStretch];
    for (int64_t q0 = 0; q0 < n; q0 += kStretch) {
      const int64_t m = std::min(kStretch, n - q0);
      for (int j = 0; j < rows; ++j) widen_halves(src + j * row_stride + q0, m, wide[j]);
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
    // Per pixel, the vectors of its row that hold missing lanes, masked: a
    // loop per missing lane (one scalar store per pixel and lane, a row
    // apart) took half of an 8-channel nearest backward.
    // (Vectors of at most L lanes, so that whole vectors tile the row.)
    namespace hn = hwy::HWY_NAMESPACE;
    const hn::CappedTag<T, L> dt;
    const auto nt = static_cast<int>(hn::Lanes(dt));
    for (int v = rows / nt * nt; v < L; v += nt) {
      const auto keep = hn::FirstN(dt, static_cast<size_t>(std::max(rows - v, 0)));
      for (int64_t q = 0; q < n; ++q) {
        T* p = dst + q * L + v;
        hn::StoreU(hn::IfThenElseZero(keep, hn::LoadU(dt, p)), dt, p);
      }
    }
  }
}

// dst[j * row_stride + q] = src[q][j] for the first `rows` lanes j, the
// inverse, rounded to S.
template <int L, class S, class T>
inline void deinterleave_rows(const T* __restrict src, int rows, int64_t n, S* dst, int64_t row_stride) {
  if constexpr (!std::is_same_v<S, T>) {
    // 16-bit storage: transpose into a stretch of rows in T, then round each
    // row by itself, a flat loop: float16 with Highway (F16C on x86: round
    // to nearest even, like half_from_float; NaNs are made the canonical
    // quiet NaN first, as half_from_float does), bfloat16 by store<S>, which
    // compilers vectorise there but left scalar inside the transposition of
    // 4-lane rows (docs/performance.md, "bfloat16 written out by rows").
    constexpr int64_t kStretch = 256;
    alignas(64) T wide[L * kStretch];  // (flat: row j at j * kStretch)
    for (int64_t q0 = 0; q0 < n; q0 += kStretch) {
      const int64_t m = std::min(kStretch, n - q0);
      deinterleave_rows<L>(src + q0 * L, rows, m, wide, kStretch);
      for (int j = 0; j < rows; ++j) narrow_run(wide + j * kStretch, m, dst + j * row_stride + q0);
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


// out[2 * i] = ax[i] * bx[i], out[2 * i + 1] = ay[i] * by[i] for i < count
// <= kTile (a tile's dgrid; with bx and by null, ax[i] and ay[i]
// themselves: its partial sums), written as pairs with Highway's
// interleaving store.
// Products are plain multiplies, so every target gives the same bits.
template <class S, class T>
inline void store_pairs(const T* ax, const T* bx, const T* ay, const T* by, int count, S* __restrict out) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<T> d;
  const int n = static_cast<int>(hn::Lanes(d));
  int i = 0;
  auto pair = [&](hn::Vec<decltype(d)>* x, hn::Vec<decltype(d)>* y) {
    *x = bx == nullptr ? hn::LoadU(d, ax + i) : hn::Mul(hn::LoadU(d, ax + i), hn::LoadU(d, bx + i));
    *y = by == nullptr ? hn::LoadU(d, ay + i) : hn::Mul(hn::LoadU(d, ay + i), hn::LoadU(d, by + i));
  };
  if constexpr (std::is_same_v<S, T>) {
    for (; i + n <= count; i += n) {
      hn::Vec<decltype(d)> x, y;
      pair(&x, &y);
      hn::StoreInterleaved2(x, y, d, out + 2 * i);
    }
  } else if constexpr (kHalvesByVector<S, T>) {
    // float16: the whole vectors' pairs in floats, then narrowed.
    alignas(64) float both[2 * kTile];
    for (; i + n <= count; i += n) {
      hn::Vec<decltype(d)> x, y;
      pair(&x, &y);
      hn::StoreInterleaved2(x, y, d, both + 2 * i);
    }
    narrow_to_halves(both, 2 * i, out);
  }
  for (; i < count; ++i) {
    out[2 * i] = store<S>(bx == nullptr ? ax[i] : ax[i] * bx[i]);
    out[2 * i + 1] = store<S>(by == nullptr ? ay[i] : ay[i] * by[i]);
  }
}

// out[G * i + g] = a[g][i] * b[g][i] for i < count <= kTile and each
// component g (with b null, a[g][i] itself): store_pairs for (x, y), Highway's
// three-way interleaving store for (x, y, z). Plain multiplies, the same
// bits on every target.
template <int G, class S, class T>
inline void store_points(const T (*a)[kTile], const T (*b)[kTile], int count, S* __restrict out) {
  if constexpr (G == 2) {
    store_pairs<S>(a[0], b == nullptr ? nullptr : b[0], a[1], b == nullptr ? nullptr : b[1], count, out);
  } else {
    static_assert(G == 3);
    namespace hn = hwy::HWY_NAMESPACE;
    const hn::ScalableTag<T> d;
    const int n = static_cast<int>(hn::Lanes(d));
    auto value = [&](int g, int i) { return b == nullptr ? a[g][i] : a[g][i] * b[g][i]; };
    int i = 0;
    auto vec = [&](int g) {
      return b == nullptr ? hn::LoadU(d, a[g] + i) : hn::Mul(hn::LoadU(d, a[g] + i), hn::LoadU(d, b[g] + i));
    };
    if constexpr (std::is_same_v<S, T>) {
      for (; i + n <= count; i += n) hn::StoreInterleaved3(vec(0), vec(1), vec(2), d, out + 3 * i);
    } else if constexpr (kHalvesByVector<S, T>) {
      // float16: the whole vectors' values in floats, then narrowed.
      alignas(64) float all[3 * kTile];
      for (; i + n <= count; i += n) hn::StoreInterleaved3(vec(0), vec(1), vec(2), d, all + 3 * i);
      narrow_to_halves(all, 3 * i, out);
    }
    for (; i < count; ++i) {
      for (int g = 0; g < 3; ++g) out[3 * i + g] = store<S>(value(g, i));
    }
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

// to[i] = pixel p0 + i of one plane at `from` with row stride s[2], column
// stride s[3] and `width` columns, for i < count: a tile's values of a
// strided plane (any strides, zero included) in pixel order.
template <class S>
inline void pixel_values(const S* from, const Shape4& s, int64_t width, int64_t p0, int count, S* __restrict to) {
  // (Strides as locals: a store through `to` could otherwise change them
  // as far as the lambda knows, and each would be reloaded per element.)
  const int64_t row_stride = s[2], col_stride = s[3];
  for_each_row_run(width, p0, p0 + count, [&](int64_t q, int64_t m, int64_t y, int64_t x) {
    const S* __restrict row = from + y * row_stride + x * col_stride;
    S* __restrict run = to + (q - p0);
    for (int64_t j = 0; j < m; ++j) run[j] = row[j * col_stride];
  });
}

// to[G * i + c] = component c of the grid point of output pixel p0 + i,
// for i < count, from one image's grid at `from` of any strides `s` (rows
// s[1], columns s[2], components s[3]): a run of dense points, walked by
// row segments (a grid permuted from (N, G, H, W) reads G contiguous runs
// per row).
template <int G, class S>
inline void interleaved_points(const S* from, const Shape4& s, int64_t width, int64_t p0, int64_t count,
                               S* __restrict to) {
  // (Strides as locals, as in pixel_values.)
  const int64_t row_stride = s[1], col_stride = s[2], component = s[3];
  for_each_row_run(width, p0, p0 + count, [&](int64_t q, int64_t len, int64_t h, int64_t w) {
    const S* __restrict row = from + h * row_stride + w * col_stride;
    S* __restrict out = to + G * (q - p0);
    int64_t j = 0;
    // G contiguous runs: whole vectors through an interleaving store (for
    // float and double, the types fused tiles read).
    if constexpr (std::is_floating_point_v<S>) {
      namespace hn = hwy::HWY_NAMESPACE;
      const hn::ScalableTag<S> d;
      const auto lanes = static_cast<int64_t>(hn::Lanes(d));
      if (col_stride == 1) {
        for (; j + lanes <= len; j += lanes) {
          if constexpr (G == 2) {
            hn::StoreInterleaved2(hn::LoadU(d, row + j), hn::LoadU(d, row + component + j), d, out + 2 * j);
          } else {
            static_assert(G == 3);
            hn::StoreInterleaved3(hn::LoadU(d, row + j), hn::LoadU(d, row + component + j),
                                  hn::LoadU(d, row + 2 * component + j), d, out + 3 * j);
          }
        }
      }
    }
    for (; j < len; ++j) {
      for (int c = 0; c < G; ++c) out[G * j + c] = row[j * col_stride + c * component];
    }
  });
}

// The grid points of output pixels [p0, p0 + count) of image n, G values
// each in pixel order, as fused tiles read them: in place where the grid is
// dense, else copied into `buffer` (G * count elements).
template <int G, class S>
inline const S* run_points(const TensorView& grid, int64_t out_w, int64_t n, int64_t p0, int64_t count, bool dense,
                           S* buffer) {
  const S* image = static_cast<const S*>(grid.data) + n * grid.strides[0];
  if (dense) return image + G * p0;
  interleaved_points<G>(image, grid.strides, out_w, p0, count, buffer);
  return buffer;
}

// Channels-last moves of one pixel: `rows` (at most L) contiguous values at
// px to and from a slot of L lanes (zero from `rows` on). R is the row count
// when known at compile time, else 0. with_rows calls f with the common
// counts as constants (a full block; one to three channels: grey, pairs,
// RGB): a copy of run-time length compiled to a libc memmove call per pixel,
// a fifth of an RGB channels-last forward's time.
template <int L, class F>
HWY_INLINE void with_rows(int rows, F&& f) {
  if constexpr (L > 3) {
    switch (rows) {
      case 1: f(std::integral_constant<int, 1>()); break;
      case 2: f(std::integral_constant<int, 2>()); break;
      case 3: f(std::integral_constant<int, 3>()); break;
      case L: f(std::integral_constant<int, L>()); break;
      default: f(std::integral_constant<int, 0>()); break;
    }
  } else {  // planar drivers' one-channel blocks (not a channels-last path)
    f(std::integral_constant<int, 0>());
  }
}

// (Whole vectors written out: GCC left the constant-length copies of 16
// floats as 16 scalar moves.)
template <int L, int R, class S, class T>
HWY_INLINE void pixel_to_lanes(const S* __restrict px, int rows, T* __restrict dst) {
  int j = 0;
  if constexpr (std::is_same_v<S, T> && R > 0 && !HWY_HAVE_SCALABLE) {
    namespace hn = hwy::HWY_NAMESPACE;
    const hn::CappedTag<T, L> d;
    constexpr int kMax = static_cast<int>(hn::MaxLanes(d));
    for (; j + kMax <= R; j += kMax) hn::StoreU(hn::LoadU(d, px + j), d, dst + j);
  }
  const int r = R > 0 ? R : rows;
  for (; j < L; ++j) dst[j] = j < r ? load(px[j]) : T(0);
}

template <int R, class S, class T>
HWY_INLINE void lanes_to_pixel(const T* __restrict src, int rows, S* __restrict px) {
  int j = 0;
  if constexpr (std::is_same_v<S, T> && R >= 4 && (R & (R - 1)) == 0 && !HWY_HAVE_SCALABLE) {
    namespace hn = hwy::HWY_NAMESPACE;
    const hn::CappedTag<T, R> d;
    constexpr int kMax = static_cast<int>(hn::MaxLanes(d));
    for (; j + kMax <= R; j += kMax) hn::StoreU(hn::LoadU(d, src + j), d, px + j);
  }
  const int r = R > 0 ? R : rows;
  for (; j < r; ++j) px[j] = store<S>(src[j]);
}

// Packed channels-last pixels (R = 2 or 3 values each, one pixel after the
// other: a flow field, RGB) to and from four lanes, n pixels, through
// Highway's interleaved loads and stores; per pixel, the moves took a fifth
// of an RGB channels-last forward.
// (float16 pixels too, widened or narrowed a stretch at a time around the
// float moves, where the target converts by vector.)
template <int L, class S, class T>
constexpr bool kPackedMoves = L == 4 && (std::is_same_v<S, T> || kHalvesByVector<S, T>);

template <int R, class T>
inline void packed_to_lanes(const T* __restrict src, int64_t n, T* __restrict dst) {
  namespace hn = hwy::HWY_NAMESPACE;
  static_assert(R == 2 || R == 3);
  const hn::ScalableTag<T> d;
  const auto nt = static_cast<int64_t>(hn::Lanes(d));
  const auto zero = hn::Zero(d);
  int64_t q = 0;
  for (; q + nt <= n; q += nt) {
    hn::Vec<decltype(d)> a, b, c = zero;
    if constexpr (R == 2) {
      hn::LoadInterleaved2(d, src + q * 2, a, b);
    } else {
      hn::LoadInterleaved3(d, src + q * 3, a, b, c);
    }
    hn::StoreInterleaved4(a, b, c, zero, d, dst + q * 4);
  }
  for (; q < n; ++q) pixel_to_lanes<4, R>(src + q * R, R, dst + q * 4);
}

template <int R, class T>
inline void lanes_to_packed(const T* __restrict src, int64_t n, T* __restrict dst) {
  namespace hn = hwy::HWY_NAMESPACE;
  static_assert(R == 2 || R == 3);
  const hn::ScalableTag<T> d;
  const auto nt = static_cast<int64_t>(hn::Lanes(d));
  int64_t q = 0;
  for (; q + nt <= n; q += nt) {
    hn::Vec<decltype(d)> a, b, c, unused;
    hn::LoadInterleaved4(d, src + q * 4, a, b, c, unused);
    if constexpr (R == 2) {
      hn::StoreInterleaved2(a, b, d, dst + q * 2);
    } else {
      hn::StoreInterleaved3(a, b, c, d, dst + q * 3);
    }
  }
  for (; q < n; ++q) lanes_to_pixel<R>(src + q * 4, R, dst + q * R);
}

constexpr int64_t kPackedStretch = 256;  // pixels per float16 stretch

template <int R>
inline void packed_to_lanes(const Half* __restrict src, int64_t n, float* __restrict dst) {
  alignas(64) float wide[kPackedStretch * R];
  for (int64_t q = 0; q < n; q += kPackedStretch) {
    const int64_t m = std::min(kPackedStretch, n - q);
    widen_halves(src + q * R, m * R, wide);
    packed_to_lanes<R>(wide, m, dst + q * 4);
  }
}

template <int R>
inline void lanes_to_packed(const float* __restrict src, int64_t n, Half* __restrict dst) {
  alignas(64) float wide[kPackedStretch * R];
  for (int64_t q = 0; q < n; q += kPackedStretch) {
    const int64_t m = std::min(kPackedStretch, n - q);
    lanes_to_packed<R>(src + q * 4, m, wide);
    narrow_to_halves(wide, m * R, dst + q * R);
  }
}

// Copies pixels [q0, q1) of the input channels [s0, s1) (at most L) of
// image n as [pixel][lane] to `at` (where pixel q0 goes), zero in unused
// lanes.
template <int L, class S, class T>
void copy_values_at(const Problem& p, const TensorView& input, int64_t n, int64_t s0, int64_t s1,
                    T* __restrict at, int64_t q0, int64_t q1) {
  const Shape4& is = input.strides;
  const S* ib = static_cast<const S*>(input.data) + n * is[0] + s0 * is[1];
  if (is[3] == 1 && is[2] == p.in_w) {  // dense planes
    interleave_rows<L>(ib + q0, is[1], static_cast<int>(s1 - s0), q1 - q0, at);
  } else if (is[1] == 1) {  // channels contiguous (channels-last)
    const int rows = static_cast<int>(s1 - s0);
    with_rows<L>(rows, [&](auto R) {
      constexpr int kR = decltype(R)::value;
      if constexpr (kPackedMoves<L, S, T> && (kR == 2 || kR == 3)) {
        if (is[3] == kR) {
          for_each_row_run(p.in_w, q0, q1, [&](int64_t q, int64_t m, int64_t y, int64_t x) {
            packed_to_lanes<kR>(ib + y * is[2] + x * kR, m, at + (q - q0) * L);
          });
          return;
        }
      }
      for_each_pixel(p.in_w, q0, q1, [&](int64_t q, int64_t y, int64_t x) {
        pixel_to_lanes<L, kR>(ib + y * is[2] + x * is[3], rows, at + (q - q0) * L);
      });
    });
  } else {
    std::fill_n(at, (q1 - q0) * L, T(0));
    for (int64_t c = s0; c < s1; ++c) {
      const S* ip = ib + (c - s0) * is[1];
      for_each_pixel(p.in_w, q0, q1, [&](int64_t q, int64_t y, int64_t x) {
        at[(q - q0) * L + (c - s0)] = load(ip[y * is[2] + x * is[3]]);
      });
    }
  }
}

// The same into a copy of the whole plane at xb (pixel q at xb + q * L),
// and, with the last pixel, zero in the dummy slot after the plane.
template <int L, class S, class T>
void copy_values(const Problem& p, const TensorView& input, int64_t n, int64_t s0, int64_t s1,
                 T* __restrict xb, int64_t q0, int64_t q1) {
  const int64_t plane = in_plane(p);
  if (q1 == plane) std::fill_n(xb + plane * L, L, T(0));
  copy_values_at<L, S>(p, input, n, s0, s1, xb + q0 * L, q0, q1);
}

// Copies grad channels [s0, s1) (at most L) of image n at a tile's pixels
// (`count` of them, from p0; out_off where the planes are not dense) into gt
// as [pixel][lane], zero in unused lanes.
template <int L, class S, class T>
inline void load_grad_lanes(const TensorView& grad, int64_t out_w, int64_t n, int64_t s0, int64_t s1,
                            const int64_t* out_off, int count, int64_t p0, T* __restrict gt) {
  const Shape4& gs = grad.strides;
  const S* gb = static_cast<const S*>(grad.data) + n * gs[0] + s0 * gs[1];
  if (gs[3] == 1 && gs[2] == out_w) {  // dense planes: a run of pixels
    interleave_rows<L>(gb + p0, gs[1], static_cast<int>(s1 - s0), count, gt);
    return;
  }
  if (gs[1] == 1) {  // channels contiguous (channels-last)
    const int rows = static_cast<int>(s1 - s0);
    with_rows<L>(rows, [&](auto R) {
      constexpr int kR = decltype(R)::value;
      if constexpr (kPackedMoves<L, S, T> && (kR == 2 || kR == 3)) {
        if (gs[3] == kR && gs[2] == out_w * kR && count > 0) {  // a run of packed pixels
          packed_to_lanes<kR>(gb + out_off[0], count, gt);
          return;
        }
      }
      for (int i = 0; i < count; ++i) pixel_to_lanes<L, kR>(gb + out_off[i], rows, gt + i * L);
    });
  } else {
    std::fill_n(gt, kTile * L, T(0));
    for (int64_t c = s0; c < s1; ++c) {
      const S* gp = gb + (c - s0) * gs[1];
      for (int i = 0; i < count; ++i) gt[i * L + (c - s0)] = load(gp[out_off[i]]);
    }
  }
}

// Writes the first `rows` lanes of a tile's [pixel][lane] values ot to the
// output channels from ob (image n, first channel of the block): `count`
// pixels from p0, at out_off where the planes are not dense.
template <int L, class S, class T>
inline void store_tile_lanes(const T* ot, int rows, int count, const int64_t* out_off, int64_t p0, S* ob,
                             const Shape4& os, int64_t out_w) {
  if (os[3] == 1 && os[2] == out_w) {  // dense planes: a run of pixels
    deinterleave_rows<L>(ot, rows, count, ob + p0, os[1]);
  } else if (os[1] == 1) {  // channels contiguous (channels-last)
    with_rows<L>(rows, [&](auto R) {
      constexpr int kR = decltype(R)::value;
      if constexpr (kPackedMoves<L, S, T> && (kR == 2 || kR == 3)) {
        if (os[3] == kR && os[2] == out_w * kR && count > 0) {  // a run of packed pixels
          lanes_to_packed<kR>(ot, count, ob + out_off[0]);
          return;
        }
      }
      for (int i = 0; i < count; ++i) lanes_to_pixel<kR>(ot + i * L, rows, ob + out_off[i]);
    });
  } else {
    for (int j = 0; j < rows; ++j) {
      for (int i = 0; i < count; ++i) ob[j * os[1] + out_off[i]] = store<S>(ot[i * L + j]);
    }
  }
}

// Writes pixels [q0, q1) of channels [c0, c1) of image n of dx from
// accumulators `a` that start at pixel q0: planes `slot` values apart
// (step 1), or one lane each of [pixel][lane] rows `step` values long (a
// block of L lanes, or a planar task's channels for a channels-last dx).
template <class S, class T>
inline void store_planes(const MutableTensorView& dx, int64_t in_w, int64_t slot, int64_t n, int64_t c0,
                         int64_t c1, const T* a, int64_t step, int64_t q0, int64_t q1) {
  const Shape4& ds = dx.strides;
  if (step > 1 && ds[1] == 1) {
    // [pixel][channel] accumulators into channels-last dx: by rows of
    // channels, one flat loop where both hold the same pixels' rows back to
    // back.
    const int64_t rows = c1 - c0;
    S* d0 = static_cast<S*>(dx.data) + n * ds[0] + c0;
    if (rows == step && ds[3] == step && ds[2] == in_w * step) {
      narrow_run(a, (q1 - q0) * step, d0 + q0 * step);
      return;
    }
    // Otherwise a stretch of whole rows at a time rounded flat into `narrow`,
    // then each pixel's channels copied out (a row per pixel rounded by
    // itself, 4-16 channels, left the rounding scalar).
    constexpr int64_t kElems = 4096;
    alignas(64) S narrow[kElems];
    const int64_t per = std::max<int64_t>(kElems / step, 1);
    for_each_row_run(in_w, q0, q1, [&](int64_t q, int64_t m, int64_t y, int64_t x) {
      for (int64_t s = 0; s < m; s += per) {
        const int64_t k = std::min(per, m - s), e = std::min(k * step, kElems);
        const T* __restrict src = a + (q + s - q0) * step;
        S* __restrict d = d0 + y * ds[2] + (x + s) * ds[3];
        if (step > kElems) {  // (one pixel, a row longer than the stretch)
          for (int64_t j = 0; j < rows; ++j) d[j] = store<S>(src[j]);
          continue;
        }
        narrow_run(src, e, narrow);
        for (int64_t i = 0; i < k; ++i) std::memcpy(d + i * ds[3], narrow + i * step, rows * sizeof(S));
      }
    });
    return;
  }
  for (int64_t c = c0; c < c1; ++c) {
    S* d = static_cast<S*>(dx.data) + n * ds[0] + c * ds[1];
    const T* __restrict src = a + (c - c0) * (step == 1 ? slot : 1);
    if (ds[3] == 1 && ds[2] == in_w) {  // a dense plane: one flat loop
      if constexpr (kHalvesByVector<S, T>) {
        if (step == 1) {
          narrow_to_halves(src, q1 - q0, d + q0);
          continue;
        }
      }
      for (int64_t q = q0; q < q1; ++q) d[q] = store<S>(src[(q - q0) * step]);
    } else {
      for_each_pixel(in_w, q0, q1, [&](int64_t q, int64_t y, int64_t x) {
        d[y * ds[2] + x * ds[3]] = store<S>(src[(q - q0) * step]);
      });
    }
  }
}

// The same from interleaved accumulators (starting at pixel q0): sub-blocks
// of L channels, each `slot` * L values.
template <int L, class S, class T>
inline void store_lanes(const MutableTensorView& dx, int64_t in_w, int64_t slot, int64_t n, int64_t c0, int64_t c1,
                        const T* a, int64_t q0, int64_t q1) {
  const Shape4& ds = dx.strides;
  const int64_t sub = slot * L;
  for (int64_t b = 0; b < (c1 - c0 + L - 1) / L; ++b) {
    const int64_t s0 = c0 + b * L, s1 = std::min(c1, s0 + L);
    const T* ab = a + b * sub;
    S* d = static_cast<S*>(dx.data) + n * ds[0] + s0 * ds[1];
    if (ds[3] == 1 && ds[2] == in_w) {  // dense planes
      deinterleave_rows<L>(ab, static_cast<int>(s1 - s0), q1 - q0, d + q0, ds[1]);
    } else if (ds[1] == 1) {  // channels contiguous (channels-last)
      const int rows = static_cast<int>(s1 - s0);
      with_rows<L>(rows, [&](auto R) {
        constexpr int kR = decltype(R)::value;
        if constexpr (kPackedMoves<L, S, T> && (kR == 2 || kR == 3)) {
          if (ds[3] == kR) {
            for_each_row_run(in_w, q0, q1, [&](int64_t q, int64_t m, int64_t y, int64_t x) {
              lanes_to_packed<kR>(ab + (q - q0) * L, m, d + y * ds[2] + x * kR);
            });
            return;
          }
        }
        for_each_pixel(in_w, q0, q1, [&](int64_t q, int64_t y, int64_t x) {
          lanes_to_pixel<kR>(ab + (q - q0) * L, rows, d + y * ds[2] + x * ds[3]);
        });
      });
    } else {
      store_planes<S>(dx, in_w, slot, n, s0, s1, ab, L, q0, q1);
    }
  }
}

// Writes a tile's dgrid, sums[g][i] * mult[g][i], for `count` pixels from p0
// of image n (volumes: a dgrid view whose depth and height merge into rows).
template <class S, int G = 2, class T>
inline void store_dgrid(const MutableTensorView& dgrid, int64_t out_w, int64_t n, int64_t p0, int count,
                        const T (*mult)[kTile], const T (*sums)[kTile]) {
  const Shape4& dgs = dgrid.strides;
  S* dgp = static_cast<S*>(dgrid.data) + n * dgs[0];
  if (dense_points<G>(dgs, out_w)) {
    store_points<G, S>(mult, sums, count, dgp + G * p0);
    return;
  }
  int64_t h = p0 / out_w, w = p0 % out_w;
  for (int i = 0; i < count; ++i) {
    S* d = dgp + h * dgs[1] + w * dgs[2];
    for (int g = 0; g < G; ++g) d[g * dgs[3]] = store<S>(mult[g][i] * sums[g][i]);
    if (++w == out_w) {
      w = 0;
      ++h;
    }
  }
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace gridsampler::cpu
HWY_AFTER_NAMESPACE();

#endif  // GRIDSAMPLER_CPU_LAYOUT_INL_H_
