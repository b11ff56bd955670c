// The stencil builders (src/cpu/builders-inl.h) of every compiled SIMD
// target that this CPU runs, taken from the library's own kernel tables (so
// the code under test is the code that ships), against the scalar stencil
// (src/cpu/stencil.hpp, built on the coordinate policy of core/coords.hpp):
// every mode, padding, align_corners, tap form and grid dtype, on grids full
// of NaN, infinities, huge values, lattice points and pixel edges, and on
// calm grids (inside the image, and at the first reflection fold). Taps must
// match bit for bit. The volume builders (builders_3d-inl.h) likewise,
// against build_stencil_3d.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "common/block_test_util.hpp"
#include "core/dtype.hpp"
#include "cpu/dispatch.hpp"
#include "cpu/stencil.hpp"
#include "cpu/tile.hpp"

namespace gridsampler::cpu {
namespace {

using gstest::Params;
using gstest::Rng;
using gstest::same_bits;

// A value of a calm grid: inside the image, where the vector reflection
// skips its fold when a whole vector needs none, or at the edge where the
// first fold starts (x or y = 1, one side or the other by an ulp of some
// dtype, and -3, one span below).
double calm_grid_value(Rng& rng) {
  static const double edges[] = {1.0,
                                 1 - std::ldexp(1.0, -53),
                                 1 - std::ldexp(1.0, -24),
                                 1 - std::ldexp(1.0, -23),
                                 1 + std::ldexp(1.0, -23),
                                 1 - std::ldexp(1.0, -11),
                                 1 - std::ldexp(1.0, -8),
                                 -1.0,
                                 -1 - std::ldexp(1.0, -23),
                                 -3.0};
  if (rng.below(8) != 0) return rng.uniform(-1, 1);
  return edges[rng.below(sizeof(edges) / sizeof(edges[0]))];
}

// A grid value of an awkward kind, or a plain one.
double grid_value(Rng& rng, int64_t size, bool align, bool calm = false) {
  if (calm) return calm_grid_value(rng);
  const double inf = std::numeric_limits<double>::infinity();
  const int64_t i = rng.below(size + 2) - 1;
  switch (rng.below(20)) {
    case 0: return std::nan("");
    case 1: return inf;
    case 2: return -inf;
    case 3: return rng.below(2) ? 1e30 : -1e30;
    case 4: return rng.uniform(-1, 1) * 1e7;  // past 2^22 pixels for any size here
    case 5: return static_cast<double>(rng.below(3)) - 1;  // -1, 0, 1
    case 6:  // a pixel centre (one beyond either end included)
      return align ? (size > 1 ? 2.0 * i / (size - 1) - 1 : 0.0) : (2.0 * i + 1) / size - 1;
    case 7:  // a pixel edge: a tie for nearest
      return align ? (size > 1 ? (2.0 * i + 1) / (size - 1) - 1 : 0.5) : 2.0 * i / size - 1;
    case 8: return rng.uniform(-5, 5);  // several reflections away
    case 9: return rng.uniform(-1, 1) * 3e3;  // thousands of reflections away
    case 10: {  // around the vector fold's limit of 2^21 pixels
      const double at = std::ldexp(rng.uniform(0.9, 1.1), 22) / static_cast<double>(size);
      return rng.below(2) ? at : -at;
    }
    case 11: {  // an exact multiple of the reflection span (a fold boundary)
      const double span = align ? static_cast<double>(size - 1) : static_cast<double>(size);
      const double pixel = span * static_cast<double>(rng.below(9));
      return align ? (size > 1 ? 2.0 * pixel / (size - 1) - 1 : 0.0) : (2.0 * pixel + 1) / size - 1;
    }
    default: return rng.uniform(-1.3, 1.3);
  }
}

template <class S, Interpolation M, Padding P, bool kAlign, bool kStrided>
void check_builder(BuildTileFn build, Rng& rng, int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w, bool dense_grid,
                   bool dense_out, bool derivatives = true, bool wide = true, bool calm = false) {
  using T = compute_t<S>;
  constexpr int K = kTaps<M>;
  const int64_t pixels = out_h * out_w, plane = in_h * in_w;
  // Grid (N = 2, image 1 is built): dense pairs, or x and y planes.
  std::vector<S> grid(2 * pixels * 2);
  const Shape4 gs = dense_grid ? Shape4{pixels * 2, out_w * 2, 2, 1} : Shape4{pixels * 2, out_w, 1, pixels};
  for (int64_t q = 0; q < 2 * pixels; ++q) {
    const int64_t n = q / pixels, h = q % pixels / out_w, w = q % out_w;
    S* g = grid.data() + n * gs[0] + h * gs[1] + w * gs[2];
    g[0] = store<S>(grid_value(rng, in_w, kAlign, calm));
    g[gs[3]] = store<S>(grid_value(rng, in_h, kAlign, calm));
  }
  TileSource src;
  src.grid = grid.data();
  src.grid_strides = gs;
  src.out_strides = dense_out ? Shape4{0, pixels, out_w, 1} : Shape4{0, 1, out_w * 7, 7};
  src.in_strides = Shape4{0, 0, in_w * 3 + 5, 3};
  src.in_h = in_h;
  src.in_w = in_w;
  src.derivatives = derivatives;
  src.wide_indices = wide;
  src.out_w = out_w;
  auto tile = std::make_unique<Tile<T, K>>();
  for (int64_t p0 = 0; p0 < pixels; p0 += kTile) {
    const int64_t count = std::min<int64_t>(kTile, pixels - p0);
    std::memset(static_cast<void*>(tile.get()), 0xff, sizeof(*tile));
    build(src, 1, p0, count, tile.get());
    ASSERT_EQ(tile->count, count);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t q = p0 + i, h = q / out_w, w = q % out_w;
      const S* g = grid.data() + gs[0] + h * gs[1] + w * gs[2];
      const T gx = load(g[0]), gy = load(g[gs[3]]);
      Stencil<T, K> s;
      build_stencil<M, P, kAlign>(gx, gy, in_h, in_w, &s);
      const std::string where = Params()("mode", static_cast<int>(M))("padding", static_cast<int>(P))(
                                    "align", kAlign)("strided", kStrided)("dtype", static_cast<int>(dtype_of<S>()))(
                                    "in", in_h)("x", in_w)("out", out_h)("x", out_w)("dense_grid", dense_grid)(
                                    "dense_out", dense_out)("pixel", q)("gx", gx)("gy", gy)
                                    .str();
      const int64_t out_off = dense_out ? q : h * src.out_strides[2] + w * src.out_strides[3];
      if (!dense_out || i == 0) {
        ASSERT_EQ(tile->out_off[i], out_off) << where;
      }
      ASSERT_EQ(tile->out_dense, dense_out) << where;
      // Without derivatives (a forward) the multipliers may be left unwritten.
      if (derivatives) {
        ASSERT_TRUE(same_bits(tile->mult[0][i], s.mult_x)) << where << tile->mult[0][i] << " vs " << s.mult_x;
        ASSERT_TRUE(same_bits(tile->mult[1][i], s.mult_y)) << where << tile->mult[1][i] << " vs " << s.mult_y;
      }
      for (int k = 0; k < K; ++k) {
        const bool ok = s.valid[k];
        const std::string tap = where + " tap=" + std::to_string(k);
        const int64_t flat = ok ? s.y[k] * in_w + s.x[k] : plane;
        if (wide || !std::is_same_v<T, float>) {
          ASSERT_EQ(tile->acc[k][i], flat) << tap;
        }
        if constexpr (!kStrided && std::is_same_v<T, float>) {
          ASSERT_EQ(tile->acc32[k][i], flat) << tap;
        }
        ASSERT_TRUE(same_bits(tile->w[k][i], ok ? s.w[k] : T(0))) << tap << " w " << tile->w[k][i] << " vs " << s.w[k];
        if (!derivatives) continue;  // (dw may be left unwritten)
        ASSERT_TRUE(same_bits(tile->dw[0][k][i], ok ? s.dw_dx[k] : T(0)))
            << tap << " dw/dx " << tile->dw[0][k][i] << " vs " << s.dw_dx[k];
        ASSERT_TRUE(same_bits(tile->dw[1][k][i], ok ? s.dw_dy[k] : T(0)))
            << tap << " dw/dy " << tile->dw[1][k][i] << " vs " << s.dw_dy[k];
        if constexpr (kStrided) {
          ASSERT_EQ(tile->valid[k][i], ok) << tap;
          ASSERT_EQ(tile->in_off[k][i], ok ? s.y[k] * src.in_strides[2] + s.x[k] * src.in_strides[3] : 0) << tap;
        }
      }
    }
  }
}

template <class S, Interpolation M, Padding P, bool kAlign>
void check_modes(Rng& rng) {
  const KernelTable table = kernels(dtype_of<S>());
  const BuildTileFn* forms = table.build[static_cast<int>(M)][static_cast<int>(P)][kAlign ? 1 : 0];
  const BuildTileFn flat = forms[static_cast<int>(TapForm::kFlat)];
  const BuildTileFn strided = forms[static_cast<int>(TapForm::kStrided)];
  ASSERT_TRUE(flat != nullptr && strided != nullptr);
  // Sizes from 1 pixel to wide rows; output sizes not multiples of kTile
  // nor of any vector length.
  const int64_t sizes[][4] = {{1, 1, 3, 5}, {1, 7, 9, 13}, {5, 3, 11, 17}, {17, 33, 8, 15}, {64, 64, 10, 31}, {3, 200, 2, 77}};
  for (const auto& sz : sizes) {
    for (int layout = 0; layout < 4; ++layout) {
      check_builder<S, M, P, kAlign, false>(flat, rng, sz[0], sz[1], sz[2], sz[3], layout & 1, layout & 2);
      check_builder<S, M, P, kAlign, false>(flat, rng, sz[0], sz[1], sz[2], sz[3], layout & 1, layout & 2, false, false);
      check_builder<S, M, P, kAlign, true>(strided, rng, sz[0], sz[1], sz[2], sz[3], layout & 1, layout & 2);
      check_builder<S, M, P, kAlign, false>(flat, rng, sz[0], sz[1], sz[2], sz[3], layout & 1, layout & 2, true, true,
                                            true);
      check_builder<S, M, P, kAlign, true>(strided, rng, sz[0], sz[1], sz[2], sz[3], layout & 1, layout & 2, true, true,
                                           true);
    }
  }
}

// The volume builders (builders_3d-inl.h) likewise, against build_stencil_3d:
// voxels' flat indices (z * Hin + y) * Win + x, three weight derivatives and
// three coordinate factors.
template <class S, Interpolation M, Padding P, bool kAlign, bool kStrided>
void check_builder_3d(BuildTileFn build, Rng& rng, const int64_t in[3], int64_t out_rows, int64_t out_w,
                      bool dense_grid, bool derivatives, bool wide, bool calm = false) {
  using T = compute_t<S>;
  constexpr int K = kTaps3<M>;
  const int64_t pixels = out_rows * out_w, plane = in[0] * in[1] * in[2];
  // The grid as the kernels see it: (N = 2, Dout * Hout rows, Wout, 3),
  // dense points or three component planes; image 1 is built.
  std::vector<S> grid(2 * pixels * 3);
  const Shape4 gs = dense_grid ? Shape4{pixels * 3, out_w * 3, 3, 1} : Shape4{pixels * 3, out_w, 1, pixels};
  for (int64_t q = 0; q < 2 * pixels; ++q) {
    const int64_t n = q / pixels, h = q % pixels / out_w, w = q % out_w;
    S* g = grid.data() + n * gs[0] + h * gs[1] + w * gs[2];
    for (int c = 0; c < 3; ++c) g[c * gs[3]] = store<S>(grid_value(rng, in[2 - c], kAlign, calm));
  }
  TileSource src;
  src.grid = grid.data();
  src.grid_strides = gs;
  src.out_strides = Shape4{0, pixels, out_w, 1};
  src.in_strides = Shape4{0, 0, in[2] * 3 + 5, 3};  // merged (z, y) rows
  src.in_d = in[0];
  src.in_h = in[1];
  src.in_w = in[2];
  src.derivatives = derivatives;
  src.wide_indices = wide;
  src.out_w = out_w;
  auto tile = std::make_unique<Tile<T, K, 3>>();
  for (int64_t p0 = 0; p0 < pixels; p0 += kTile) {
    const int64_t count = std::min<int64_t>(kTile, pixels - p0);
    std::memset(static_cast<void*>(tile.get()), 0xff, sizeof(*tile));
    build(src, 1, p0, count, tile.get());
    ASSERT_EQ(tile->count, count);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t q = p0 + i, h = q / out_w, w = q % out_w;
      const S* g = grid.data() + gs[0] + h * gs[1] + w * gs[2];
      const T gx = load(g[0]), gy = load(g[gs[3]]), gz = load(g[2 * gs[3]]);
      Stencil3<T, K> s;
      build_stencil_3d<M, P, kAlign>(gx, gy, gz, in, &s);
      const std::string where = Params()("mode", static_cast<int>(M))("padding", static_cast<int>(P))(
                                    "align", kAlign)("strided", kStrided)("dtype", static_cast<int>(dtype_of<S>()))(
                                    "in", in[0])("x", in[1])("x", in[2])("dense_grid", dense_grid)(
                                    "derivatives", derivatives)("voxel", q)("gx", gx)("gy", gy)("gz", gz)
                                    .str();
      ASSERT_TRUE(tile->out_dense) << where;
      if (i == 0) {
        ASSERT_EQ(tile->out_off[i], q) << where;  // (dense: the rest follow)
      }
      for (int c = 0; c < 3 && derivatives; ++c) {
        ASSERT_TRUE(same_bits(tile->mult[c][i], s.mult[c])) << where << " mult " << c;
      }
      for (int k = 0; k < K; ++k) {
        const bool ok = s.valid[k];
        const std::string tap = where + " tap=" + std::to_string(k);
        const int64_t flat = ok ? (s.z[k] * in[1] + s.y[k]) * in[2] + s.x[k] : plane;
        if (wide || !std::is_same_v<T, float>) {
          ASSERT_EQ(tile->acc[k][i], flat) << tap;
        }
        if constexpr (!kStrided && std::is_same_v<T, float>) {
          ASSERT_EQ(tile->acc32[k][i], flat) << tap;
        }
        ASSERT_TRUE(same_bits(tile->w[k][i], ok ? s.w[k] : T(0))) << tap << " w " << tile->w[k][i] << " vs " << s.w[k];
        if constexpr (kStrided) {
          ASSERT_EQ(tile->valid[k][i], ok) << tap;
          ASSERT_EQ(tile->in_off[k][i], ok ? (s.z[k] * in[1] + s.y[k]) * src.in_strides[2] + s.x[k] * src.in_strides[3] : 0)
              << tap;
        }
        if (!derivatives) continue;  // (dw may be left unwritten)
        for (int c = 0; c < 3; ++c) {
          ASSERT_TRUE(same_bits(tile->dw[c][k][i], ok ? s.dw[c][k] : T(0)))
              << tap << " dw/d" << c << " " << tile->dw[c][k][i] << " vs " << s.dw[c][k];
        }
      }
    }
  }
}

