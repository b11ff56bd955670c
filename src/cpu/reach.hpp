// Which input rows a run of output pixels can reach, estimated from the grid
// alone, before any stencil is built: a sliding window of accumulators
// (window-inl.h) writes out the rows that no later tile can reach and reuses
// their memory. Rows are the merged rows of plan.hpp (volumes: z * Hin + y).
//
// An estimate, not a promise: the drivers check every built tile's taps
// against the window and redo the task without one where a tile reaches
// outside it. The estimate is made wide enough that this never happens for
// the coordinate rules of coords.hpp: each component's reach is taken from
// the smallest and largest grid value of the run (unnormalising and
// clipping are monotone), widened by the stencil's extent and by
// `margin` rows more for rounding, and, for reflection, by the mirror
// images of what lies beyond an edge; where a value is not finite, too
// large to place, or folds more than once, the whole axis.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/coords.hpp"
#include "core/dtype.hpp"
#include "core/validate.hpp"
#include "cpu/tile.hpp"

namespace gridsampler::cpu {

// Rows [lo, hi) of an input; empty (lo >= hi) when nothing is reached.
struct RowSpan {
  int64_t lo = 0, hi = 0;
  bool empty() const { return lo >= hi; }
};

// The inclusive index range [*lo, *hi] along one axis of `size` pixels that
// taps of coordinates with grid values in [mn, mx] can reach; false when
// they reach nothing (zeros padding, every tap outside).
template <class T>
inline bool axis_reach(T mn, T mx, bool finite, int64_t size, const Options& o, int64_t margin, int64_t* lo,
                       int64_t* hi) {
  const int64_t last = size - 1;
  *lo = 0;
  *hi = last;
  if (!finite) return true;
  T u0 = coords::unnormalize(mn, size, o.align_corners);
  T u1 = coords::unnormalize(mx, size, o.align_corners);
  const T limit = static_cast<T>(coords::kMaxExtent);
  if (!(u0 > -limit && u1 < limit)) return true;
  if (o.padding == Padding::kBorder) {  // (bilinear's second tap then stays in reach)
    u0 = std::clamp(u0, T(0), static_cast<T>(last));
    u1 = std::clamp(u1, T(0), static_cast<T>(last));
  }
  // Taps before padding: floor - 1 to floor + 2 (bicubic), floor to
  // floor + 1 (bilinear, and nearest's rounding).
  const bool cubic = o.interpolation == Interpolation::kBicubic;
  const int64_t a = static_cast<int64_t>(std::floor(u0)) - (cubic ? 1 : 0) - margin;
  const int64_t b = static_cast<int64_t>(std::floor(u1)) + (cubic ? 2 : 1) + margin;
  int64_t l = std::max<int64_t>(a, 0), h = std::min(b, last);
  if (o.padding == Padding::kReflection) {
    // Mirrored about the first and last pixels (align_corners) or the
    // image's edges: t -> low - t and high - t, within one fold.
    const int64_t low = o.align_corners ? 0 : -1, high = o.align_corners ? 2 * last : 2 * size - 1;
    if (low - a > last || high - b < 0) return true;
    if (a < 0) h = std::max(h, low - a);
    if (b > last) l = std::min(l, high - b);
  } else if (o.padding == Padding::kZeros && (b < 0 || a > last)) {
    return false;
  }
  *lo = std::clamp<int64_t>(l, 0, last);
  *hi = std::clamp<int64_t>(h, 0, last);
  return true;
}

// The merged input rows that output pixels [p0, p0 + count) of image n can
// reach: a grid of G components (y = 1, z = 2), S values, any strides.
template <int G, class S>
RowSpan reach_rows(const detail::Problem& p, const TensorView& grid, int64_t n, int64_t p0, int64_t count,
                   int64_t margin) {
  using T = compute_t<S>;
  const Shape4& s = grid.strides;
  const S* base = static_cast<const S*>(grid.data) + n * s[0];
  T mn[G], mx[G];
  for (int g = 1; g < G; ++g) {
    mn[g] = std::numeric_limits<T>::infinity();
    mx[g] = -std::numeric_limits<T>::infinity();
  }
  // Dense runs are scanned as flat arrays of kSpan values, a pattern of
  // components that repeats: plain loops that compilers vectorise (as a
  // strided scalar loop this took a tenth of a 3-channel volume's
  // backward). v - v is 0 for finite values and NaN otherwise, so `nans`
  // stays 0 exactly while every value is finite.
  constexpr int kSpan = 16 * G;
  alignas(64) T lo[kSpan], hi[kSpan], nans[kSpan];
  for (int j = 0; j < kSpan; ++j) {
    lo[j] = std::numeric_limits<T>::infinity();
    hi[j] = -std::numeric_limits<T>::infinity();
    nans[j] = 0;
  }
  auto take = [&](int j, T v) {
    lo[j] = v < lo[j] ? v : lo[j];
    hi[j] = v > hi[j] ? v : hi[j];
    nans[j] += v - v;
  };
  for_each_row_run(p.out_w, p0, p0 + count, [&](int64_t, int64_t m, int64_t y, int64_t x) {
    const S* row = base + y * s[1] + x * s[2];
    if (s[2] == G && s[3] == 1) {
      const int64_t total = m * G;
      int64_t i = 0;
      for (; i + kSpan <= total; i += kSpan) {
        for (int j = 0; j < kSpan; ++j) take(j, load(row[i + j]));
      }
      for (; i < total; ++i) take(static_cast<int>(i % G), load(row[i]));
    } else {
      for (int64_t i = 0; i < m; ++i) {
        for (int g = 0; g < G; ++g) take(g, load(row[i * s[2] + g * s[3]]));
      }
    }
  });
  // Lane j holds component j % G (kSpan is a multiple of G). A sum of the
  // lanes' 0s and NaNs is 0 exactly while all of them are 0.
  T nan_sum = 0;
  for (int j = 0; j < kSpan; j += G) {
    for (int g = 1; g < G; ++g) {
      mn[g] = std::min(mn[g], lo[j + g]);
      mx[g] = std::max(mx[g], hi[j + g]);
      nan_sum += nans[j + g];
    }
  }
  const bool finite = nan_sum == 0;
  int64_t y0 = 0, y1 = 0;
  if (!axis_reach(mn[1], mx[1], finite, p.in_h, p.options, margin, &y0, &y1)) return {};
  if constexpr (G == 3) {
    int64_t z0 = 0, z1 = 0;
    if (!axis_reach(mn[2], mx[2], finite, p.in_d, p.options, margin, &z0, &z1)) return {};
    return {z0 * p.in_h + y0, z1 * p.in_h + y1 + 1};
  } else {
    return {y0, y1 + 1};
  }
}

// The window a task over output pixels [p_begin, p_end) of image n needs,
// tile by tile (kTile pixels each, the last one shorter): keep[t] is the
// first row that tile t or any later tile can reach (all rows when none
// can). `rows` is the most rows live at once, from keep[t] to the furthest
// row a tile up to t can reach, or 0 when the window would hold more than
// `most` rows (the task then keeps whole planes); [lo, hi) the rows the
// task can reach at all.
struct WindowShape {
  int64_t rows = 0, lo = 0, hi = 0;
};

template <int G, class S>
WindowShape row_window(const detail::Problem& p, const TensorView& grid, int64_t n, int64_t p_begin, int64_t p_end,
                       int64_t margin, int64_t most, std::vector<int64_t>& keep) {
  const int64_t tiles = (p_end - p_begin + kTile - 1) / kTile;
  const int64_t rows = p.in_d * p.in_h;
  keep.resize(static_cast<std::size_t>(tiles));
  std::vector<int64_t> reach_hi(static_cast<std::size_t>(tiles));
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t p0 = p_begin + t * kTile;
    const RowSpan r = reach_rows<G, S>(p, grid, n, p0, std::min<int64_t>(kTile, p_end - p0), margin);
    keep[t] = r.empty() ? rows : r.lo;
    reach_hi[t] = r.empty() ? 0 : r.hi;
  }
  for (int64_t t = tiles - 1; t > 0; --t) keep[t - 1] = std::min(keep[t - 1], keep[t]);
  WindowShape w;
  int64_t need = 1, furthest = 0;
  for (int64_t t = 0; t < tiles; ++t) {
    furthest = std::max(furthest, reach_hi[t]);
    need = std::max(need, furthest - keep[t]);
    if (need > most) return w;
  }
  w.rows = need;
  w.lo = tiles > 0 ? std::min(keep[0], furthest) : 0;
  w.hi = furthest;
  return w;
}
}  // namespace gridsampler::cpu
