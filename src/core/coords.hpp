// The coordinate policy: the one place that says how a grid value becomes a
// pixel coordinate (unnormalise, then pad by clipping or reflecting), what
// its derivative is, and how bicubic weights are formed. Shared by the
// reference and the CPU kernels' scalar paths; everything here is a plain
// function of scalars.
//
// Semantics are PyTorch's grid_sampler_2d (ATen/native/GridSampler.h), with
// the decisions of docs/design.md §2 where PyTorch has none:
//   * T is the coordinate type: float for float16, bfloat16 and float32,
//     double for float64. Every step is done in T, like PyTorch, so floor and
//     round pick the same pixel as PyTorch does, ties included.
//   * Non-finite coordinates: border maps NaN and -Inf to 0 and +Inf to
//     size-1; reflection maps NaN and +-Inf to 0; zeros samples nothing. Their
//     coordinate gradient is 0.
//   * A coordinate too large for an index becomes kFarAway, which is out of
//     bounds for every image and stays so after adding a tap offset; it is
//     never converted with undefined behaviour.
#pragma once

#include <cmath>
#include <cstdint>

#include "gridsampler/gridsampler.hpp"

namespace gridsampler::coords {

// Images are at most kMaxExtent pixels along an axis (checked by validation),
// so kFarAway plus or minus a few taps is outside every image.
inline constexpr int64_t kMaxExtent = int64_t{1} << 40;
inline constexpr int64_t kFarAway = -(int64_t{1} << 50);

// floor(v) or nearbyint(v) as an index; kFarAway when v is not finite or too
// large to matter.
template <class T>
inline int64_t to_index(T v) {
  constexpr T kLimit = static_cast<T>(int64_t{1} << 48);
  if (!(v > -kLimit && v < kLimit)) return kFarAway;
  return static_cast<int64_t>(v);
}

inline bool in_bounds(int64_t y, int64_t x, int64_t height, int64_t width) {
  return y >= 0 && y < height && x >= 0 && x < width;
}

// [-1, 1] -> pixel coordinates. align_corners: -1 and 1 are the centres of
// the first and last pixels; otherwise they are the outer edges.
template <class T>
inline T unnormalize(T coord, int64_t size, bool align_corners) {
  if (align_corners) return ((coord + 1) / 2) * static_cast<T>(size - 1);
  return ((coord + 1) * static_cast<T>(size) - 1) / 2;
}

// d unnormalize / d coord.
template <class T>
inline T unnormalize_slope(int64_t size, bool align_corners) {
  return align_corners ? static_cast<T>(size - 1) / 2 : static_cast<T>(size) / 2;
}

// Clips to [0, size-1]. The slope is 1 strictly inside and 0 on or beyond the
// border (PyTorch counts the border as outside for the gradient). NaN -> 0.
template <class T>
inline T clip(T in, int64_t size, T* slope) {
  const T max = static_cast<T>(size - 1);
  if (!(in > 0)) {
    *slope = 0;
    return 0;
  }
  if (in >= max) {
    *slope = 0;
    return max;
  }
  *slope = 1;
  return in;
}

// Reflects about twice_low/2 and twice_high/2 until inside that span; the
// slope is +1 or -1 (0 for an empty span or a non-finite input, which maps
// to 0). Same arithmetic as PyTorch, with the flip parity taken in T so huge
// finite inputs are well defined.
template <class T>
inline T reflect(T in, int64_t twice_low, int64_t twice_high, T* slope) {
  if (twice_low == twice_high || !std::isfinite(in)) {
    *slope = 0;
    return 0;
  }
  const T min = static_cast<T>(twice_low) / 2;
  const T span = static_cast<T>(twice_high - twice_low) / 2;
  T d = in - min;
  T sign = 1;
  if (d < 0) {
    sign = -1;
    d = -d;
  }
  // fmod is exact, so it is d itself below one span (the common case, and
  // much cheaper); the flip count keeps its rounded division either way.
  const T extra = d < span ? d : std::fmod(d, span);
  const T flips = std::floor(d / span);
  if (std::fmod(flips, T(2)) == 0) {
    *slope = sign;
    return extra + min;
  }
  *slope = -sign;
  return span - extra + min;
}

// Maps an unnormalised coordinate into the image as the padding mode says,
// and returns d(result)/d(in) in *slope.
template <Padding P, class T>
inline T pad(T in, int64_t size, bool align_corners, T* slope) {
  if constexpr (P == Padding::kZeros) {
    *slope = 1;
    return in;
  } else if constexpr (P == Padding::kBorder) {
    return clip(in, size, slope);
  } else {
    T refl_slope = 0;
    T clip_slope = 0;
    const T r = align_corners ? reflect(in, 0, 2 * (size - 1), &refl_slope)
                              : reflect(in, -1, 2 * size - 1, &refl_slope);
    const T out = clip(r, size, &clip_slope);
    *slope = refl_slope * clip_slope;
    return out;
  }
}

// Grid value -> padded pixel coordinate, with d(coordinate)/d(grid value).
// This is the source index for bilinear and nearest.
template <Padding P, class T>
inline T source_index(T coord, int64_t size, bool align_corners, T* grad_mult) {
  T slope = 0;
  const T out = pad<P>(unnormalize(coord, size, align_corners), size, align_corners, &slope);
  *grad_mult = unnormalize_slope<T>(size, align_corners) * slope;
  return out;
}

// Bicubic samples at the unpadded coordinate and pads each tap separately
// (tap_index), so padding adds no factor to the gradient. A non-finite
// coordinate cannot be interpolated: with border or reflection it is replaced
// by the point padding maps it to (where the bicubic weights are (0,1,0,0),
// the limit of the finite case) and its gradient is 0; with zeros every tap
// is out of bounds anyway.
template <Padding P, class T>
inline T bicubic_source(T coord, int64_t size, bool align_corners, T* grad_mult) {
  const T in = unnormalize(coord, size, align_corners);
  if (P != Padding::kZeros && !std::isfinite(in)) {
    T slope = 0;
    *grad_mult = 0;
    return pad<P>(in, size, align_corners, &slope);
  }
  *grad_mult = unnormalize_slope<T>(size, align_corners);
  return in;
}

// Pixel index of a bicubic tap at integral position `pos` (floor + offset).
template <Padding P, class T>
inline int64_t tap_index(T pos, int64_t size, bool align_corners) {
  T slope = 0;
  return to_index(pad<P>(pos, size, align_corners, &slope));
}

// Cubic convolution weights (Keys, A = -0.75) of the taps at t+1, t, 1-t,
// 2-t for the fraction t in [0, 1), written as in PyTorch's UpSample.h.
template <class T>
inline void cubic_weights(T t, T w[4]) {
  const T a = T(-0.75);
  auto near = [a](T x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };            // |x| <= 1
  auto far = [a](T x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };      // 1 < |x| < 2
  const T x1 = t;
  const T x2 = 1 - t;
  w[0] = far(x1 + 1);
  w[1] = near(x1);
  w[2] = near(x2);
  w[3] = far(x2 + 1);
}

// Minus the derivatives of cubic_weights with respect to t (PyTorch's
// get_cubic_coefficients_grad, with signed distances; see docs/design.md §2).
template <class T>
inline void cubic_weight_grads(T t, T g[4]) {
  const T a = T(-0.75);
  T x = -1 - t;
  g[0] = (-3 * a * x - 10 * a) * x - 8 * a;
  x = -t;
  g[1] = (-3 * (a + 2) * x - 2 * (a + 3)) * x;
  x = 1 - t;
  g[2] = (3 * (a + 2) * x - 2 * (a + 3)) * x;
  x = 2 - t;
  g[3] = (3 * a * x - 10 * a) * x + 8 * a;
}

// Second derivatives of cubic_weights with respect to t (no sign flip: two
// flips cancel). The Keys kernel is only C1, so these jump at the knots; at
// t = 0 they are the right-hand limits, as t = ix - floor(ix) picks them.
template <class T>
inline void cubic_weight_curvatures(T t, T h[4]) {
  const T a = T(-0.75);
  auto near = [a](T x) { return 6 * (a + 2) * x - 2 * (a + 3); };  // |x| <= 1
  auto far = [a](T x) { return 6 * a * x - 10 * a; };              // 1 < |x| < 2
  h[0] = far(t + 1);
  h[1] = near(t);
  h[2] = near(1 - t);
  h[3] = far(2 - t);
}

}  // namespace gridsampler::coords
