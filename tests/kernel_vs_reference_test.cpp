// The CPU kernels against the float64 reference on sweeps of every mode,
// padding, align_corners, dtype, shape and layout. Outputs start as NaN, so an
// element the kernels forget to write fails.
#include <gtest/gtest.h>

#include <tuple>

#include "common/problem.hpp"

namespace gstest {
namespace {

using gridsampler::Interpolation;
using gridsampler::Options;
using gridsampler::Padding;

const Dims kShapes[] = {
    {1, 1, 1, 1, 3, 3},   // 1x1 image
    {2, 3, 5, 7, 4, 6},   // non-square, N > 1
    {1, 17, 8, 9, 5, 3},  // channels beyond a vector width
    {2, 4, 1, 6, 3, 5},   // Hin = 1
    {1, 2, 6, 1, 4, 4},   // Win = 1
    {3, 1, 4, 4, 1, 1},   // one output pixel
    {1, 3, 11, 13, 9, 10},
    {2, 35, 9, 11, 13, 7},  // full and partial 16-channel blocks, several pixel tiles
    {2, 250, 3, 4, 5, 6},   // 16-channel sub-blocks in groups of 2, dgrid summed over groups
    {1, 4, 9, 10, 7, 8},    // 4 lanes all used; planes of several 16-pixel vectors and a tail
    {2, 6, 7, 9, 6, 11},    // 4-lane blocks of 4 and 2 channels
};

void expect_close(const Tensor& got, const Tensor& want, double k, const std::string& what) {
  const Diff d = compare(got.values(), want.values());
  const double tol = tolerance(got.dtype(), d.max_ref, k);
  EXPECT_LE(d.max_abs, tol) << what << ": worst flat index " << d.index << ", max |ref| "
                            << d.max_ref;
}

using Param = std::tuple<Interpolation, Padding, bool, DType>;

class KernelVsReference : public ::testing::TestWithParam<Param> {};

TEST_P(KernelVsReference, AllShapes) {
  const auto [mode, pad, align, dtype] = GetParam();
  const Options opt{mode, pad, align};
  uint64_t seed = 1;
  for (const Dims& d : kShapes) {
    const Problem p = Problem::random(d, dtype, opt, seed++, 1.3);
    const Outputs got = run(p, /*reference=*/false);
    const Outputs want = run(p, /*reference=*/true);
    // float32/float64 accumulate in their own precision: the error grows with
    // the number of terms (channels x taps). 16-bit results are rounded once.
    const bool wide = dtype == DType::kFloat32 || dtype == DType::kFloat64;
    const double k = wide ? 8.0 * (d.c + 1) * 16 : 2.0;
    const std::string what = describe(opt) + " " + std::string(gridsampler::to_string(dtype)) +
                             " " + to_string(d);
    expect_close(got.out, want.out, k, what + " forward");
    expect_close(got.dx, want.dx, k, what + " dx");
    expect_close(got.dgrid, want.dgrid, k, what + " dgrid");
  }
}

std::string name(const ::testing::TestParamInfo<Param>& info) {
  const auto [mode, pad, align, dtype] = info.param;
  return std::string(gridsampler::to_string(mode)) + "_" + std::string(gridsampler::to_string(pad)) +
         (align ? "_align_" : "_noalign_") + std::string(gridsampler::to_string(dtype));
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, KernelVsReference,
    ::testing::Combine(::testing::Values(Interpolation::kBilinear, Interpolation::kNearest,
                                         Interpolation::kBicubic),
                       ::testing::Values(Padding::kZeros, Padding::kBorder, Padding::kReflection),
                       ::testing::Bool(),
                       ::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32,
                                         DType::kFloat64)),
    name);

// Grids far outside [-1, 1] on small images: reflection folds a tap many
// times, border clamps it from far away, zeros drops it. The vector stencil
// builders fold at most twice and hand the rest to the scalar policy; both
// must agree with the reference.
TEST(KernelVsReference, WideGridsFoldAndClampLikeTheReference) {
  const Dims shapes[] = {{2, 5, 4, 6, 7, 9}, {1, 20, 3, 2, 8, 8}, {1, 3, 1, 5, 6, 6}};
  uint64_t seed = 100;
  for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kBicubic}) {
    for (Padding pad : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
      for (bool align : {false, true}) {
        const Options opt{mode, pad, align};
        for (const Dims& d : shapes) {
          const Problem p = Problem::random(d, DType::kFloat32, opt, seed++, 4.0);
          const Outputs got = run(p, /*reference=*/false);
          const Outputs want = run(p, /*reference=*/true);
          const double k = 8.0 * (d.c + 1) * 16;
          const std::string what = describe(opt) + " " + to_string(d);
          expect_close(got.out, want.out, k, what + " forward");
          expect_close(got.dx, want.dx, k, what + " dx");
          expect_close(got.dgrid, want.dgrid, k, what + " dgrid");
        }
      }
    }
  }
}

// Nearest moves values without arithmetic in the forward: exact.
TEST(KernelVsReference, NearestForwardIsExact) {
  for (Padding pad : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
    const Problem p = Problem::random({2, 5, 6, 7, 8, 9}, DType::kFloat32,
                                      {Interpolation::kNearest, pad, false}, 7, 1.5);
    const Outputs got = run(p, false);
    const Outputs want = run(p, true);
    EXPECT_EQ(got.out.values(), want.out.values()) << gridsampler::to_string(pad);
  }
}

// Empty problems succeed, write zeros to dx and touch nothing else.
TEST(KernelVsReference, EmptyProblems) {
  const Dims empties[] = {{0, 3, 4, 5, 2, 2}, {2, 0, 4, 5, 2, 2}, {2, 3, 4, 5, 0, 2},
                          {2, 3, 4, 5, 2, 0}};
  for (const Dims& d : empties) {
    for (bool reference : {false, true}) {
      const Problem p = Problem::random(d, DType::kFloat32, {}, 3);
      const Outputs o = run(p, reference);
      for (double v : o.dx.values()) EXPECT_EQ(v, 0.0) << to_string(d);
    }
  }
}

}  // namespace
}  // namespace gstest
