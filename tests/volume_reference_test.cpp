// The float64 reference for volumes checked on its own terms, independently
// of PyTorch: dgrid against central differences of the forward, dx through
// the adjoint identity, depth-1 volumes against the 2-D reference (which
// also pins the per-component rules for NaN, Inf and huge coordinates), any
// strides bit for bit, the identity grid, empty problems, 16-bit dtypes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gridsampler/gridsampler.hpp"
#include "host/tensor.hpp"
#include "reference/reference.hpp"

namespace gridsampler {
namespace {

using host::Tensor;
using host::VolumeTensor;

const Padding kPaddings[] = {Padding::kZeros, Padding::kBorder, Padding::kReflection};
const Interpolation kModes[] = {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic};
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

std::string describe(const Options& o) {
  return std::string(to_string(o.interpolation)) + "/" + std::string(to_string(o.padding)) +
         "/align=" + std::to_string(o.align_corners);
}

void fill_uniform(VolumeTensor* t, std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<std::size_t>(t->numel()));
  for (double& x : v) x = u(rng);
  t->assign(v);
}

struct Dims {
  int64_t n, c, in_d, in_h, in_w, out_d, out_h, out_w;
};

struct Volumes {
  Options options;
  VolumeTensor input, grid, grad;
};

Volumes random_problem(const Dims& d, DType dtype, const Options& o, uint64_t seed, double grid_range) {
  std::mt19937_64 rng(seed);
  Volumes p{o, VolumeTensor(dtype, {d.n, d.c, d.in_d, d.in_h, d.in_w}),
            VolumeTensor(dtype, {d.n, d.out_d, d.out_h, d.out_w, 3}),
            VolumeTensor(dtype, {d.n, d.c, d.out_d, d.out_h, d.out_w})};
  fill_uniform(&p.input, rng, -1, 1);
  fill_uniform(&p.grid, rng, -grid_range, grid_range);
  fill_uniform(&p.grad, rng, -1, 1);
  return p;
}

struct Results {
  VolumeTensor out, dx, dgrid;
};

// Forward and backward through the reference, outputs pre-filled with NaN
// (in the layout `strides_of` gives each output).
template <class StridesOf>
Results run(const Volumes& p, StridesOf strides_of, OutputMask mask = {}) {
  const DType dt = p.input.dtype();
  Results r{VolumeTensor(dt, p.grad.shape(), strides_of(p.grad.shape())),
            VolumeTensor(dt, p.input.shape(), strides_of(p.input.shape())),
            VolumeTensor(dt, p.grid.shape(), strides_of(p.grid.shape()))};
  r.out.fill(kNaN);
  r.dx.fill(kNaN);
  r.dgrid.fill(kNaN);
  Status s = reference::grid_sampler_3d(p.input.view(), p.grid.view(), r.out.mutable_view(), p.options);
  EXPECT_TRUE(s.ok()) << s.message();
  s = reference::grid_sampler_3d_backward(p.grad.view(), p.input.view(), p.grid.view(), r.dx.mutable_view(),
                                          r.dgrid.mutable_view(), p.options, mask);
  EXPECT_TRUE(s.ok()) << s.message();
  return r;
}
Results run(const Volumes& p) {
  return run(p, [](const Shape5& s) { return contiguous_strides_5d(s); });
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// <grad, forward(input, grid)>.
double loss(const Volumes& p, const VolumeTensor& input, const VolumeTensor& grid) {
  VolumeTensor out(DType::kFloat64, p.grad.shape());
  const Status s = reference::grid_sampler_3d(input.view(), grid.view(), out.mutable_view(), p.options);
  EXPECT_TRUE(s.ok()) << s.message();
  return dot(out.values(), p.grad.values());
}

double pixel(double g, int64_t size, bool align) {
  return align ? (g + 1) / 2 * double(size - 1) : ((g + 1) * double(size) - 1) / 2;
}

// Kinks of linear interpolation, of clipping and of reflection lie on
// multiples of 1/2 in pixel coordinates.
bool near_kink(double i) { return std::fabs(2 * i - std::nearbyint(2 * i)) < 0.04; }

TEST(VolumeFiniteDifferences, DgridMatchesCentralDifferences) {
  const Dims d{2, 2, 3, 4, 5, 2, 3, 2};
  for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kBicubic}) {
    for (Padding pad : kPaddings) {
      for (bool align : {false, true}) {
        const Options opt{mode, pad, align};
        const Volumes p = random_problem(d, DType::kFloat64, opt, 11, 1.6);
        const Results r = run(p);
        int checked = 0;
        for (int64_t n = 0; n < d.n; ++n)
          for (int64_t z = 0; z < d.out_d; ++z)
            for (int64_t y = 0; y < d.out_h; ++y)
              for (int64_t x = 0; x < d.out_w; ++x) {
                const int64_t sizes[3] = {d.in_w, d.in_h, d.in_d};
                bool kink = false;
                for (int k = 0; k < 3; ++k) kink = kink || near_kink(pixel(p.grid.get(n, z, y, x, k), sizes[k], align));
                if (kink) continue;
                for (int k = 0; k < 3; ++k) {
                  const double eps = 1e-6, v = p.grid.get(n, z, y, x, k);
                  VolumeTensor plus = p.grid, minus = p.grid;
                  plus.set(n, z, y, x, k, v + eps);
                  minus.set(n, z, y, x, k, v - eps);
                  const double fd = (loss(p, p.input, plus) - loss(p, p.input, minus)) / (2 * eps);
                  EXPECT_NEAR(r.dgrid.get(n, z, y, x, k), fd, 1e-6 * std::max(1.0, std::fabs(fd)))
                      << describe(opt) << " at n=" << n << " d=" << z << " h=" << y << " w=" << x << " k=" << k;
                }
                ++checked;
              }
        EXPECT_GE(checked, 4) << describe(opt);
      }
    }
  }
}

