// The 3-D kernels against the float64 reference: every mode x padding x
// align_corners x dtype, on shapes whose channel counts take every path
// (planes for 1, 4-lane blocks for 2-7, 16-lane blocks for 8 and more, groups
// and several channel blocks past 16), in every layout; every SIMD target;
// hostile grids. Outputs start as NaN, so an element the kernels forget to
// write fails.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>

#include "common/problem.hpp"
#include "common/volume_problem.hpp"
#include "cpu/dispatch.hpp"
#include "reference/reference.hpp"

namespace gstest {
namespace {

using gridsampler::Interpolation;
using gridsampler::Options;
using gridsampler::Padding;

const VolDims kShapes[] = {
    {1, 1, 1, 1, 1, 2, 3, 3},     // 1x1x1 volume
    {2, 1, 5, 6, 7, 4, 3, 5},     // one channel (planes), N > 1
    {1, 3, 4, 5, 6, 5, 4, 3},     // 4-lane blocks
    {2, 6, 3, 4, 5, 3, 5, 4},     // 4-lane blocks of 4 and 2
    {1, 9, 4, 3, 5, 4, 4, 4},     // one partial 16-lane block
    {1, 35, 3, 4, 4, 3, 3, 5},    // full and partial 16-lane blocks
    {2, 4, 1, 6, 5, 2, 3, 4},     // Din = 1
    {1, 2, 5, 1, 4, 3, 2, 3},     // Hin = 1
    {1, 3, 4, 5, 1, 2, 3, 4},     // Win = 1
    {1, 1, 9, 10, 11, 9, 10, 11}, // several pixel tiles
};

void expect_close(const VolTensor& got, const VolTensor& want, double k, const std::string& what) {
  const Diff d = compare(got.values(), want.values());
  EXPECT_LE(d.max_abs, tolerance(got.dtype(), d.max_ref, k))
      << what << ": worst flat index " << d.index << ", max |ref| " << d.max_ref;
}

VolOutputs run_reference(const VolProblem& p, VolLayout layout = VolLayout::kContiguous) {
  return run_volume(p, layout, {}, &gridsampler::reference::grid_sampler_3d,
                    &gridsampler::reference::grid_sampler_3d_backward);
}

// float32/float64 accumulate in their own precision: the error grows with
// the terms (channels x taps). 16-bit results are rounded once.
double tolerance_factor(DType dt, const VolDims& d, Interpolation mode) {
  const bool wide = dt == DType::kFloat32 || dt == DType::kFloat64;
  const double taps = mode == Interpolation::kBicubic ? 64 : 8;
  return wide ? 8.0 * static_cast<double>(d.c + 1) * taps : 2.0;
}

using Param = std::tuple<Interpolation, Padding, bool, DType>;

class VolumeKernelVsReference : public ::testing::TestWithParam<Param> {};

TEST_P(VolumeKernelVsReference, AllShapesAndLayouts) {
  const auto [mode, pad, align, dtype] = GetParam();
  const Options opt{mode, pad, align};
  uint64_t seed = 1;
  const VolLayout kLayouts[] = {VolLayout::kContiguous, VolLayout::kChannelsLast, VolLayout::kSlicedH,
                                VolLayout::kNegativeW};
  for (const VolDims& d : kShapes) {
    const VolProblem p = VolProblem::random(d, dtype, opt, seed++, 1.3);
    const VolOutputs want = run_reference(p);
    const double k = tolerance_factor(dtype, d, mode);
    for (VolLayout layout : kLayouts) {
      const VolOutputs got = run_volume(p.relayout(layout), layout);
      const std::string what = describe(opt) + " " + std::string(gridsampler::to_string(dtype)) + " " + to_string(d) + " " +
                               to_string(layout);
      expect_close(got.out, want.out, k, what + " forward");
      expect_close(got.dx, want.dx, k, what + " dx");
      expect_close(got.dgrid, want.dgrid, k, what + " dgrid");
    }
  }
}

std::string name(const ::testing::TestParamInfo<Param>& info) {
  const auto [mode, pad, align, dtype] = info.param;
  return std::string(gridsampler::to_string(mode)) + "_" + std::string(gridsampler::to_string(pad)) +
         (align ? "_align_" : "_noalign_") + std::string(gridsampler::to_string(dtype));
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, VolumeKernelVsReference,
    ::testing::Combine(::testing::Values(Interpolation::kBilinear, Interpolation::kNearest,
                                         Interpolation::kBicubic),
                       ::testing::Values(Padding::kZeros, Padding::kBorder, Padding::kReflection),
                       ::testing::Bool(),
                       ::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32,
                                         DType::kFloat64)),
    name);

// Larger channel counts: 16-lane groups and several channel blocks (dgrid
// summed over blocks), planar channel blocks when the interleaved buffers
// would be too large.
TEST(VolumeKernelVsReference, ManyChannels) {
  for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic}) {
    const Options opt{mode, Padding::kReflection, true};
    for (const VolDims& d : {VolDims{1, 70, 3, 3, 4, 3, 4, 3}, VolDims{2, 300, 2, 3, 2, 2, 2, 3}}) {
      const VolProblem p = VolProblem::random(d, DType::kFloat32, opt, 9, 1.2);
      const VolOutputs got = run_volume(p), want = run_reference(p);
      const double k = tolerance_factor(DType::kFloat32, d, mode);
      const std::string what = describe(opt) + " " + to_string(d);
      expect_close(got.out, want.out, k, what + " forward");
      expect_close(got.dx, want.dx, k, what + " dx");
      expect_close(got.dgrid, want.dgrid, k, what + " dgrid");
    }
  }
}

