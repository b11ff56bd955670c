// Results are bit-for-bit the same for any thread count and across runs, on
// shapes that exercise every work split of the backward (one task per
// (n, channel block); pixel chunks when there are few tasks; several channel
// blocks per image), and they agree with the reference.
#include <gtest/gtest.h>

#include "common/problem.hpp"

namespace gstest {
namespace {

using gridsampler::Interpolation;
using gridsampler::Options;
using gridsampler::Padding;

struct Split {
  const char* name;
  Dims dims;
};

const Split kSplits[] = {
    {"tasks_per_plane", {3, 5, 9, 11, 7, 6}},          // many small tasks
    {"pixel_chunks", {1, 2, 40, 40, 64, 64}},          // 1 task (4 narrow lanes) -> pixels split in 4
    {"channel_blocks", {2, 10, 128, 128, 16, 16}},     // a block of 16 lanes, 10 used
    {"blocks_and_chunks", {1, 9, 200, 200, 48, 48}},   // one 16-lane block, 2 chunks
    {"planar_blocks", {1, 9, 730, 730, 8, 8}},         // planes too large to interleave: blocks of 8 + 1
    {"lane_groups", {2, 250, 6, 7, 9, 8}},             // 16-channel sub-blocks in groups of 2, last one partial
    {"lanes_and_chunks", {1, 20, 40, 40, 64, 64}},     // one group of 16 + 4 channels, pixels split in 4
};

Outputs run_threads(const Problem& p, int threads, gridsampler::OutputMask mask = {}) {
  Problem q = p.relayout(Layout::kContiguous);
  q.options.num_threads = threads;
  return run(q, false, Layout::kContiguous, mask);
}

TEST(Threads, BitwiseIdenticalForAnyThreadCount) {
  for (const Split& split : kSplits) {
    for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
      for (Interpolation mode :
           {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic}) {
        const Options opt{mode, Padding::kReflection, false};
        const Problem p = Problem::random(split.dims, dt, opt, 77, 1.2);
        const Outputs one = run_threads(p, 1);
        const std::string what = std::string(split.name) + " " + describe(opt) + " " +
                                 std::string(gridsampler::to_string(dt));
        for (int threads : {2, 3, 7, 1}) {
          const Outputs o = run_threads(p, threads);
          EXPECT_EQ(o.out.storage(), one.out.storage()) << what << " threads=" << threads;
          EXPECT_EQ(o.dx.storage(), one.dx.storage()) << what << " threads=" << threads;
          EXPECT_EQ(o.dgrid.storage(), one.dgrid.storage()) << what << " threads=" << threads;
        }
        // And close to the float64 reference.
        const Outputs ref = run(p, true);
        for (auto [got, want, name] : {std::tuple{&one.out, &ref.out, "forward"},
                                       std::tuple{&one.dx, &ref.dx, "dx"},
                                       std::tuple{&one.dgrid, &ref.dgrid, "dgrid"}}) {
          const Diff d = compare(got->values(), want->values());
          const double k = dt == DType::kFloat32 ? 16.0 * (split.dims.c + 1) * 16 : 2.0;
          EXPECT_LE(d.max_abs, tolerance(dt, d.max_ref, k)) << what << " " << name;
        }
      }
    }
  }
}

// Only one output wanted: same bits as when both are computed.
TEST(Threads, MaskedRunsMatchFullRuns) {
  for (const Split& split : kSplits) {
    const Problem p = Problem::random(split.dims, DType::kFloat32,
                                      {Interpolation::kBilinear, Padding::kZeros, false}, 5);
    const Outputs full = run_threads(p, 2);
    const Outputs dx_only = run_threads(p, 3, {true, false});
    const Outputs dgrid_only = run_threads(p, 3, {false, true});
    EXPECT_EQ(dx_only.dx.storage(), full.dx.storage()) << split.name;
    EXPECT_EQ(dgrid_only.dgrid.storage(), full.dgrid.storage()) << split.name;
  }
}

}  // namespace
}  // namespace gstest
