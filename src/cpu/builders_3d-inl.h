// Stencil builders for volumes: a tile of output voxels -> its taps
// (Tile<T, K, 3>: trilinear K = 8, nearest 1, tricubic 64). The same plan as
// the image builders (builders-inl.h), whose pieces they reuse: the grid is
// read through a view whose (Dout, Hout) merge into rows, each component is
// padded with source_index_lanes (the scalar policy's bits), and trilinear
// and nearest taps are then formed with vector code where that is exact;
// tricubic forms its taps with vector code throughout, as bicubic does.
// Everything else (the strided form, huge volumes, coordinates the vector
// code cannot do exactly) takes the scalar stencil (stencil.hpp,
// build_stencil_3d), one voxel at a time.

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
#if defined(GRIDSAMPLER_CPU_BUILDERS_3D_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GRIDSAMPLER_CPU_BUILDERS_3D_INL_H_
#undef GRIDSAMPLER_CPU_BUILDERS_3D_INL_H_
#else
#define GRIDSAMPLER_CPU_BUILDERS_3D_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace gridsampler::cpu {
namespace HWY_NAMESPACE {
namespace {

// Stores one voxel's stencil into the tile (flat index over merged rows
// z * Hin + y; strided offsets through the merged rows' stride).
template <bool kStrided, class T, int K>
inline void put_stencil_3d(const Stencil3<T, K>& s, int64_t i, int64_t plane, int64_t in_h, int64_t in_w,
                           const Shape4& in_strides, Tile<T, K, 3>* t) {
  for (int k = 0; k < K; ++k) {
    const bool ok = s.valid[k];
    const int64_t row = s.z[k] * in_h + s.y[k];
    if constexpr (kStrided) {
      t->valid[k][i] = ok;
      t->in_off[k][i] = ok ? row * in_strides[2] + s.x[k] * in_strides[3] : 0;
    }
    t->acc[k][i] = ok ? row * in_w + s.x[k] : plane;
    if constexpr (!kStrided && std::is_same_v<T, float>) t->acc32[k][i] = static_cast<int32_t>(t->acc[k][i]);
    t->w[k][i] = ok ? s.w[k] : T(0);
    for (int g = 0; g < 3; ++g) t->dw[g][k][i] = ok ? s.dw[g][k] : T(0);
  }
}

// trilinear_taps (stencil.hpp) vectorised over a tile's voxels, with the
// shortcuts of bilinear_taps_lanes: validity decided on the floored
// coordinates, flat indices in int32 for float (plane + Hin * Win + Win <
// 2^31) and in double for double. The products are formed in the scalar
// stencil's order, so the bits are its bits.
template <class DF, class VF = hwy::HWY_NAMESPACE::Vec<DF>>
HWY_INLINE LinearLanes<DF, 8, 3> trilinear_lanes(DF df, VF x, VF y, VF z, int64_t in_d, int64_t in_h, int64_t in_w) {
  namespace hn = hwy::HWY_NAMESPACE;
  using T = hn::TFromD<DF>;
  using MF = hn::Mask<DF>;
  const hn::RebindToSigned<DF> di;
  using TI = hn::TFromD<decltype(di)>;
  const auto zero = hn::Zero(df), one = hn::Set(df, T(1)), minus_one = hn::Set(df, T(-1));
  // The two taps' validity along an axis of `size` voxels.
  auto axis = [&](VF f, int64_t size, MF* lo, MF* hi) {
    *lo = hn::And(f >= zero, f <= hn::Set(df, static_cast<T>(size - 1)));
    *hi = hn::And(f >= minus_one, f <= hn::Set(df, static_cast<T>(size - 2)));
  };
  const VF fx = hn::Floor(x), fy = hn::Floor(y), fz = hn::Floor(z);
  VF wx[2], wy[2], wz[2];
  wx[1] = x - fx;
  wx[0] = one - wx[1];
  wy[1] = y - fy;
  wy[0] = one - wy[1];
  wz[1] = z - fz;
  wz[0] = one - wz[1];
  MF vx[2], vy[2], vz[2];
  axis(fx, in_w, &vx[0], &vx[1]);
  axis(fy, in_h, &vy[0], &vy[1]);
  axis(fz, in_d, &vz[0], &vz[1]);
  // Integral values in [-1, size - 1] where a tap may be valid, 0 elsewhere.
  const VF cx = hn::IfThenElseZero(hn::Or(vx[0], vx[1]), fx);
  const VF cy = hn::IfThenElseZero(hn::Or(vy[0], vy[1]), fy);
  const VF cz = hn::IfThenElseZero(hn::Or(vz[0], vz[1]), fz);
  LinearLanes<DF, 8, 3> t;
  t.row = t.col = zero;  // (not used for volumes)
  if constexpr (std::is_same_v<T, float>) {
    const auto row = hn::ConvertTo(di, cz) * hn::Set(di, static_cast<TI>(in_h)) + hn::ConvertTo(di, cy);
    t.base = row * hn::Set(di, static_cast<TI>(in_w)) + hn::ConvertTo(di, cx);
  } else {
    const VF row = hn::Add(hn::Mul(cz, hn::Set(df, static_cast<T>(in_h))), cy);
    t.base = hn::ConvertTo(di, hn::Add(hn::Mul(row, hn::Set(df, static_cast<T>(in_w))), cx));
  }
  for (int c = 0; c < 2; ++c) {
    for (int b = 0; b < 2; ++b) {
      for (int a = 0; a < 2; ++a) {
        const int k = c * 4 + b * 2 + a;
        t.valid[k] = hn::And(vz[c], hn::And(vy[b], vx[a]));
        const VF wxy = wx[a] * wy[b];
        t.w[k] = wxy * wz[c];
        // sign * wy * wz and so on: a sign flip, exact in either order.
        const VF dx = wy[b] * wz[c], dy = wx[a] * wz[c];
        t.dw[0][k] = a == 0 ? hn::Neg(dx) : dx;
        t.dw[1][k] = b == 0 ? hn::Neg(dy) : dy;
        t.dw[2][k] = c == 0 ? hn::Neg(wxy) : wxy;
      }
    }
  }
  return t;
}

template <class T>
inline void trilinear_taps_lanes(const T* ix, const T* iy, const T* iz, int count, int64_t in_d, int64_t in_h,
                                 int64_t in_w, bool derivatives, bool wide, Tile<T, 8, 3>* t) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<T> df;
  const hn::RebindToSigned<decltype(df)> di;
  using TI = hn::TFromD<decltype(di)>;
  const int n = static_cast<int>(hn::Lanes(df));
  const auto dummy = hn::Set(di, static_cast<TI>(in_d * in_h * in_w));
  TI* out[8];
  for (int k = 0; k < 8; ++k) out[k] = gather_indices(t, k);
  for (int i = 0; i < count; i += n) {
    const auto v = trilinear_lanes(df, hn::LoadU(df, ix + i), hn::LoadU(df, iy + i), hn::LoadU(df, iz + i), in_d,
                                   in_h, in_w);
    for (int k = 0; k < 8; ++k) {
      const auto valid = v.valid[k];
      const auto index = linear_tap_index(di, v.base, k, in_w, in_h * in_w);
      hn::StoreU(hn::IfThenElse(hn::RebindMask(di, valid), index, dummy), di, out[k] + i);
      hn::StoreU(hn::IfThenElseZero(valid, v.w[k]), df, t->w[k] + i);
      if (!derivatives) continue;
      for (int g = 0; g < 3; ++g) hn::StoreU(hn::IfThenElseZero(valid, v.dw[g][k]), df, t->dw[g][k] + i);
    }
  }
  if (wide) widen_indices(count, t);
}

// The tricubic taps of a tile's grid values: bicubic_taps_lanes
// (builders-inl.h) with a third axis, its pieces reused. Weights multiply
// x, y, then z, and the derivatives in the scalar stencil's order
// (build_stencil_3d), so the bits are its bits. Pixels marked in `fallback`
// (a coordinate not finite or |.| >= 2^22, a reflected tap outside after two
// folds) are left to the scalar stencil. Requires Din * Hin * Win + Hin * Win
// + Win < 2^31.
template <Padding P, bool kAlign>
inline void tricubic_taps_lanes(const float* grid_x, const float* grid_y, const float* grid_z, int count,
                                int64_t in_d, int64_t in_h, int64_t in_w, bool derivatives, bool wide,
                                Tile<float, 64, 3>* t, bool* fallback) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  using VF = hn::Vec<decltype(df)>;
  using VI = hn::Vec<decltype(di)>;
  using MI = hn::Mask<decltype(di)>;
  const int n = static_cast<int>(hn::Lanes(df));
  const auto limit = hn::Set(df, kCubicLanesLimit);
  const auto height = hn::Set(di, static_cast<int32_t>(in_h)), width = hn::Set(di, static_cast<int32_t>(in_w));
  const auto dummy = hn::Set(di, static_cast<int32_t>(in_d * in_h * in_w));
  const float* grid[3] = {grid_x, grid_y, grid_z};
  const int64_t size[3] = {in_w, in_h, in_d};  // x, y, z
  float mult[3];
  for (int c = 0; c < 3; ++c) mult[c] = coords::unnormalize_slope<float>(size[c], kAlign);
  for (int i = 0; i < count; i += n) {
    VF ic[3];
    for (int c = 0; c < 3; ++c) ic[c] = cubic_unnormalize<kAlign>(df, hn::LoadU(df, grid[c] + i), size[c]);
    // |ic| < 2^22 on every axis: NaN and infinities fail it.
    const auto ok = hn::And(hn::And(hn::Lt(hn::Abs(ic[0]), limit), hn::Lt(hn::Abs(ic[1]), limit)),
                            hn::Lt(hn::Abs(ic[2]), limit));
    VF w[3][4], g[3][4];
    VI pos[3][4];
    MI in[3][4];
    MI bad = hn::RebindMask(di, hn::Not(ok));
    for (int c = 0; c < 3; ++c) {
      const VF x = hn::IfThenElseZero(ok, ic[c]);
      const VF f = hn::Floor(x);
      // + 0: see bicubic_taps_lanes.
      const VF frac = hn::Add(hn::Sub(x, f), hn::Zero(df));
      cubic_weights_lanes(df, frac, w[c], derivatives ? g[c] : nullptr);
      pad_cubic_taps<P, kAlign>(di, hn::ConvertTo(di, f), size[c], pos[c], in[c], &bad);
      hn::StoreU(hn::Set(df, mult[c]), df, t->mult[c] + i);
    }
    alignas(64) int32_t bad_lanes[hn::MaxLanes(di)];
    hn::Store(hn::VecFromMask(di, bad), di, bad_lanes);
    for (int l = 0; l < n && i + l < kTile; ++l) fallback[i + l] = bad_lanes[l] != 0;
    for (int k = 0; k < 4; ++k) {
      const VI plane_row = hn::Mul(pos[2][k], height);
      for (int j = 0; j < 4; ++j) {
        const VI row = hn::Mul(hn::Add(plane_row, pos[1][j]), width);
        const MI zy = hn::And(in[2][k], in[1][j]);
        for (int a = 0; a < 4; ++a) {
          const int tap = (k * 4 + j) * 4 + a;
          const MI valid = hn::And(zy, in[0][a]);
          const auto valid_f = hn::RebindMask(df, valid);
          hn::StoreU(hn::IfThenElse(valid, hn::Add(row, pos[0][a]), dummy), di, t->acc32[tap] + i);
          const VF wxy = hn::Mul(w[0][a], w[1][j]);
          hn::StoreU(hn::IfThenElseZero(valid_f, hn::Mul(wxy, w[2][k])), df, t->w[tap] + i);
          if (!derivatives) continue;
          const VF dx = hn::Mul(hn::Mul(hn::Neg(g[0][a]), w[1][j]), w[2][k]);
          const VF dy = hn::Mul(hn::Mul(hn::Neg(g[1][j]), w[0][a]), w[2][k]);
          hn::StoreU(hn::IfThenElseZero(valid_f, dx), df, t->dw[0][tap] + i);
          hn::StoreU(hn::IfThenElseZero(valid_f, dy), df, t->dw[1][tap] + i);
          hn::StoreU(hn::IfThenElseZero(valid_f, hn::Mul(hn::Neg(g[2][k]), wxy)), df, t->dw[2][tap] + i);
        }
      }
    }
  }
  if (wide) widen_indices(count, t);
}