TEST(VolumeFiniteDifferences, NearestDgridIsZero) {
  for (Padding pad : kPaddings) {
    for (bool align : {false, true}) {
      const Volumes p = random_problem({2, 3, 3, 4, 5, 2, 3, 4}, DType::kFloat64,
                                       {Interpolation::kNearest, pad, align}, 5, 1.5);
      for (double v : run(p).dgrid.values()) EXPECT_EQ(v, 0.0);
    }
  }
}

// <dx, v> = <grad, forward(v, grid)> for any v: dx is the transpose of the
// forward's linear map in the input.
TEST(VolumeAdjoint, DxIsTransposeOfForward) {
  for (Interpolation mode : kModes) {
    for (Padding pad : kPaddings) {
      for (bool align : {false, true}) {
        const Options opt{mode, pad, align};
        const Volumes p = random_problem({2, 3, 4, 3, 5, 3, 2, 4}, DType::kFloat64, opt, 21, 1.8);
        const Results r = run(p);
        std::mt19937_64 rng(99);
        VolumeTensor v(DType::kFloat64, p.input.shape());
        fill_uniform(&v, rng, -1, 1);
        const double lhs = dot(r.dx.values(), v.values());
        const double rhs = loss(p, v, p.grid);
        EXPECT_NEAR(lhs, rhs, 1e-12 * std::max(1.0, std::fabs(rhs))) << describe(opt);
        EXPECT_GT(std::fabs(rhs), 1e-3) << describe(opt);  // not trivially zero
      }
    }
  }
}

// With align_corners, a grid on the voxel centres samples the input itself,
// and the backward hands grad straight back as dx. Distinct D, H and W make
// a mix-up of the axes show.
TEST(VolumeIdentity, AlignedIdentityGridCopies) {
  for (Interpolation mode : kModes) {
    for (Padding pad : kPaddings) {
      const Options opt{mode, pad, true};
      const Dims d{2, 2, 3, 4, 5, 3, 4, 5};
      Volumes p = random_problem(d, DType::kFloat64, opt, 4, 1);
      for (int64_t n = 0; n < d.n; ++n)
        for (int64_t z = 0; z < d.out_d; ++z)
          for (int64_t y = 0; y < d.out_h; ++y)
            for (int64_t x = 0; x < d.out_w; ++x) {
              p.grid.set(n, z, y, x, 0, -1 + 2.0 * x / (d.in_w - 1));
              p.grid.set(n, z, y, x, 1, -1 + 2.0 * y / (d.in_h - 1));
              p.grid.set(n, z, y, x, 2, -1 + 2.0 * z / (d.in_d - 1));
            }
      const Results r = run(p);
      const std::vector<double> in = p.input.values(), out = r.out.values();
      const std::vector<double> grad = p.grad.values(), dx = r.dx.values();
      for (std::size_t i = 0; i < in.size(); ++i) {
        ASSERT_NEAR(out[i], in[i], 1e-14) << describe(opt) << " element " << i;
        ASSERT_NEAR(dx[i], grad[i], 1e-14) << describe(opt) << " element " << i;
      }
    }
  }
}