// Every SIMD target compiled in and supported here, forced in turn.
TEST(VolumeKernelVsReference, EachSimdTarget) {
  const int64_t targets = gridsampler::cpu::available_targets();
  ASSERT_NE(targets, 0);
  int tested = 0;
  for (int64_t t = targets; t != 0; t &= t - 1) {
    const int64_t target = t & -t;
    gridsampler::cpu::force_targets(target);
    ASSERT_EQ(gridsampler::cpu::current_target(), target);
    const std::string tname = gridsampler::cpu::target_name(target);
    for (DType dt : {DType::kFloat16, DType::kFloat32, DType::kFloat64}) {
      for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic}) {
        for (Padding pad : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
          const Options opt{mode, pad, pad == Padding::kBorder};
          for (const VolDims& d : {VolDims{2, 1, 5, 6, 7, 4, 5, 6}, VolDims{1, 3, 4, 5, 3, 3, 4, 5},
                                   VolDims{1, 19, 3, 4, 5, 4, 3, 4}}) {
            const VolProblem p = VolProblem::random(d, dt, opt, 3, 1.2);
            const VolOutputs got = run_volume(p), want = run_reference(p);
            const double k = 2 * tolerance_factor(dt, d, mode);
            const std::string what =
                tname + " " + describe(opt) + " " + std::string(gridsampler::to_string(dt)) + " " + to_string(d);
            expect_close(got.out, want.out, k, what + " forward");
            expect_close(got.dx, want.dx, k, what + " dx");
            expect_close(got.dgrid, want.dgrid, k, what + " dgrid");
          }
        }
      }
    }
    ++tested;
  }
  gridsampler::cpu::force_targets(0);
  std::printf("tested %d SIMD targets\n", tested);
}

