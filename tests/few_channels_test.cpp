// One to three channels: the workloads where the pixels are the only vector
// axis (planar kernels reading dense planes through flat taps and vector
// gathers; strided taps for other layouts), on every SIMD target this CPU
// runs, against the float64 reference. Tiny planes, tiny outputs, many
// images, and grids far outside the image (reflection folding thousands of
// times, border clamping from afar). Both layouts must agree with the
// reference, and results are the same bits for 1 and 3 threads.
#include <gtest/gtest.h>

#include <tuple>

#include "common/problem.hpp"
#include "cpu/dispatch.hpp"

namespace gstest {
namespace {

using gridsampler::Interpolation;
using gridsampler::Options;
using gridsampler::Padding;

const Dims kShapes[] = {
    {3, 1, 1, 1, 2, 3},     // 1x1 planes
    {2, 1, 1, 9, 4, 5},     // Hin = 1
    {40, 1, 5, 6, 3, 3},    // many images, 9 output pixels each
    {2, 1, 19, 23, 17, 21}, // several tiles and a partial one
    {1, 1, 33, 40, 1, 70},  // a row of points
    {3, 2, 9, 8, 5, 7},
    {2, 3, 7, 5, 11, 6},
    {2, 3, 24, 20, 5, 4},   // downsampling: a sparse scatter on planes
    {1, 2, 17, 30, 3, 6},
};

using Param = std::tuple<Interpolation, Padding, DType>;
class FewChannels : public ::testing::TestWithParam<Param> {};

TEST_P(FewChannels, EveryTargetAndLayoutMatchesTheReference) {
  const auto [mode, pad, dtype] = GetParam();
  const int64_t targets = gridsampler::cpu::available_targets();
  for (int64_t t = targets; t != 0; t &= t - 1) {
    const int64_t target = t & -t;
    gridsampler::cpu::force_targets(target);
    uint64_t seed = 11;
    for (bool align : {false, true}) {
      const Options opt{mode, pad, align};
      for (const Dims& d : kShapes) {
        for (double range : {1.2, 40.0}) {
          const Problem p = Problem::random(d, dtype, opt, seed++, range);
          const Outputs want = run(p, /*reference=*/true);
          const bool wide = dtype == DType::kFloat32 || dtype == DType::kFloat64;
          const double k = wide ? 16.0 * (d.c + 1) * 16 : 2.0;
          // Dense planes (flat taps) and padded ones (strided taps).
          for (Layout layout : {Layout::kContiguous, Layout::kPadded}) {
            const Problem q = p.relayout(layout);
            const Outputs got = run(q, false, layout);
            Problem q3 = p.relayout(layout);
            q3.options.num_threads = layout == Layout::kContiguous ? 3 : 1;
            const Outputs got3 = layout == Layout::kContiguous ? run(q3, false, layout) : got;
            const std::string what = std::string(gridsampler::cpu::target_name(target)) + " " + describe(opt) + " " +
                                     std::string(gridsampler::to_string(dtype)) + " " + to_string(d) + " range " +
                                     std::to_string(range) + " " + to_string(layout);
            for (auto [g, w, name] : {std::tuple{&got.out, &want.out, "forward"}, std::tuple{&got.dx, &want.dx, "dx"},
                                      std::tuple{&got.dgrid, &want.dgrid, "dgrid"}}) {
              const Diff diff = compare(g->values(), w->values());
              EXPECT_LE(diff.max_abs, tolerance(dtype, diff.max_ref, k))
                  << what << " " << name << ": worst flat index " << diff.index;
            }
            EXPECT_EQ(got3.out.storage(), got.out.storage()) << what;
            EXPECT_EQ(got3.dx.storage(), got.dx.storage()) << what;
            EXPECT_EQ(got3.dgrid.storage(), got.dgrid.storage()) << what;
          }
        }
      }
    }
  }
  gridsampler::cpu::force_targets(0);
}

std::string name(const ::testing::TestParamInfo<Param>& info) {
  const auto [mode, pad, dtype] = info.param;
  return std::string(gridsampler::to_string(mode)) + "_" + std::string(gridsampler::to_string(pad)) + "_" +
         std::string(gridsampler::to_string(dtype));
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, FewChannels,
    ::testing::Combine(::testing::Values(Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic),
                       ::testing::Values(Padding::kZeros, Padding::kBorder, Padding::kReflection),
                       ::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64)),
    name);

}  // namespace
}  // namespace gstest
