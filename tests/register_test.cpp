// The registration (tools/register/) through its library: the chain rule
// from the library's dgrid to the transform's parameters against finite
// differences, and known warps of the demo's scene recovered: an affine
// one within a tenth of a pixel, a translation of tens of pixels, an
// affine-plus-elastic one within half a pixel; the loss never rises within
// a level. Small images (64 to 96 pixels), so that the suite stays quick
// under the sanitizers too (about 10 s there, a quarter of a second in a
// Release build).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "register/pictures.hpp"
#include "register/pyramid.hpp"
#include "register/registration.hpp"
#include "register/synthetic.hpp"
#include "register/transform.hpp"

namespace gridsampler::registration {
namespace {

// The loss's gradient against central differences, parameter by parameter.
void expect_gradient_matches(TransformKind kind, const Transform& t, const host::Tensor& fixed,
                             const host::Tensor& moving, double smoothness) {
  double loss = 0;
  std::vector<double> gradient;
  Status s = loss_and_gradient(fixed, moving, kind, t, smoothness, 1, &loss, &gradient);
  ASSERT_TRUE(s.ok()) << s.message();
  const std::vector<double> x = pack(kind, t);
  ASSERT_EQ(gradient.size(), x.size());
  double largest = 0;
  for (double g : gradient) largest = std::max(largest, std::fabs(g));
  ASSERT_GT(largest, 0);
  for (std::size_t i = 0; i < x.size(); ++i) {
    constexpr double kStep = 1e-6;
    double at[2];
    for (int side = 0; side < 2; ++side) {
      std::vector<double> moved = x;
      moved[i] += side ? -kStep : kStep;
      Transform tm = t;
      unpack(kind, moved, &tm);
      ASSERT_TRUE(loss_and_gradient(fixed, moving, kind, tm, smoothness, 1, &at[side], nullptr).ok());
    }
    const double numeric = (at[0] - at[1]) / (2 * kStep);
    EXPECT_NEAR(gradient[i], numeric, 1e-6 * largest) << "parameter " << i << " of " << x.size();
  }
}

TEST(RegisterChainRule, AffineAndControlGridMatchFiniteDifferences) {
  // 20 x 28, 3 channels, float64; a transform that takes part of the image
  // outside the moving one (the overlap weights' derivative counts) with a
  // bent 4 x 5 control grid, and the bending energy on.
  const Example ex = make_example(28, default_warp(28));
  host::Tensor fixed(DType::kFloat64, {1, 3, 20, 28}), moving(DType::kFloat64, {1, 3, 20, 28});
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t y = 0; y < 20; ++y) {
      for (int64_t x = 0; x < 28; ++x) {
        fixed.set(0, c, y, x, ex.fixed.get(0, c, y + 4, x));
        moving.set(0, c, y, x, ex.moving.get(0, c, y + 4, x));
      }
    }
  }
  Transform t;
  t.affine = {1.04, 0.06, -0.05, 0.96, 0.09, -0.07};
  t.rows = 4;
  t.cols = 5;
  t.control.resize(40);
  for (std::size_t i = 0; i < t.control.size(); ++i) t.control[i] = 0.03 * std::sin(1.7 * static_cast<double>(i));
  {
    SCOPED_TRACE("affine+elastic");
    expect_gradient_matches(TransformKind::kAffineElastic, t, fixed, moving, 1e-3);
  }
  {
    SCOPED_TRACE("elastic");
    expect_gradient_matches(TransformKind::kElastic, t, fixed, moving, 1e-3);
  }
  {
    SCOPED_TRACE("affine");
    Transform affine = t;
    affine.rows = affine.cols = 0;
    affine.control.clear();
    expect_gradient_matches(TransformKind::kAffine, affine, fixed, moving, 0);
  }
}

