// Every SIMD target compiled in and supported by this CPU, forced in turn,
// against the float64 reference and bit-for-bit across thread counts.
#include <gtest/gtest.h>

#include "common/problem.hpp"
#include "cpu/dispatch.hpp"

namespace gstest {
namespace {

using gridsampler::Interpolation;
using gridsampler::Options;
using gridsampler::Padding;

TEST(SimdTargets, EachTargetMatchesTheReference) {
  const int64_t targets = gridsampler::cpu::available_targets();
  ASSERT_NE(targets, 0);
  int tested = 0;
  for (int64_t t = targets; t != 0; t &= t - 1) {
    const int64_t target = t & -t;
    gridsampler::cpu::force_targets(target);
    ASSERT_EQ(gridsampler::cpu::current_target(), target);
    const std::string name = gridsampler::cpu::target_name(target);
    for (DType dt : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
      for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic}) {
        for (Padding pad : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
          const Options opt{mode, pad, pad == Padding::kBorder};
          // 3 channels (planar kernels) and 19 (interleaved blocks, one partial).
          for (const Dims& d : {Dims{2, 3, 7, 9, 5, 6}, Dims{1, 19, 6, 5, 7, 4}}) {
            const Problem p = Problem::random(d, dt, opt, 3, 1.2);
            const Outputs got = run(p, false);
            const Outputs want = run(p, true);
            Problem p3 = p.relayout(Layout::kContiguous);
            p3.options.num_threads = 3;
            const Outputs threads3 = run(p3, false);
            const std::string what = name + " " + describe(opt) + " " +
                                     std::string(gridsampler::to_string(dt)) + " " + to_string(d);
            const bool wide = dt == DType::kFloat32 || dt == DType::kFloat64;
            const double k = wide ? 16.0 * (d.c + 1) * 16 : 2.0;
            for (auto [g, w, out] : {std::tuple{&got.out, &want.out, "forward"},
                                     std::tuple{&got.dx, &want.dx, "dx"},
                                     std::tuple{&got.dgrid, &want.dgrid, "dgrid"}}) {
              const Diff diff = compare(g->values(), w->values());
              EXPECT_LE(diff.max_abs, tolerance(dt, diff.max_ref, k)) << what << " " << out;
            }
            EXPECT_EQ(threads3.dx.storage(), got.dx.storage()) << what;
            EXPECT_EQ(threads3.dgrid.storage(), got.dgrid.storage()) << what;
          }
        }
      }
    }
    ++tested;
  }
  gridsampler::cpu::force_targets(0);
  RecordProperty("targets_tested", tested);
  std::printf("tested %d SIMD targets\n", tested);
}

}  // namespace
}  // namespace gstest
