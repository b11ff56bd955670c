// The backward checked against the forward it differentiates, independently
// of PyTorch: dgrid against central finite differences, dx through the
// adjoint identity <dx, v> = <grad, forward(v)>.
#include <gtest/gtest.h>

#include <cmath>

#include "common/problem.hpp"
#include "reference/reference.hpp"

namespace gstest {
namespace {

using gridsampler::Interpolation;
using gridsampler::Options;
using gridsampler::Padding;

const Padding kPaddings[] = {Padding::kZeros, Padding::kBorder, Padding::kReflection};
const Interpolation kModes[] = {Interpolation::kBilinear, Interpolation::kNearest,
                                Interpolation::kBicubic};

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// <grad, forward(input, grid)> in float64 through the reference.
double loss(const Problem& p, const Tensor& grid) {
  Tensor out(DType::kFloat64, p.grad.shape());
  const auto s =
      gridsampler::reference::grid_sampler_2d(p.input.view(), grid.view(), out.mutable_view(), p.options);
  EXPECT_TRUE(s.ok()) << s.message();
  return dot(out.values(), p.grad.values());
}

// Unnormalised coordinate of a grid value, as the library forms it.
double pixel(double g, int64_t size, bool align) {
  return align ? (g + 1) / 2 * double(size - 1) : ((g + 1) * double(size) - 1) / 2;
}

// Kinks of bilinear, of border clipping and of reflection all lie on
// multiples of 1/2 in pixel coordinates; stay 0.02 pixels away from them.
bool near_kink(double ix) {
  const double t = 2 * ix;
  return std::fabs(t - std::nearbyint(t)) < 0.04;
}

TEST(FiniteDifferences, DgridMatchesCentralDifferences) {
  for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kBicubic}) {
    for (Padding pad : kPaddings) {
      for (bool align : {false, true}) {
        const Options opt{mode, pad, align};
        const Dims d{2, 3, 5, 7, 4, 6};
        Problem p = Problem::random(d, DType::kFloat64, opt, 11, 1.6);
        const Outputs o = run(p, /*reference=*/false);
        int checked = 0;
        for (int64_t n = 0; n < d.n; ++n)
          for (int64_t h = 0; h < d.out_h; ++h)
            for (int64_t w = 0; w < d.out_w; ++w) {
              const double x = p.grid.get(n, h, w, 0), y = p.grid.get(n, h, w, 1);
              if (near_kink(pixel(x, d.in_w, align)) || near_kink(pixel(y, d.in_h, align))) continue;
              for (int k = 0; k < 2; ++k) {
                const double eps = 1e-6;
                Tensor plus = p.grid.relayout(Layout::kContiguous);
                Tensor minus = p.grid.relayout(Layout::kContiguous);
                const double v = p.grid.get(n, h, w, k);
                plus.set(n, h, w, k, v + eps);
                minus.set(n, h, w, k, v - eps);
                const double fd = (loss(p, plus) - loss(p, minus)) / (2 * eps);
                const double got = o.dgrid.get(n, h, w, k);
                EXPECT_NEAR(got, fd, 1e-6 * std::max(1.0, std::fabs(fd)))
                    << describe(opt) << " at n=" << n << " h=" << h << " w=" << w << " k=" << k;
              }
              ++checked;
            }
        EXPECT_GT(checked, 10) << describe(opt);
      }
    }
  }
}

// The gradient of a sample with respect to its coordinate is zero for nearest.
TEST(FiniteDifferences, NearestDgridIsZero) {
  for (Padding pad : kPaddings) {
    const Problem p = Problem::random({2, 3, 5, 7, 4, 6}, DType::kFloat64,
                                      {Interpolation::kNearest, pad, false}, 5, 1.5);
    for (double v : run(p, false).dgrid.values()) EXPECT_EQ(v, 0.0);
  }
}

// dx is the transpose of the forward's linear map in the input:
// <dx, v> = <grad, forward(v, grid)> for any v.
TEST(Adjoint, DxIsTransposeOfForward) {
  for (Interpolation mode : kModes) {
    for (Padding pad : kPaddings) {
      for (bool align : {false, true}) {
        for (bool reference : {false, true}) {
          const Options opt{mode, pad, align};
          Problem p = Problem::random({2, 3, 6, 5, 7, 4}, DType::kFloat64, opt, 21, 1.8);
          const Outputs o = run(p, reference);
          std::mt19937_64 rng(99);
          Tensor v(DType::kFloat64, p.input.shape());
          v.fill_uniform(rng, -1, 1);
          Problem pv = p.relayout(Layout::kContiguous);
          pv.input = v;
          const double lhs = dot(o.dx.values(), v.values());
          const double rhs = loss(pv, p.grid);
          EXPECT_NEAR(lhs, rhs, 1e-12 * std::max(1.0, std::fabs(rhs)))
              << describe(opt) << (reference ? " reference" : " kernels");
        }
      }
    }
  }
}

// With align_corners=true, a grid on the pixel centres samples the input
// itself, and the backward then hands grad straight back as dx.
TEST(Identity, AlignedIdentityGridCopies) {
  for (Interpolation mode : kModes) {
    for (Padding pad : kPaddings) {
      const Options opt{mode, pad, true};
      const Dims d{2, 3, 5, 7, 5, 7};
      Problem p = Problem::random(d, DType::kFloat64, opt, 4);
      for (int64_t n = 0; n < d.n; ++n)
        for (int64_t h = 0; h < d.out_h; ++h)
          for (int64_t w = 0; w < d.out_w; ++w) {
            p.grid.set(n, h, w, 0, -1 + 2.0 * w / (d.in_w - 1));
            p.grid.set(n, h, w, 1, -1 + 2.0 * h / (d.in_h - 1));
          }
      const Outputs o = run(p, false);
      const Diff fwd = compare(o.out.values(), p.input.values());
      const Diff bwd = compare(o.dx.values(), p.grad.values());
      EXPECT_LE(fwd.max_abs, 1e-14) << describe(opt);
      EXPECT_LE(bwd.max_abs, 1e-14) << describe(opt);
    }
  }
}

}  // namespace
}  // namespace gstest
