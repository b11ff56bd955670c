// The per-mode sampling stencil: for one output pixel, which input pixels
// (taps) it reads, with what weights, and the derivatives of those weights
// with respect to the pixel coordinates. Built from the coordinate policy
// (core/coords.hpp) with the modes as template parameters; used by the
// forward and the backward alike, so the two cannot disagree.
//
// Every tap is kept (K = 1, 4 or 16), in a fixed order; a tap outside the
// image is marked invalid, and the kernels neither read nor write through it
// (so a NaN or Inf elsewhere never leaks in through a zero weight).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/coords.hpp"
#include "gridsampler/gridsampler.hpp"

namespace gridsampler::cpu {

// Taps per output pixel of an image stencil (kTaps<M> at compile time).
constexpr int image_taps(Interpolation m) {
  return m == Interpolation::kBicubic ? 16 : m == Interpolation::kNearest ? 1 : 4;
}
template <Interpolation M>
inline constexpr int kTaps = image_taps(M);

template <class T, int K>
struct Stencil {
  int64_t y[K], x[K];
  bool valid[K];
  T w[K];      // interpolation weight
  T dw_dx[K];  // d w / d ix
  T dw_dy[K];  // d w / d iy
  T mult_x, mult_y;  // d ix / d grid x, d iy / d grid y (0 where not differentiable)
};

// Tap k of a stencil: pixel (ty, tx), valid when inside the image.
template <class T, int K>
inline void set_tap(Stencil<T, K>* s, int k, int64_t ty, int64_t tx, int64_t height, int64_t width, T w,
                    T dx, T dy) {
  s->y[k] = ty;
  s->x[k] = tx;
  s->valid[k] = coords::in_bounds(ty, tx, height, width);
  s->w[k] = w;
  s->dw_dx[k] = dx;
  s->dw_dy[k] = dy;
}

// The bilinear taps of padded source coordinates (ix, iy): split from
// build_stencil so that kernels can run it in a loop over pixels that the
// compiler vectorises.
template <class T>
inline void bilinear_taps(T ix, T iy, int64_t height, int64_t width, Stencil<T, 4>* s) {
  auto set = [&](int k, int64_t ty, int64_t tx, T w, T dx, T dy) {
    set_tap(s, k, ty, tx, height, width, w, dx, dy);
  };
  const T fx = std::floor(ix), fy = std::floor(iy);
  const int64_t x0 = coords::to_index(fx), y0 = coords::to_index(fy);
  // PyTorch's 1 - w, not (fx + 1) - ix: from 2^24 (float) fx + 1 rounds
  // back to fx, which made both weights 0 on axes that long. Below that the
  // two agree wherever the tap at fx is inside the image.
  const T west = ix - fx, east = T(1) - west;
  const T north = iy - fy, south = T(1) - north;
  set(0, y0, x0, south * east, -south, -east);
  set(1, y0, x0 + 1, south * west, south, -west);
  set(2, y0 + 1, x0, north * east, -north, east);
  set(3, y0 + 1, x0 + 1, north * west, north, west);
}

// The nearest tap (ties to even, as PyTorch's nearbyint) of padded source
// coordinates, likewise split from build_stencil.
template <class T>
inline void nearest_tap(T ix, T iy, int64_t height, int64_t width, Stencil<T, 1>* s) {
  set_tap(s, 0, coords::to_index(std::nearbyint(iy)), coords::to_index(std::nearbyint(ix)), height, width,
          T(1), T(0), T(0));
}

template <Interpolation M, Padding P, bool kAlign, class T>
inline void build_stencil(T gx, T gy, int64_t height, int64_t width, Stencil<T, kTaps<M>>* s) {
  auto set = [&](int k, int64_t ty, int64_t tx, T w, T dx, T dy) {
    set_tap(s, k, ty, tx, height, width, w, dx, dy);
  };
  if constexpr (M == Interpolation::kBicubic) {
    const T ix = coords::bicubic_source<P>(gx, width, kAlign, &s->mult_x);
    const T iy = coords::bicubic_source<P>(gy, height, kAlign, &s->mult_y);
    const T fx = std::floor(ix), fy = std::floor(iy);
    T cx[4], cy[4], gcx[4], gcy[4];
    coords::cubic_weights(ix - fx, cx);
    coords::cubic_weights(iy - fy, cy);
    coords::cubic_weight_grads(ix - fx, gcx);
    coords::cubic_weight_grads(iy - fy, gcy);
    int64_t tx[4];
    for (int i = 0; i < 4; ++i) tx[i] = coords::tap_index<P>(fx - 1 + i, width, kAlign);
    for (int j = 0; j < 4; ++j) {
      const int64_t ty = coords::tap_index<P>(fy - 1 + j, height, kAlign);
      for (int i = 0; i < 4; ++i) {
        set(j * 4 + i, ty, tx[i], cx[i] * cy[j], -gcx[i] * cy[j], -gcy[j] * cx[i]);
      }
    }
  } else {
    const T ix = coords::source_index<P>(gx, width, kAlign, &s->mult_x);
    const T iy = coords::source_index<P>(gy, height, kAlign, &s->mult_y);
    if constexpr (M == Interpolation::kNearest) {
      nearest_tap(ix, iy, height, width, s);
    } else {
      bilinear_taps(ix, iy, height, width, s);
    }
  }
}

// Volumes: the same stencils in three dimensions, each component unnormalised,
// padded and differentiated along its own axis by the same policy. Taps are
// ordered z, y, x (x fastest), so that taps 2j + 1 are the right-hand
// neighbours of taps 2j for trilinear, as the flat kernels' pairs want.
template <Interpolation M>
inline constexpr int kTaps3 = M == Interpolation::kBicubic ? 64 : M == Interpolation::kNearest ? 1 : 8;

template <class T, int K>
struct Stencil3 {
  int64_t z[K], y[K], x[K];
  bool valid[K];
  T w[K];
  T dw[3][K];   // d w / d ix, iy, iz
  T mult[3];    // d ix / d grid x, d iy / d grid y, d iz / d grid z
};

template <class T, int K>
inline void set_tap3(Stencil3<T, K>* s, int k, int64_t tz, int64_t ty, int64_t tx, const int64_t size[3], T w,
                     T dx, T dy, T dz) {
  s->z[k] = tz;
  s->y[k] = ty;
  s->x[k] = tx;
  s->valid[k] = tz >= 0 && tz < size[0] && coords::in_bounds(ty, tx, size[1], size[2]);
  s->w[k] = w;
  s->dw[0][k] = dx;
  s->dw[1][k] = dy;
  s->dw[2][k] = dz;
}

// The trilinear taps of padded source coordinates: bilinear_taps' weights
// along each axis (PyTorch's 1 - w), multiplied x, y, then z.
template <class T>
inline void trilinear_taps(T ix, T iy, T iz, const int64_t size[3], Stencil3<T, 8>* s) {
  const T fx = std::floor(ix), fy = std::floor(iy), fz = std::floor(iz);
  const int64_t x0 = coords::to_index(fx), y0 = coords::to_index(fy), z0 = coords::to_index(fz);
  const T wx[2] = {T(1) - (ix - fx), ix - fx};
  const T wy[2] = {T(1) - (iy - fy), iy - fy};
  const T wz[2] = {T(1) - (iz - fz), iz - fz};
  const T sign[2] = {T(-1), T(1)};
  for (int c = 0; c < 2; ++c) {
    for (int b = 0; b < 2; ++b) {
      for (int a = 0; a < 2; ++a) {
        const T wxy = wx[a] * wy[b];
        set_tap3(s, c * 4 + b * 2 + a, z0 + c, y0 + b, x0 + a, size, wxy * wz[c], sign[a] * wy[b] * wz[c],
                 sign[b] * wx[a] * wz[c], sign[c] * wxy);
      }
    }
  }
}

template <class T>
inline void nearest_tap3(T ix, T iy, T iz, const int64_t size[3], Stencil3<T, 1>* s) {
  set_tap3(s, 0, coords::to_index(std::nearbyint(iz)), coords::to_index(std::nearbyint(iy)),
           coords::to_index(std::nearbyint(ix)), size, T(1), T(0), T(0), T(0));
}

// size = {Din, Hin, Win}; grid values (gx, gy, gz) index W, H, D.
template <Interpolation M, Padding P, bool kAlign, class T>
inline void build_stencil_3d(T gx, T gy, T gz, const int64_t size[3], Stencil3<T, kTaps3<M>>* s) {
  if constexpr (M == Interpolation::kBicubic) {
    const T ix = coords::bicubic_source<P>(gx, size[2], kAlign, &s->mult[0]);
    const T iy = coords::bicubic_source<P>(gy, size[1], kAlign, &s->mult[1]);
    const T iz = coords::bicubic_source<P>(gz, size[0], kAlign, &s->mult[2]);
    const T fx = std::floor(ix), fy = std::floor(iy), fz = std::floor(iz);
    T cx[4], cy[4], cz[4], gcx[4], gcy[4], gcz[4];
    coords::cubic_weights(ix - fx, cx);
    coords::cubic_weights(iy - fy, cy);
    coords::cubic_weights(iz - fz, cz);
    coords::cubic_weight_grads(ix - fx, gcx);
    coords::cubic_weight_grads(iy - fy, gcy);
    coords::cubic_weight_grads(iz - fz, gcz);
    int64_t tx[4], ty[4], tz[4];
    for (int i = 0; i < 4; ++i) {
      tx[i] = coords::tap_index<P>(fx - 1 + i, size[2], kAlign);
      ty[i] = coords::tap_index<P>(fy - 1 + i, size[1], kAlign);
      tz[i] = coords::tap_index<P>(fz - 1 + i, size[0], kAlign);
    }
    for (int k = 0; k < 4; ++k) {
      for (int j = 0; j < 4; ++j) {
        for (int i = 0; i < 4; ++i) {
          const T wxy = cx[i] * cy[j];
          set_tap3(s, (k * 4 + j) * 4 + i, tz[k], ty[j], tx[i], size, wxy * cz[k], -gcx[i] * cy[j] * cz[k],
                   -gcy[j] * cx[i] * cz[k], -gcz[k] * wxy);
        }
      }
    }
  } else {
    const T ix = coords::source_index<P>(gx, size[2], kAlign, &s->mult[0]);
    const T iy = coords::source_index<P>(gy, size[1], kAlign, &s->mult[1]);
    const T iz = coords::source_index<P>(gz, size[0], kAlign, &s->mult[2]);
    if constexpr (M == Interpolation::kNearest) {
      nearest_tap3(ix, iy, iz, size, s);
    } else {
      trilinear_taps(ix, iy, iz, size, s);
    }
  }
}

}  // namespace gridsampler::cpu
