// The stencil builders (src/cpu/builders-inl.h) of every compiled SIMD
// target that this CPU runs, taken from the library's own kernel tables (so
// the code under test is the code that ships), against the scalar stencil
// (src/cpu/stencil.hpp, built on the coordinate policy of core/coords.hpp):
// every mode, padding, align_corners, tap form and grid dtype, on grids full
// of NaN, infinities, huge values, lattice points and pixel edges, and on
// calm grids (inside the image, and at the first reflection fold), and grids
// within four reflection spans, fold boundaries included (where the vector
// fold's rounded quotient decides the flip count). Taps must
// match bit for bit. The volume builders (builders_3d-inl.h) likewise,
// against build_stencil_3d.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
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

// What a test grid holds.
enum class GridKind { kAwkward, kCalm, kFolds };

// A value of a grid whose coordinates all lie within four reflection spans
// of the low end: uniform, or at a fold boundary (m = 0..3 spans out, either
// side of the image) moved by about a float ulp or not at all.
double folds_grid_value(Rng& rng, int64_t size, bool align) {
  if (rng.below(2) == 0) return rng.uniform(-6.5, 6.5);
  const double span = align ? static_cast<double>(size - 1) : static_cast<double>(size);
  const double m = static_cast<double>(rng.below(4)) * (rng.below(2) ? 1 : -1);
  const double pixel = (align ? 0.0 : -0.5) + m * span;
  const double g = align ? (size > 1 ? 2.0 * pixel / (size - 1) - 1 : 0.0) : (2.0 * pixel + 1) / size - 1;
  return g * (1 + static_cast<double>(rng.below(3) - 1) * 0x1p-23);
}

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
double grid_value(Rng& rng, int64_t size, bool align, GridKind kind = GridKind::kAwkward) {
  if (kind == GridKind::kCalm) return calm_grid_value(rng);
  if (kind == GridKind::kFolds) return folds_grid_value(rng, size, align);
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

// One pixel's taps as the scalar stencil makes them, in a tile's terms: an
// invalid tap has weight and derivatives 0, flat index `plane` and offset 0.
template <class T>
struct Expected {
  int64_t flat[64], in_off[64];
  bool valid[64];
  T w[64], dw[3][64], mult[3];
};

// What one builder call was asked for, and where pixel i's output lies.
struct Asked {
  bool derivatives, wide, strided, dense_out;
  int64_t out_off;  // checked where the outputs are not dense, and for pixel 0
};

std::string number(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

// The first difference between pixel i of `tile` and `e`, or "" where all
// agree bit for bit. Templated on the tile only (not on mode, padding or
// dtype), and building a message only for a difference: the checks cost
// little to compile and to run.
template <class T, int K, int G>
std::string mismatch(const Tile<T, K, G>& tile, int64_t i, const Expected<T>& e, const Asked& a) {
  constexpr bool kFloat = std::is_same_v<T, float>;
  const auto differ = [](const std::string& what, double got, double want) {
    return what + ": " + number(got) + " vs " + number(want);
  };
  if (tile.out_dense != a.dense_out) return differ("out_dense", tile.out_dense, a.dense_out);
  if ((!a.dense_out || i == 0) && tile.out_off[i] != a.out_off) return differ("out_off", tile.out_off[i], a.out_off);
  // Without derivatives (a forward) the multipliers and dw may be left unwritten.
  for (int c = 0; c < G && a.derivatives; ++c) {
    if (!same_bits(tile.mult[c][i], e.mult[c])) return differ("mult " + std::to_string(c), tile.mult[c][i], e.mult[c]);
  }
  for (int k = 0; k < K; ++k) {
    const auto tap = [&](const std::string& what, double got, double want) {
      return differ("tap " + std::to_string(k) + " " + what, got, want);
    };
    if ((a.wide || !kFloat) && tile.acc[k][i] != e.flat[k]) return tap("acc", tile.acc[k][i], e.flat[k]);
    if (!a.strided && kFloat && tile.acc32[k][i] != e.flat[k]) return tap("acc32", tile.acc32[k][i], e.flat[k]);
    if (a.strided && tile.valid[k][i] != e.valid[k]) return tap("valid", tile.valid[k][i], e.valid[k]);
    if (a.strided && tile.in_off[k][i] != e.in_off[k]) return tap("in_off", tile.in_off[k][i], e.in_off[k]);
    if (!same_bits(tile.w[k][i], e.w[k])) return tap("w", tile.w[k][i], e.w[k]);
    for (int c = 0; c < G && a.derivatives; ++c) {
      if (!same_bits(tile.dw[c][k][i], e.dw[c][k])) {
        return tap("dw/d" + std::to_string(c), tile.dw[c][k][i], e.dw[c][k]);
      }
    }
  }
  return "";
}

std::string where(Interpolation m, Padding p, bool align, bool strided, DType dtype, const int64_t* in, int dims,
                  int64_t out_rows, int64_t out_w, bool dense_grid, bool dense_out, bool derivatives, int64_t pixel,
                  const double* g) {
  Params w;
  w("mode", static_cast<int>(m))("padding", static_cast<int>(p))("align", align)("strided", strided)(
      "dtype", static_cast<int>(dtype));
  for (int d = 0; d < dims; ++d) w("in", in[d]);
  w("out_rows", out_rows)("out_w", out_w)("dense_grid", dense_grid)("dense_out", dense_out)(
      "derivatives", derivatives)("pixel", pixel);
  for (int d = 0; d < dims; ++d) w("g", number(g[d]));
  return w.str();
}

template <class S, Interpolation M, Padding P, bool kAlign>
void check_builder(BuildTileFn build, bool strided, Rng& rng, int64_t in_h, int64_t in_w, int64_t out_h,
                   int64_t out_w, bool dense_grid, bool dense_out, bool derivatives = true, bool wide = true,
                   GridKind kind = GridKind::kAwkward) {
  using T = compute_t<S>;
  constexpr int K = kTaps<M>;
  const int64_t pixels = out_h * out_w, plane = in_h * in_w;
  // Grid (N = 2, image 1 is built): dense pairs, or x and y planes.
  std::vector<S> grid(2 * pixels * 2);
  const Shape4 gs = dense_grid ? Shape4{pixels * 2, out_w * 2, 2, 1} : Shape4{pixels * 2, out_w, 1, pixels};
  for (int64_t q = 0; q < 2 * pixels; ++q) {
    const int64_t n = q / pixels, h = q % pixels / out_w, w = q % out_w;
    S* g = grid.data() + n * gs[0] + h * gs[1] + w * gs[2];
    g[0] = store<S>(grid_value(rng, in_w, kAlign, kind));
    g[gs[3]] = store<S>(grid_value(rng, in_h, kAlign, kind));
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
  auto e = std::make_unique<Expected<T>>();
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
      e->mult[0] = s.mult_x;
      e->mult[1] = s.mult_y;
      for (int k = 0; k < K; ++k) {
        const bool ok = s.valid[k];
        e->valid[k] = ok;
        e->flat[k] = ok ? s.y[k] * in_w + s.x[k] : plane;
        e->in_off[k] = ok ? s.y[k] * src.in_strides[2] + s.x[k] * src.in_strides[3] : 0;
        e->w[k] = ok ? s.w[k] : T(0);
        e->dw[0][k] = ok ? s.dw_dx[k] : T(0);
        e->dw[1][k] = ok ? s.dw_dy[k] : T(0);
      }
      const Asked asked{derivatives, wide, strided, dense_out,
                        dense_out ? q : h * src.out_strides[2] + w * src.out_strides[3]};
      const std::string diff = mismatch(*tile, i, *e, asked);
      if (!diff.empty()) {
        const int64_t in[2] = {in_h, in_w};
        const double at[2] = {static_cast<double>(gx), static_cast<double>(gy)};
        FAIL() << diff << " at " << where(M, P, kAlign, strided, dtype_of<S>(), in, 2, out_h, out_w, dense_grid,
                                           dense_out, derivatives, q, at);
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
      const bool dense_grid = layout & 1, dense_out = layout & 2;
      check_builder<S, M, P, kAlign>(flat, false, rng, sz[0], sz[1], sz[2], sz[3], dense_grid, dense_out);
      check_builder<S, M, P, kAlign>(flat, false, rng, sz[0], sz[1], sz[2], sz[3], dense_grid, dense_out, false, false);
      check_builder<S, M, P, kAlign>(strided, true, rng, sz[0], sz[1], sz[2], sz[3], dense_grid, dense_out);
      for (const GridKind kind : {GridKind::kCalm, GridKind::kFolds}) {
        check_builder<S, M, P, kAlign>(flat, false, rng, sz[0], sz[1], sz[2], sz[3], dense_grid, dense_out, true, true,
                                       kind);
        check_builder<S, M, P, kAlign>(strided, true, rng, sz[0], sz[1], sz[2], sz[3], dense_grid, dense_out, true,
                                       true, kind);
      }
    }
  }
}

// The volume builders (builders_3d-inl.h) likewise, against build_stencil_3d:
// voxels' flat indices (z * Hin + y) * Win + x, three weight derivatives and
// three coordinate factors.
template <class S, Interpolation M, Padding P, bool kAlign>
void check_builder_3d(BuildTileFn build, bool strided, Rng& rng, const int64_t in[3], int64_t out_rows, int64_t out_w,
                      bool dense_grid, bool derivatives, bool wide, GridKind kind = GridKind::kAwkward) {
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
    for (int c = 0; c < 3; ++c) g[c * gs[3]] = store<S>(grid_value(rng, in[2 - c], kAlign, kind));
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
  auto e = std::make_unique<Expected<T>>();
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
      for (int c = 0; c < 3; ++c) e->mult[c] = s.mult[c];
      for (int k = 0; k < K; ++k) {
        const bool ok = s.valid[k];
        const int64_t row = s.z[k] * in[1] + s.y[k];
        e->valid[k] = ok;
        e->flat[k] = ok ? row * in[2] + s.x[k] : plane;
        e->in_off[k] = ok ? row * src.in_strides[2] + s.x[k] * src.in_strides[3] : 0;
        e->w[k] = ok ? s.w[k] : T(0);
        for (int c = 0; c < 3; ++c) e->dw[c][k] = ok ? s.dw[c][k] : T(0);
      }
      // Dense outputs: only out_off[0] (= p0) is set.
      const std::string diff = mismatch(*tile, i, *e, Asked{derivatives, wide, strided, true, q});
      if (!diff.empty()) {
        const double at[3] = {static_cast<double>(gx), static_cast<double>(gy), static_cast<double>(gz)};
        FAIL() << diff << " at "
               << where(M, P, kAlign, strided, dtype_of<S>(), in, 3, out_rows, out_w, dense_grid, true, derivatives, q,
                        at);
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
      check_builder_3d<S, M, P, kAlign>(flat, false, rng, sz, sz[3], sz[4], dense, true, true);
      check_builder_3d<S, M, P, kAlign>(flat, false, rng, sz, sz[3], sz[4], dense, false, false);
      check_builder_3d<S, M, P, kAlign>(strided, true, rng, sz, sz[3], sz[4], dense, true, true);
      check_builder_3d<S, M, P, kAlign>(flat, false, rng, sz, sz[3], sz[4], dense, true, true, GridKind::kCalm);
      check_builder_3d<S, M, P, kAlign>(flat, false, rng, sz, sz[3], sz[4], dense, true, true, GridKind::kFolds);
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