template <Interpolation M, Padding P, bool kAlign, bool kStrided, class S, class T, int K>
void fill_tile_3d(const TileSource& p, int64_t n, int64_t p0, int64_t count, Tile<T, K, 3>* t) {
  const Shape4& gs = p.grid_strides;
  const Shape4& out_strides = p.out_strides;
  const S* gr = static_cast<const S*>(p.grid) + n * gs[0];
  const int64_t plane = p.in_d * p.in_h * p.in_w;
  const int64_t size[3] = {p.in_d, p.in_h, p.in_w};
  t->count = static_cast<int>(count);
  t->pairs = M == Interpolation::kBilinear;
  // Each voxel's (x, y, z), and where its grad/output value goes, walking
  // the merged rows (Dout * Hout) of Wout voxels.
  T g[3][kTile];
  grid_points<3, S>(gr, gs, p.out_w, p0, count, g);
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
    // The padding policy per component, then the taps.
    T ic[3][kTile];
#if HWY_TARGET != HWY_SCALAR
    for (int c = 0; c < 3; ++c) {
      std::fill(g[c] + count, g[c] + kTile, T(0));
      if (p.derivatives) {
        source_index_lanes<P, kAlign, true>(g[c], static_cast<int>(count), size[2 - c], ic[c], t->mult[c]);
      } else {
        source_index_lanes<P, kAlign, false>(g[c], static_cast<int>(count), size[2 - c], ic[c], t->mult[c]);
      }
    }
    if constexpr (!kStrided) {
      constexpr bool kFloat = std::is_same_v<T, float>;
      constexpr int64_t kExact = int64_t{1} << (kFloat ? 24 : 53);
      constexpr int64_t kIndexLimit = int64_t{1} << (kFloat ? 31 : 53);
      if (p.in_w <= kExact && p.in_h <= kExact && p.in_d <= kExact && plane + p.in_h * p.in_w + p.in_w < kIndexLimit) {
        if constexpr (M == Interpolation::kBilinear) {
          trilinear_taps_lanes(ic[0], ic[1], ic[2], static_cast<int>(count), p.in_d, p.in_h, p.in_w, p.derivatives,
                               p.wide_indices, t);
        } else {
          const T* const padded[3] = {ic[0], ic[1], ic[2]};
          const int64_t size[3] = {p.in_w, p.in_h, p.in_d};
          nearest_taps_lanes<T, 3, P != Padding::kZeros>(padded, static_cast<int>(count), size, p.derivatives, p.wide_indices, t);
        }
        return;
      }
    }
#else
    for (int64_t i = 0; i < count; ++i) {
      for (int c = 0; c < 3; ++c) ic[c][i] = coords::source_index<P>(g[c][i], size[2 - c], kAlign, &t->mult[c][i]);
    }
#endif
    for (int64_t i = 0; i < count; ++i) {
      Stencil3<T, K> s;
      if constexpr (M == Interpolation::kBilinear) {
        trilinear_taps(ic[0][i], ic[1][i], ic[2][i], size, &s);
      } else {
        nearest_tap3(ic[0][i], ic[1][i], ic[2][i], size, &s);
      }
      put_stencil_3d<kStrided>(s, i, plane, p.in_h, p.in_w, p.in_strides, t);
    }
  } else {
    auto scalar_stencil = [&](int64_t i) {
      Stencil3<T, K> s;
      build_stencil_3d<M, P, kAlign>(g[0][i], g[1][i], g[2][i], size, &s);
      for (int c = 0; c < 3; ++c) t->mult[c][i] = s.mult[c];
      put_stencil_3d<kStrided>(s, i, plane, p.in_h, p.in_w, p.in_strides, t);
    };
#if HWY_TARGET != HWY_SCALAR
    if constexpr (!kStrided && std::is_same_v<T, float>) {
      if (plane + p.in_h * p.in_w + p.in_w < (int64_t{1} << 31)) {
        for (int c = 0; c < 3; ++c) std::fill(g[c] + count, g[c] + kTile, T(0));
        bool fallback[kTile];
        tricubic_taps_lanes<P, kAlign>(g[0], g[1], g[2], static_cast<int>(count), p.in_d, p.in_h, p.in_w,
                                       p.derivatives, p.wide_indices, t, fallback);
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

template <class S, Interpolation M, Padding P, bool kAlign, bool kStrided>
void build_tile_3d(const TileSource& src, int64_t n, int64_t p0, int64_t count, void* tile) {
  fill_tile_3d<M, P, kAlign, kStrided, S>(src, n, p0, count,
                                          static_cast<Tile<compute_t<S>, kTaps3<M>, 3>*>(tile));
}

template <class S, Interpolation M, Padding P, bool kAlign>
void fill_builders_3d(KernelTable* table) {
  auto& entry = table->build_3d[static_cast<int>(M)][static_cast<int>(P)][kAlign ? 1 : 0];
  entry[static_cast<int>(TapForm::kFlat)] = &build_tile_3d<S, M, P, kAlign, false>;
  entry[static_cast<int>(TapForm::kStrided)] = &build_tile_3d<S, M, P, kAlign, true>;
}

template <class S, Interpolation M>
void fill_builders_3d(KernelTable* table) {
  fill_builders_3d<S, M, Padding::kZeros, false>(table);
  fill_builders_3d<S, M, Padding::kZeros, true>(table);
  fill_builders_3d<S, M, Padding::kBorder, false>(table);
  fill_builders_3d<S, M, Padding::kBorder, true>(table);
  fill_builders_3d<S, M, Padding::kReflection, false>(table);
  fill_builders_3d<S, M, Padding::kReflection, true>(table);
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace gridsampler::cpu
HWY_AFTER_NAMESPACE();

#endif  // GRIDSAMPLER_CPU_BUILDERS_3D_INL_H_