template <class S, Interpolation M, Padding P, bool kAlign>
void check_modes_3d(Rng& rng) {
  const KernelTable table = kernels(dtype_of<S>());
  const BuildTileFn* forms = table.build_3d[static_cast<int>(M)][static_cast<int>(P)][kAlign ? 1 : 0];
  const BuildTileFn flat = forms[static_cast<int>(TapForm::kFlat)];
  const BuildTileFn strided = forms[static_cast<int>(TapForm::kStrided)];
  ASSERT_TRUE(flat != nullptr && strided != nullptr);
  // (Din, Hin, Win, output rows, Wout): size-1 axes, flat volumes, output
  // counts not multiples of kTile nor of any vector length.
  const int64_t sizes[][5] = {{1, 1, 1, 3, 5}, {1, 7, 9, 2, 13}, {5, 3, 1, 11, 7}, {9, 17, 33, 3, 29}, {40, 2, 3, 1, 70}};
  for (const auto& sz : sizes) {
    for (int dense = 0; dense < 2; ++dense) {
      check_builder_3d<S, M, P, kAlign, false>(flat, rng, sz, sz[3], sz[4], dense, true, true);
      check_builder_3d<S, M, P, kAlign, false>(flat, rng, sz, sz[3], sz[4], dense, false, false);
      check_builder_3d<S, M, P, kAlign, true>(strided, rng, sz, sz[3], sz[4], dense, true, true);
      check_builder_3d<S, M, P, kAlign, false>(flat, rng, sz, sz[3], sz[4], dense, true, true, true);
    }
  }
}