TEST(RegisterChainRule, BendingEnergyLeavesAffineFieldsFreeAndPenalisesBends) {
  Transform t;
  t.rows = 5;
  t.cols = 6;
  t.control.assign(60, 0.0);
  // d(x, y) = (0.1 + 0.2 x - 0.3 y, -0.05 + 0.4 x + 0.1 y) on the lattice: no bending.
  for (int64_t i = 0; i < 5; ++i) {
    for (int64_t j = 0; j < 6; ++j) {
      const double x = -1 + 2.0 * static_cast<double>(j) / 5, y = -1 + 2.0 * static_cast<double>(i) / 4;
      t.control[static_cast<std::size_t>(i * 6 + j)] = 0.1 + 0.2 * x - 0.3 * y;
      t.control[static_cast<std::size_t>(30 + i * 6 + j)] = -0.05 + 0.4 * x + 0.1 * y;
    }
  }
  EXPECT_NEAR(bending_energy(t, nullptr), 0, 1e-24);
  // d_x = x^2: d_xx = 2 everywhere, so the mean of d_xx^2 is 4 (exact for a
  // quadratic on the lattice, whose rows have 4 second differences each).
  for (int64_t i = 0; i < 5; ++i) {
    for (int64_t j = 0; j < 6; ++j) {
      const double x = -1 + 2.0 * static_cast<double>(j) / 5;
      t.control[static_cast<std::size_t>(i * 6 + j)] = x * x;
      t.control[static_cast<std::size_t>(30 + i * 6 + j)] = 0;
    }
  }
  const double hx = 0.4, hy = 0.5;
  EXPECT_NEAR(bending_energy(t, nullptr), 5 * 4 * 4.0 * hx * hy / 4, 1e-12);
}

// Registers `ex` and checks how far the recovered displacement is from the
// true one, and that no level's loss ever rose.
DisplacementError register_and_measure(const Example& ex, TransformKind kind, RegisterResult* result) {
  RegisterOptions options;
  options.kind = kind;
  options.num_threads = 2;
  const Status s = register_images(ex.fixed, ex.moving, options, {}, result);
  EXPECT_TRUE(s.ok()) << s.message();
  for (const LevelReport& level : result->levels) {
    SCOPED_TRACE(std::string(to_string(level.stage)) + " pass, level " + std::to_string(level.width) + " x " +
                 std::to_string(level.height));
    EXPECT_EQ(level.losses.size(), static_cast<std::size_t>(level.iterations) + 1);
    for (std::size_t k = 1; k < level.losses.size(); ++k) EXPECT_LE(level.losses[k], level.losses[k - 1]) << "step " << k;
  }
  host::Tensor grid;
  EXPECT_TRUE(sampling_grid(result->transform, ex.fixed.shape()[2], ex.fixed.shape()[3], &grid).ok());
  return displacement_error(ex.true_grid, grid);
}

TEST(Register, RecoversAnAffineWarpWithinATenthOfAPixel) {
  KnownWarp warp;
  warp.angle_deg = -7;
  warp.scale = 1.04;
  warp.shift_x = 5.3;
  warp.shift_y = -3.8;
  const Example ex = make_example(64, warp);
  RegisterResult result;
  const DisplacementError e = register_and_measure(ex, TransformKind::kAffine, &result);
  EXPECT_LT(e.mean_px, 0.1);
  EXPECT_LT(e.max_px, 0.3);
  EXPECT_GT(e.pixels, 64 * 64 / 2);
  EXPECT_FALSE(result.transform.elastic());
  // The matrix too: scale * rotation, the centre-preserving form of the truth.
  const double c = 1.04 * std::cos(-7 * std::numbers::pi / 180), s = 1.04 * std::sin(-7 * std::numbers::pi / 180);
  const auto& a = result.transform.affine;
  EXPECT_NEAR(a[0], c, 2e-3);
  EXPECT_NEAR(a[1], -s, 2e-3);
  EXPECT_NEAR(a[2], s, 2e-3);
  EXPECT_NEAR(a[3], c, 2e-3);
}