// Each output alone (the other masked off) on every SIMD target: the same
// bits as with both, and close to the reference, as is the forward. The
// channel-block kernels have one loop per combination; tricubic's work
// several voxels at a time, so the shapes' tiles end in a partial group
// (64 + 41 voxels).
TEST(VolumeKernelVsReference, EachOutputAloneOnEachSimdTarget) {
  const int64_t targets = gridsampler::cpu::available_targets();
  ASSERT_NE(targets, 0);
  for (int64_t t = targets; t != 0; t &= t - 1) {
    const int64_t target = t & -t;
    gridsampler::cpu::force_targets(target);
    ASSERT_EQ(gridsampler::cpu::current_target(), target);
    const std::string tname = gridsampler::cpu::target_name(target);
    for (DType dt : {DType::kFloat32, DType::kFloat64}) {
      for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kBicubic}) {
        const Options opt{mode, Padding::kBorder, true};
        for (const VolDims& d : {VolDims{1, 3, 4, 5, 6, 3, 5, 7}, VolDims{2, 19, 3, 4, 5, 7, 3, 5}}) {
          const VolProblem p = VolProblem::random(d, dt, opt, 23, 1.2);
          const VolOutputs both = run_volume(p), want = run_reference(p);
          const VolOutputs dx = run_volume(p, VolLayout::kContiguous, {true, false});
          const VolOutputs dgrid = run_volume(p, VolLayout::kContiguous, {false, true});
          const std::string what =
              tname + " " + describe(opt) + " " + std::string(gridsampler::to_string(dt)) + " " + to_string(d);
          EXPECT_EQ(dx.dx.element_bytes(), both.dx.element_bytes()) << what << " dx alone";
          EXPECT_EQ(dgrid.dgrid.element_bytes(), both.dgrid.element_bytes()) << what << " dgrid alone";
          const double k = 2 * tolerance_factor(dt, d, mode);
          expect_close(both.out, want.out, k, what + " forward");
          expect_close(dx.dx, want.dx, k, what + " dx alone");
          expect_close(dgrid.dgrid, want.dgrid, k, what + " dgrid alone");
        }
      }
    }
  }
  gridsampler::cpu::force_targets(0);
}

// Hostile grids through the kernels: NaN, infinities and huge values in
// any component, mixed with ordinary ones; the kernels follow the reference's
// policy (NaN where it gives NaN, the same finite values elsewhere).
TEST(VolumeKernelVsReference, HostileGrids) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double kValues[] = {nan, inf, -inf, 1e30, -1e30, 3e9, -7.5, 0.25, 1.0, -1.0};
  for (DType dt : {DType::kFloat32, DType::kFloat64}) {
    for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic}) {
      for (Padding pad : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
        for (bool align : {false, true}) {
          const Options opt{mode, pad, align};
          for (const VolDims& d : {VolDims{1, 1, 4, 5, 6, 4, 4, 5}, VolDims{1, 5, 3, 4, 5, 4, 4, 5}}) {
            VolProblem p = VolProblem::random(d, dt, opt, 13, 1.2);
            std::mt19937_64 rng(17);
            std::uniform_int_distribution<int> pick(0, 9 + 6);  // ordinary values too
            for (int64_t z = 0; z < d.out_d; ++z)
              for (int64_t y = 0; y < d.out_h; ++y)
                for (int64_t x = 0; x < d.out_w; ++x)
                  for (int64_t k = 0; k < 3; ++k) {
                    const int i = pick(rng);
                    if (i < 10) p.grid.set({0, z, y, x, k}, kValues[i]);
                  }
            const VolOutputs got = run_volume(p), want = run_reference(p);
            const std::string what = describe(opt) + " " + std::string(gridsampler::to_string(dt)) + " " + to_string(d);
            for (auto [g, w, out] : {std::tuple{&got.out, &want.out, "forward"}, std::tuple{&got.dx, &want.dx, "dx"},
                                     std::tuple{&got.dgrid, &want.dgrid, "dgrid"}}) {
              const std::vector<double> a = g->values(), b = w->values();
              double max_ref = 0;
              for (double v : b) {
                if (std::isfinite(v)) max_ref = std::max(max_ref, std::fabs(v));
              }
              const double tol = tolerance(dt, max_ref, tolerance_factor(dt, d, mode));
              for (std::size_t i = 0; i < a.size(); ++i) {
                if (std::isnan(b[i])) {
                  ASSERT_TRUE(std::isnan(a[i])) << what << " " << out << " element " << i;
                } else if (std::isinf(b[i])) {
                  ASSERT_EQ(a[i], b[i]) << what << " " << out << " element " << i;
                } else {
                  ASSERT_NEAR(a[i], b[i], tol) << what << " " << out << " element " << i;
                }
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace gstest