template <class F>
void for_each_mode(F&& f) {
  f(std::integral_constant<Interpolation, Interpolation::kBilinear>{});
  f(std::integral_constant<Interpolation, Interpolation::kNearest>{});
  f(std::integral_constant<Interpolation, Interpolation::kBicubic>{});
}

// Every padding and align_corners of one mode, for images or volumes.
template <bool kVolume, class S, Interpolation M, Padding P>
void check_aligns(Rng& rng) {
  if constexpr (kVolume) {
    check_modes_3d<S, M, P, false>(rng);
    check_modes_3d<S, M, P, true>(rng);
  } else {
    check_modes<S, M, P, false>(rng);
    check_modes<S, M, P, true>(rng);
  }
}

template <bool kVolume, class S>
void check_dtype(uint64_t seed) {
  Rng rng(seed);
  for_each_mode([&](auto mode) {
    constexpr Interpolation M = decltype(mode)::value;
    check_aligns<kVolume, S, M, Padding::kZeros>(rng);
    check_aligns<kVolume, S, M, Padding::kBorder>(rng);
    check_aligns<kVolume, S, M, Padding::kReflection>(rng);
  });
}

// Runs `check` once for every compiled SIMD target this CPU supports.
template <class F>
void for_each_target(F&& check) {
  const int64_t all = available_targets();
  ASSERT_NE(all, 0);
  for (int64_t rest = all; rest != 0; rest &= rest - 1) {
    const int64_t target = rest & -rest;
    force_targets(target);
    ASSERT_EQ(current_target(), target);
    SCOPED_TRACE(std::string("SIMD target ") + target_name(target));
    check();
  }
  force_targets(0);
}

TEST(Builders, Float) { for_each_target([] { check_dtype<false, float>(1); }); }
TEST(Builders, Double) { for_each_target([] { check_dtype<false, double>(2); }); }
TEST(Builders, Half) { for_each_target([] { check_dtype<false, Half>(3); }); }
TEST(Builders, BFloat16) { for_each_target([] { check_dtype<false, BFloat16>(4); }); }
TEST(Builders, VolumeFloat) { for_each_target([] { check_dtype<true, float>(5); }); }
TEST(Builders, VolumeDouble) { for_each_target([] { check_dtype<true, double>(6); }); }
TEST(Builders, VolumeHalf) { for_each_target([] { check_dtype<true, Half>(7); }); }
TEST(Builders, VolumeBFloat16) { for_each_target([] { check_dtype<true, BFloat16>(8); }); }

}  // namespace
}  // namespace gridsampler::cpu
