// Non-finite and huge coordinates (docs/design.md §2): border maps NaN and -Inf to
// the first pixel and +Inf to the last, reflection maps all three to the
// first, zeros samples nothing; their coordinate gradient is 0; huge finite
// values are clamped, reflected or out of bounds like any other; dx stays the
// adjoint of the forward. Nothing reads or writes outside the tensors (the
// sanitizer builds check that part).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>

#include "common/problem.hpp"
#include "reference/reference.hpp"

namespace gstest {
namespace {

using gridsampler::Interpolation;
using gridsampler::Options;
using gridsampler::Padding;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

const Interpolation kModes[] = {Interpolation::kBilinear, Interpolation::kNearest,
                                Interpolation::kBicubic};

// A problem whose grid x at (n=0, h=0, w=1) is `x`.
Problem with_x(DType dtype, const Options& opt, double x) {
  Problem p = Problem::random({1, 3, 5, 6, 2, 3}, dtype, opt, 31);
  p.grid.set(0, 0, 1, 0, x);
  return p;
}

// `a` ran with a replaced x coordinate, `b` with the edge it maps to. A
// non-finite x has gradient exactly 0; a huge finite one has the true
// gradient, 0 up to rounding (bicubic taps that all clip to one pixel cancel).
void expect_same(const Outputs& a, const Outputs& b, const std::string& what, bool finite = false) {
  EXPECT_EQ(a.out.values(), b.out.values()) << what << " forward";
  EXPECT_EQ(a.dx.values(), b.dx.values()) << what << " dx";
  // dgrid equal except the x gradient of the replaced coordinate.
  auto ga = a.dgrid.values(), gb = b.dgrid.values();
  const size_t ix = (0 * 3 + 1) * 2 + 0;
  if (finite) {
    EXPECT_NEAR(ga[ix], 0.0, 1e-6) << what << " dgrid x of the huge coordinate";
  } else {
    EXPECT_EQ(ga[ix], 0.0) << what << " dgrid x of the non-finite coordinate";
  }
  ga[ix] = gb[ix] = 0;
  EXPECT_EQ(ga, gb) << what << " dgrid";
}

// With align_corners=true, x = -1 is pixel 0 and x = 1 is pixel W-1 exactly.
TEST(NonFinite, BorderClampsLikeTheEdges) {
  for (DType dt : {DType::kFloat32, DType::kFloat64}) {
    for (Interpolation mode : kModes) {
      for (bool reference : {false, true}) {
        const Options opt{mode, Padding::kBorder, true};
        const std::string what = describe(opt) + (reference ? " reference" : " kernels");
        const Outputs lo = run(with_x(dt, opt, -1.0), reference);
        const Outputs hi = run(with_x(dt, opt, 1.0), reference);
        expect_same(run(with_x(dt, opt, kNaN), reference), lo, what + " NaN");
        expect_same(run(with_x(dt, opt, -kInf), reference), lo, what + " -Inf");
        expect_same(run(with_x(dt, opt, kInf), reference), hi, what + " +Inf");
        expect_same(run(with_x(dt, opt, -1e30), reference), lo, what + " -1e30", true);
        expect_same(run(with_x(dt, opt, 1e30), reference), hi, what + " 1e30", true);
      }
    }
  }
}

TEST(NonFinite, ReflectionMapsToTheFirstPixel) {
  for (DType dt : {DType::kFloat32, DType::kFloat64}) {
    for (Interpolation mode : kModes) {
      for (bool reference : {false, true}) {
        const Options opt{mode, Padding::kReflection, true};
        const std::string what = describe(opt) + (reference ? " reference" : " kernels");
        const Outputs lo = run(with_x(dt, opt, -1.0), reference);
        for (double x : {kNaN, kInf, -kInf}) {
          expect_same(run(with_x(dt, opt, x), reference), lo, what + " " + std::to_string(x));
        }
      }
    }
  }
}

// With zeros padding a non-finite or far-away coordinate samples nothing: the
// same as a coordinate far outside the image.
TEST(NonFinite, ZerosSamplesNothing) {
  for (DType dt : {DType::kFloat32, DType::kFloat64}) {
    for (Interpolation mode : kModes) {
      for (bool align : {false, true}) {
        for (bool reference : {false, true}) {
          const Options opt{mode, Padding::kZeros, align};
          const std::string what = describe(opt) + (reference ? " reference" : " kernels");
          const Outputs far = run(with_x(dt, opt, 5.0), reference);
          for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(far.out.get(0, c, 0, 1), 0.0) << what;
          for (double x : {kNaN, kInf, -kInf, 1e30, -1e30, 3e38}) {
            const Outputs o = run(with_x(dt, opt, x), reference);
            EXPECT_EQ(o.out.values(), far.out.values()) << what << " x=" << x;
            EXPECT_EQ(o.dx.values(), far.dx.values()) << what << " x=" << x;
            EXPECT_EQ(o.dgrid.get(0, 0, 1, 0), 0.0) << what << " x=" << x;
            EXPECT_EQ(o.dgrid.get(0, 0, 1, 1), 0.0) << what << " x=" << x;
          }
        }
      }
    }
  }
}

// The same hard values through every kind of kernel work split (1 channel:
// planes; 3: 4-lane blocks; 20: 16-lane blocks, whose bilinear stencils are
// built by vector code) in float32 and float16, against the reference, with
// values around the borders too.
TEST(NonFinite, HardGridsMatchTheReferenceOnEveryPath) {
  const double hard[] = {kNaN, kInf, -kInf, 1e30, -1e30, 1e-310, -1.0, 1.0, 0.999999, -1.000001,
                         1e10, 4e9, -3e18, 0.0, 2.5, -7.25, -1.25, 1.25, -1.2499, 1.2501, 0.5, -0.75};
  constexpr int kHard = sizeof hard / sizeof hard[0];
  for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
    for (int64_t c : {1, 3, 20}) {
      for (Interpolation mode : kModes) {
        for (Padding pad : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
          for (bool align : {false, true}) {
            const Options opt{mode, pad, align};
            Problem p = Problem::random({2, c, 4, 5, 5, 7}, dtype, opt, 43);
            int k = 0;
            for (int64_t n = 0; n < 2; ++n)
              for (int64_t h = 0; h < 5; ++h)
                for (int64_t w = 0; w < 7; ++w, ++k) {
                  p.grid.set(n, h, w, 0, hard[k % kHard]);
                  p.grid.set(n, h, w, 1, hard[(k * 7 + 3) % kHard]);
                }
            const Outputs got = run(p, false), want = run(p, true);
            const std::string what = describe(opt) + " " + std::string(gridsampler::to_string(dtype)) +
                                     " C=" + std::to_string(c);
            for (auto [a, b, name] : {std::tuple{&got.out, &want.out, "forward"},
                                      std::tuple{&got.dx, &want.dx, "dx"},
                                      std::tuple{&got.dgrid, &want.dgrid, "dgrid"}}) {
              const auto va = a->values(), vb = b->values();
              for (double v : va) ASSERT_TRUE(std::isfinite(v)) << what << " " << name;
              const Diff d = compare(va, vb);
              // float32 accumulates in float32; float16 is rounded once.
              const double k_ulps = dtype == DType::kFloat32 ? 8.0 * (c + 1) * 16 : 2.0;
              EXPECT_LE(d.max_abs, tolerance(dtype, d.max_ref, k_ulps)) << what << " " << name;
            }
          }
        }
      }
    }
  }
}

// Grids full of hard values: every output finite, and dx still the adjoint
// of the forward.
TEST(NonFinite, AdjointHoldsOnHardGrids) {
  const double hard[] = {kNaN, kInf, -kInf, 1e30, -1e30, 1e-310, -1.0, 1.0, 0.999999, -1.000001,
                         1e10, 4e9, -3e18, 0.0, 2.5, -7.25};
  for (Interpolation mode : kModes) {
    for (Padding pad : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
      for (bool align : {false, true}) {
        const Options opt{mode, pad, align};
        Problem p = Problem::random({1, 2, 4, 5, 4, 4}, DType::kFloat64, opt, 41);
        int k = 0;
        for (int64_t h = 0; h < 4; ++h)
          for (int64_t w = 0; w < 4; ++w) {
            p.grid.set(0, h, w, 0, hard[k % 16]);
            p.grid.set(0, h, w, 1, hard[(k * 7 + 3) % 16]);
            ++k;
          }
        const Outputs o = run(p, false);
        for (double v : o.out.values()) EXPECT_TRUE(std::isfinite(v)) << describe(opt);
        for (double v : o.dx.values()) EXPECT_TRUE(std::isfinite(v)) << describe(opt);
        for (double v : o.dgrid.values()) EXPECT_TRUE(std::isfinite(v)) << describe(opt);
        std::mt19937_64 rng(5);
        Tensor v(DType::kFloat64, p.input.shape());
        v.fill_uniform(rng, -1, 1);
        Tensor fv(DType::kFloat64, p.grad.shape());
        ASSERT_TRUE(gridsampler::grid_sampler_2d(v.view(), p.grid.view(), fv.mutable_view(), opt).ok());
        double lhs = 0, rhs = 0;
        const auto dx = o.dx.values(), vv = v.values(), g = p.grad.values(), f = fv.values();
        for (size_t i = 0; i < dx.size(); ++i) lhs += dx[i] * vv[i];
        for (size_t i = 0; i < g.size(); ++i) rhs += g[i] * f[i];
        EXPECT_NEAR(lhs, rhs, 1e-12 * std::max(1.0, std::fabs(rhs))) << describe(opt);
        // The reference agrees with the kernels on these grids too.
        const Outputs r = run(p, true);
        EXPECT_LE(compare(o.out.values(), r.out.values()).max_abs, 1e-13) << describe(opt);
        EXPECT_LE(compare(o.dx.values(), r.dx.values()).max_abs, 1e-13) << describe(opt);
        EXPECT_LE(compare(o.dgrid.values(), r.dgrid.values()).max_abs, 1e-9) << describe(opt);
      }
    }
  }
}

}  // namespace
}  // namespace gstest