// A copy of `t` with the given strides (any layout), same values.
VolumeTensor relayout(const VolumeTensor& t, const Shape5& strides) {
  VolumeTensor r(t.dtype(), t.shape(), strides);
  r.assign_from(t);
  return r;
}

// Results do not depend on the layout of any tensor, bit for bit.
TEST(VolumeLayouts, AnyStridesSameBits) {
  const auto channels_last = [](const Shape5& s) { return channels_last_strides_5d(s); };
  const auto negative = [](const Shape5& s) {
    Shape5 st = contiguous_strides_5d(s);
    st[4] = -st[4];
    st[2] = -st[2];
    return st;
  };
  const auto padded = [](const Shape5& s) {
    // Gaps after every dimension, and dimensions 2 and 3 in swapped order.
    const int64_t w = 2, d = 2 * s[4] + 1, h = d * (s[2] + 1), c = h * s[3] + 3, n = c * s[1] + 5;
    return Shape5{n, c, d, h, w};
  };
  for (Interpolation mode : kModes) {
    for (Padding pad : kPaddings) {
      for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
        const Options opt{mode, pad, false};
        const Volumes p = random_problem({2, 3, 3, 4, 5, 2, 3, 4}, dtype, opt, 8, 1.3);
        const Results want = run(p);
        for (int layout = 0; layout < 3; ++layout) {
          const auto strides_of = [&](const Shape5& s) {
            return layout == 0 ? channels_last(s) : layout == 1 ? negative(s) : padded(s);
          };
          const Volumes q{opt, relayout(p.input, strides_of(p.input.shape())),
                          relayout(p.grid, strides_of(p.grid.shape())), relayout(p.grad, strides_of(p.grad.shape()))};
          const Results got = run(q, strides_of);
          EXPECT_EQ(got.out.values(), want.out.values()) << describe(opt) << " layout " << layout;
          EXPECT_EQ(got.dx.values(), want.dx.values()) << describe(opt) << " layout " << layout;
          EXPECT_EQ(got.dgrid.values(), want.dgrid.values()) << describe(opt) << " layout " << layout;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// A volume with one size-1 axis against the 2-D reference. With Din = 1 and z
// neutral (iz = 0 exactly: any z with align_corners, z = 0 without), every
// mode samples the one depth slice with weight 1 and the other depth taps
// with weight 0, so the result is the 2-D sample at (x, y) bit for bit; with
// Hin = 1 and y neutral, it is the 2-D sample of the (D, W) image at (x, z).
// Grids full of NaN, +-Inf and +-1e30 then show that each component follows
// the 2-D rules on its own.

const double kHostile[] = {kNaN, kInf, -kInf, 1e30, -1e30, 2.5, -3.0, 0.999, -1.0, 1.0};

// Axis of the volume that has size 1: 2 (depth) or 3 (height).
struct SliceCase {
  int flat_axis;
  Options options;
  DType dtype;
};

void expect_matches_2d(const SliceCase& sc, uint64_t seed, bool hostile) {
  const Options& o = sc.options;
  const bool depth_flat = sc.flat_axis == 2;
  // The 2-D image is (N, C, A, W); A is H (depth flat) or D (height flat).
  const int64_t N = 2, C = 3, A = 4, W = 5, OA = 3, OW = 4, OD = 2;
  std::mt19937_64 rng(seed);
  Tensor image(sc.dtype, {N, C, A, W}), grid2(sc.dtype, {N, OD * OA, OW, 2}), grad2(sc.dtype, {N, C, OD * OA, OW});
  std::uniform_real_distribution<double> u(-1, 1), g(-1.4, 1.4);
  std::uniform_int_distribution<int> pick(0, 9);
  std::vector<double> iv(static_cast<std::size_t>(image.numel())), gv(static_cast<std::size_t>(grid2.numel())),
      dv(static_cast<std::size_t>(grad2.numel()));
  for (double& v : iv) v = u(rng);
  for (double& v : dv) v = u(rng);
  for (double& v : gv) v = hostile && pick(rng) < 4 ? kHostile[pick(rng)] : g(rng);
  image.assign(iv);
  grid2.assign(gv);
  grad2.assign(dv);

  // The volume: the image with a size-1 axis inserted, the grid with the
  // neutral component inserted; output voxels (d, a, w) <-> pixels (d*OA+a, w).
  const Shape5 in_shape = depth_flat ? Shape5{N, C, 1, A, W} : Shape5{N, C, A, 1, W};
  const Shape5 out_shape{N, C, OD, OA, OW};
  VolumeTensor input(sc.dtype, in_shape, host::Bytes(image.storage())), grad(sc.dtype, out_shape, host::Bytes(grad2.storage()));
  VolumeTensor grid(sc.dtype, {N, OD, OA, OW, 3});
  std::uniform_real_distribution<double> neutral(-1.5, 1.5);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < OD; ++d)
      for (int64_t a = 0; a < OA; ++a)
        for (int64_t w = 0; w < OW; ++w) {
          const double x = grid2.get(n, d * OA + a, w, 0), y = grid2.get(n, d * OA + a, w, 1);
          const double flat = o.align_corners ? neutral(rng) : 0.0;  // the flat axis's component
          grid.set(n, d, a, w, 0, x);
          grid.set(n, d, a, w, 1, depth_flat ? y : flat);
          grid.set(n, d, a, w, 2, depth_flat ? flat : y);
        }

  Tensor out2(sc.dtype, grad2.shape()), dx2(sc.dtype, image.shape()), dgrid2(sc.dtype, grid2.shape());
  ASSERT_TRUE(reference::grid_sampler_2d(image.view(), grid2.view(), out2.mutable_view(), o).ok());
  ASSERT_TRUE(reference::grid_sampler_2d_backward(grad2.view(), image.view(), grid2.view(), dx2.mutable_view(),
                                                  dgrid2.mutable_view(), o)
                  .ok());
  const Volumes p{o, input, grid, grad};
  const Results r = run(p);
  const std::string what = describe(o) + " " + std::string(to_string(sc.dtype)) +
                           (depth_flat ? " Din=1" : " Hin=1") + (hostile ? " hostile" : "");

  // out and dx hold the same elements in the same order as the 2-D ones.
  const auto same = [&](const std::vector<double>& a, const std::vector<double>& b, const char* name) {
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      const bool both_nan = std::isnan(a[i]) && std::isnan(b[i]);
      ASSERT_TRUE(both_nan || a[i] == b[i]) << what << " " << name << " element " << i << ": 3-D " << a[i]
                                            << ", 2-D " << b[i];
    }
  };
  same(r.out.values(), out2.values(), "out");
  same(r.dx.values(), dx2.values(), "dx");
  // dgrid: x is x; the 2-D y is y (depth flat) or z (height flat); the
  // neutral component's gradient is 0 with align_corners (its multiplier is
  // (size - 1) / 2 = 0).
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < OD; ++d)
      for (int64_t a = 0; a < OA; ++a)
        for (int64_t w = 0; w < OW; ++w) {
          const int64_t h2 = d * OA + a;
          EXPECT_EQ(r.dgrid.get(n, d, a, w, 0), dgrid2.get(n, h2, w, 0)) << what << " x at " << n << d << a << w;
          EXPECT_EQ(r.dgrid.get(n, d, a, w, depth_flat ? 1 : 2), dgrid2.get(n, h2, w, 1))
              << what << " y at " << n << d << a << w;
          if (o.align_corners) {
            EXPECT_EQ(r.dgrid.get(n, d, a, w, depth_flat ? 2 : 1), 0.0) << what;
          }
        }
}

TEST(VolumeVersus2d, SizeOneAxisMatches2dReference) {
  for (int flat_axis : {2, 3})
    for (Interpolation mode : kModes)
      for (Padding pad : kPaddings)
        for (bool align : {false, true})
          for (DType dtype : {DType::kFloat32, DType::kFloat64})
            for (bool hostile : {false, true}) expect_matches_2d({flat_axis, {mode, pad, align}, dtype}, 3 + flat_axis, hostile);
}

// The per-component rules spelled out on single voxels (design.md §2): with
// zeros padding a non-finite or huge component samples nothing; border maps
// NaN and -Inf to the first voxel of that axis and +Inf to the last;
// reflection maps NaN and +-Inf to the first; the non-finite component's
// gradient is 0 and no gradient is NaN.
TEST(VolumeHostile, PerComponentRules) {
  const Dims d{1, 1, 3, 5, 5, 1, 1, 1};
  for (Interpolation mode : kModes) {
    for (int comp = 0; comp < 3; ++comp) {
      for (double bad : {kNaN, kInf, -kInf, 1e30, -1e30}) {
        for (Padding pad : kPaddings) {
          const Options opt{mode, pad, true};
          Volumes p = random_problem(d, DType::kFloat64, opt, 17, 1);
          // The other components on voxel centres: (x, y, z) = (1, 2, 1) of (5, 5, 3).
          const double centre[3] = {-0.5, 0.0, 0.0};
          for (int k = 0; k < 3; ++k) p.grid.set(0, 0, 0, 0, k, k == comp ? bad : centre[k]);
          const Results r = run(p);
          const std::string what = describe(opt) + " component " + std::to_string(comp) + " = " + std::to_string(bad);
          for (double g : r.dgrid.values()) EXPECT_FALSE(std::isnan(g)) << what;
          // A non-finite component's gradient is 0. (Bicubic with a huge
          // finite one keeps its multiplier: its taps all clip to one voxel
          // and their derivatives cancel up to rounding.)
          if (!std::isfinite(bad) || mode != Interpolation::kBicubic || pad == Padding::kZeros) {
            EXPECT_EQ(r.dgrid.get(0, 0, 0, 0, comp), 0.0) << what;
          }
          const double out = r.out.get(0, 0, 0, 0, 0);
          if (pad == Padding::kZeros) {
            EXPECT_EQ(out, 0.0) << what;
            for (double v : r.dx.values()) EXPECT_EQ(v, 0.0) << what;
            continue;
          }
          // Which voxel along the bad component's axis is sampled.
          const int64_t size = comp == 0 ? d.in_w : comp == 1 ? d.in_h : d.in_d;
          int64_t at = 0;
          if (pad == Padding::kBorder && (bad == kInf || bad == 1e30)) at = size - 1;
          if (std::isfinite(bad)) {
            if (pad == Padding::kReflection) continue;  // a huge finite value reflects somewhere: the 2-D tests pin it
          }
          int64_t idx[3] = {1, 2, 1};  // x, y, z
          idx[comp] = at;
          EXPECT_EQ(out, p.input.get(0, 0, idx[2], idx[1], idx[0])) << what;
        }
      }
    }
  }
}

// Empty problems succeed: nothing to sample, dx zeroed, dgrid zeroed when
// there are no channels.
TEST(VolumeEmpty, EmptyProblemsSucceed) {
  const Dims base{2, 3, 3, 4, 5, 2, 3, 4};
  for (int which = 0; which < 5; ++which) {
    Dims d = base;
    if (which == 0) d.n = 0;
    if (which == 1) d.c = 0;
    if (which == 2) d.out_d = 0;
    if (which == 3) d.out_h = 0;
    if (which == 4) d.out_w = 0;
    for (Interpolation mode : kModes) {
      const Options opt{mode, Padding::kBorder, false};
      const Volumes p = random_problem(d, DType::kFloat32, opt, 2, 1);
      const Results r = run(p);
      for (double v : r.dx.values()) EXPECT_EQ(v, 0.0) << which;
      for (double v : r.dgrid.values()) EXPECT_EQ(v, 0.0) << which;
      if (which == 1) {
        EXPECT_GT(r.dgrid.numel(), 0);
      }
      if (which >= 2) {
        EXPECT_GT(r.dx.numel(), 0);
      }
    }
  }
}

// float16 and bfloat16: computed in float32 and rounded once, so within one
// rounding of the float64 reference on the same (rounded) values.
TEST(VolumeLowPrecision, WithinOneRoundingOfFloat64) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    const double eps = dtype == DType::kFloat16 ? 0x1p-10 : 0x1p-7;
    for (Interpolation mode : kModes) {
      for (Padding pad : kPaddings) {
        for (bool align : {false, true}) {
          const Options opt{mode, pad, align};
          const Volumes lo = random_problem({2, 3, 3, 4, 5, 2, 3, 4}, dtype, opt, 31, 1.2);
          Volumes hi{opt, VolumeTensor(DType::kFloat64, lo.input.shape()),
                     VolumeTensor(DType::kFloat64, lo.grid.shape()), VolumeTensor(DType::kFloat64, lo.grad.shape())};
          hi.input.assign_from(lo.input);
          hi.grid.assign_from(lo.grid);
          hi.grad.assign_from(lo.grad);
          const Results a = run(lo), b = run(hi);
          const auto within = [&](const VolumeTensor& got, const VolumeTensor& want, const char* name) {
            const std::vector<double> g = got.values(), w = want.values();
            double max_ref = 0;
            for (double v : w) max_ref = std::max(max_ref, std::fabs(v));
            const double bound = eps * std::max(1.0, max_ref);
            for (std::size_t i = 0; i < g.size(); ++i)
              ASSERT_LE(std::fabs(g[i] - w[i]), bound)
                  << describe(opt) << " " << to_string(dtype) << " " << name << " element " << i;
          };
          within(a.out, b.out, "out");
          within(a.dx, b.dx, "dx");
          within(a.dgrid, b.dgrid, "dgrid");
        }
      }
    }
  }
}

}  // namespace
}  // namespace gridsampler