TEST(Register, FindsATranslationOfTensOfPixels) {
  // (23.4, -17.7) pixels of a 96-pixel image: 29 pixels, over a quarter of
  // its width; the pyramid's 12 x 12 level sees about 3.
  KnownWarp warp;
  warp.shift_x = 23.4;
  warp.shift_y = -17.7;
  const Example ex = make_example(96, warp);
  RegisterResult result;
  const DisplacementError e = register_and_measure(ex, TransformKind::kAffine, &result);
  EXPECT_LT(e.mean_px, 0.1);
  const PixelAffine px = affine_in_pixels(result.transform, 96, 96);
  EXPECT_NEAR(px.offset[0], 23.4, 0.1);
  EXPECT_NEAR(px.offset[1], -17.7, 0.1);
  EXPECT_NEAR(px.matrix[0], 1, 2e-3);
  EXPECT_NEAR(px.matrix[3], 1, 2e-3);
}

TEST(Register, RecoversAnAffinePlusElasticWarpWithinHalfAPixel) {
  // The built-in example's warp at 64 pixels: rotate 6 degrees, zoom 5 %,
  // shift (-4.8, 3.0) pixels, bend by up to 0.8 pixel.
  const Example ex = make_example(64, default_warp(64));
  RegisterResult result;
  const DisplacementError e = register_and_measure(ex, TransformKind::kAffineElastic, &result);
  EXPECT_LT(e.mean_px, 0.5);
  EXPECT_LT(e.max_px, 2.0);
  EXPECT_TRUE(result.transform.elastic());
  EXPECT_EQ(result.passes, 2);
  // The affine part alone is worse: the elastic pass is what closes the gap.
  RegisterResult affine_only;
  const DisplacementError a = register_and_measure(ex, TransformKind::kAffine, &affine_only);
  EXPECT_GT(a.mean_px, 2 * e.mean_px);
}

TEST(Register, PyramidHalvesDownToSixPixels) {
  const auto sizes = pyramid_sizes(96, 200);
  ASSERT_EQ(sizes.size(), 5u);  // 96x200, 48x100, 24x50, 12x25, 6x13
  EXPECT_EQ(sizes.back(), (std::pair<int64_t, int64_t>{6, 13}));
  EXPECT_EQ(pyramid_sizes(5, 5).size(), 1u);
  EXPECT_EQ(control_cells(256, 256), 16);
  EXPECT_EQ(control_cells(256, 32), 8);
  EXPECT_EQ(control_cells(256, 4), 1);
}

TEST(RegisterPictures, FlowColoursTellDirectionsApart) {
  // One pixel moved by (dx, dy) pixels in each of four 1 x 1 grids.
  auto colour = [](double dx, double dy) {
    host::Tensor grid(DType::kFloat64, {1, 1, 1, 2});
    grid.set(0, 0, 0, 0, dx * 2);  // a 1-pixel image: one pixel is 2 normalised units
    grid.set(0, 0, 0, 1, dy * 2);
    return flow_picture(grid, 1.0).get(0, 0);
  };
  const png::Rgb right = colour(1, 0), left = colour(-1, 0), down = colour(0, 1), up = colour(0, -1), none = colour(0, 0);
  EXPECT_GT(right.r, 200);  // red
  EXPECT_LT(right.g, 60);
  EXPECT_LT(left.r, 60);  // sky blue
  EXPECT_GT(left.g, 200);
  EXPECT_GT(left.b, 200);
  EXPECT_GT(down.r, 200);  // yellow
  EXPECT_GT(down.g, 200);
  EXPECT_LT(down.b, 60);
  EXPECT_LT(up.g, 60);  // violet
  EXPECT_GT(up.b, 200);
  EXPECT_EQ(none.r, 255);  // no displacement: white
  EXPECT_EQ(none.g, 255);
  EXPECT_EQ(none.b, 255);
  // Half the scale: paler, the same hue.
  const png::Rgb half = colour(0.5, 0);
  EXPECT_GT(half.r, 200);
  EXPECT_GT(half.g, 100);
  EXPECT_LT(half.g, 160);
}

}  // namespace
}  // namespace gridsampler::registration
