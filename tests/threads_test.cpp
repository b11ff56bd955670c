// Results are bit-for-bit the same for any thread count and across runs, on
// shapes that exercise every work split of the backward (one task per
// (n, channel block); pixel chunks when there are few tasks; several channel
// blocks per image), and they agree with the reference. Thread counts are
// bounded (gridsampler::max_threads()), and a plan's team and per-thread
// memory follow its tasks, not the count asked for.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>

#include "common/problem.hpp"
#include "core/validate.hpp"
#include "cpu/plan.hpp"

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
    {"tasks_per_plane", {3, 5, 9, 11, 7, 6}},          // many small tasks (blocks of 4 + 1 narrow lanes)
    {"pixel_chunks", {1, 2, 8, 8, 64, 64}},            // 1 task (4 narrow lanes) -> pixels split in 4
    {"channel_blocks", {2, 10, 32, 32, 16, 16}},       // a block of 16 lanes, 10 used
    {"blocks_and_chunks", {1, 9, 12, 12, 48, 48}},     // one 16-lane block, 2 chunks
    {"planar_blocks", {1, 9, 730, 730, 8, 8}},         // planes too large to interleave: blocks of 8 + 1
    {"lane_groups", {2, 250, 6, 7, 9, 8}},             // 16-channel sub-blocks in groups of 2, last one partial
    {"lanes_and_chunks", {1, 20, 4, 4, 96, 96}},       // blocks of 16 + 4 channels, pixels split in 8
};

// Problem::random's tensors are contiguous already: p runs as it is (a copy
// per run was most of this program's time under the sanitizers).
Outputs run_threads(Problem& p, int threads, gridsampler::OutputMask mask = {}) {
  p.options.num_threads = threads;
  return run(p, false, Layout::kContiguous, mask);
}

// One test per mode, so that ctest can run them side by side (under the
// sanitizers this is the suite's longest program).
class ThreadsByMode : public ::testing::TestWithParam<Interpolation> {};

TEST_P(ThreadsByMode, BitwiseIdenticalForAnyThreadCount) {
  const Interpolation mode = GetParam();
  for (const Split& split : kSplits) {
    for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
      const Options opt{mode, Padding::kReflection, false};
      Problem p = Problem::random(split.dims, dt, opt, 77, 1.2);
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

INSTANTIATE_TEST_SUITE_P(Threads, ThreadsByMode,
                         ::testing::Values(Interpolation::kBilinear, Interpolation::kNearest,
                                           Interpolation::kBicubic),
                         [](const ::testing::TestParamInfo<Interpolation>& info) {
                           return std::string(gridsampler::to_string(info.param));
                         });

// Only one output wanted: same bits as when both are computed.
TEST(Threads, MaskedRunsMatchFullRuns) {
  for (const Split& split : kSplits) {
    Problem p = Problem::random(split.dims, DType::kFloat32,
                                {Interpolation::kBilinear, Padding::kZeros, false}, 5);
    const Outputs full = run_threads(p, 2);
    const Outputs dx_only = run_threads(p, 3, {true, false});
    const Outputs dgrid_only = run_threads(p, 3, {false, true});
    EXPECT_EQ(dx_only.dx.storage(), full.dx.storage()) << split.name;
    EXPECT_EQ(dgrid_only.dgrid.storage(), full.dgrid.storage()) << split.name;
  }
}

// The rule gridsampler.hpp documents.
TEST(Threads, BoundIsFourPerProcessorAtLeast64WithinTheThreadLimit) {
  EXPECT_EQ(gridsampler::max_threads(),
            std::min(std::max(64, 4 * omp_get_num_procs()), omp_get_thread_limit()));
}

// A problem as validation makes it, for the planner alone (no data).
gridsampler::detail::Problem planned(const Dims& d, DType dtype, int threads) {
  gridsampler::detail::Problem p;
  p.n = d.n, p.c = d.c, p.in_h = d.in_h, p.in_w = d.in_w, p.out_h = d.out_h, p.out_w = d.out_w;
  p.input_strides = p.dx_strides = gridsampler::contiguous_strides({d.n, d.c, d.in_h, d.in_w});
  p.dtype = dtype;
  p.options.num_threads = threads;
  return p;
}

// Pixel chunks zero and sum their accumulators only over the input pixels
// their taps reach: with a smooth grid each chunk of output rows reaches a
// band of input rows. Right after a call that filled the cached workspace
// everywhere (a random grid), smooth and shifted grids (some taps outside,
// zero slots) must still match the reference and give the same bits on 1
// and 3 threads: nothing outside a band may leak into dx.
TEST(Threads, ChunksOfSmoothGridsSumOnlyWhereTheirTapsReach) {
  const Dims shapes[] = {{1, 3, 64, 64, 64, 64}, {1, 2, 8, 8, 64, 64}, {1, 1, 64, 64, 64, 64}};
  uint64_t seed = 90;
  for (const Dims& d : shapes) {
    for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kFloat64}) {
      for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic}) {
        for (Padding pad : {Padding::kZeros, Padding::kReflection}) {
          for (double shift : {0.0, 0.4}) {
            const Options opt{mode, pad, false};
            Problem dirty = Problem::random(d, dt, opt, seed++, 1.1);
            Problem p = Problem::random(d, dt, opt, seed++, 1.1);
            for (int64_t n = 0; n < d.n; ++n) {
              for (int64_t h = 0; h < d.out_h; ++h) {
                for (int64_t w = 0; w < d.out_w; ++w) {
                  const double x = (2.0 * w + 1) / d.out_w - 1, y = (2.0 * h + 1) / d.out_h - 1;
                  p.grid.set(n, h, w, 0, 0.9 * x + 0.05 * y + shift);
                  p.grid.set(n, h, w, 1, 0.9 * y - 0.05 * x - shift);
                }
              }
            }
            ASSERT_GT(gridsampler::cpu::plan_backward(planned(d, dt, 2)).pixel_chunks, 1) << to_string(d);
            run_threads(dirty, 1);
            const Outputs one = run_threads(p, 1);
            run_threads(dirty, 3);
            const Outputs three = run_threads(p, 3);
            const std::string what = to_string(d) + " " + describe(opt) + " " +
                                     std::string(gridsampler::to_string(dt)) + " shift " + std::to_string(shift);
            EXPECT_EQ(three.dx.storage(), one.dx.storage()) << what;
            EXPECT_EQ(three.dgrid.storage(), one.dgrid.storage()) << what;
            const Outputs ref = run(p, true);
            const Diff diff = compare(one.dx.values(), ref.dx.values());
            const double k = dt == DType::kBFloat16 ? 2.0 : 16.0 * (d.c + 1) * 16;
            EXPECT_LE(diff.max_abs, tolerance(dt, diff.max_ref, k)) << what;
          }
        }
      }
    }
  }
}

// Each split above takes the plan it is named after (float32, bilinear),
// so the bit-identity tests cover every way the backward divides its work.
TEST(Threads, SplitsTakeThePlansTheyName) {
  using gridsampler::cpu::plan_backward;
  for (const Split& split : kSplits) {
    const auto plan = plan_backward(planned(split.dims, DType::kFloat32, 2));
    const std::string name = split.name;
    EXPECT_EQ(plan.pixel_chunks > 1, name.find("chunks") != std::string::npos) << name;
    const bool blocks = name == "tasks_per_plane" || name == "planar_blocks" || name == "lane_groups" ||
                        name == "lanes_and_chunks";
    EXPECT_EQ(plan.channel_blocks > 1, blocks) << name;
    EXPECT_EQ(plan.lanes == 1, name == "planar_blocks") << name;
  }
}

// A plan runs at most as many threads as it has tasks, and sizes its
// per-thread memory by that team: asking for more costs nothing.
TEST(Threads, PerThreadMemoryFollowsTheTeamThatRuns) {
  using gridsampler::cpu::plan_backward;
  using gridsampler::cpu::plan_forward;
  const int bound = gridsampler::max_threads();
  // Backward in bfloat16 (a float32 accumulator plane per thread), one task:
  // a 1024x1024 plane, too large for pixel chunks.
  const Dims one_task{1, 1, 1024, 1024, 64, 64};
  const auto alone = plan_backward(planned(one_task, DType::kBFloat16, 1));
  const auto asked = plan_backward(planned(one_task, DType::kBFloat16, bound));
  EXPECT_EQ(asked.threads, 1);
  EXPECT_EQ(asked.pixel_chunks, 1);
  EXPECT_EQ(asked.workspace_bytes, alone.workspace_bytes);
  EXPECT_GE(alone.workspace_bytes, (1024 * 1024 + 1) * sizeof(float));
  EXPECT_LT(alone.workspace_bytes, (1024 * 1024 + 1) * sizeof(float) + 256);
  // 128 tasks (one per image): a scratch plane for each thread of the team.
  const Dims many_tasks{128, 1, 32, 32, 8, 8};
  const auto one = plan_backward(planned(many_tasks, DType::kBFloat16, 1));
  const auto all = plan_backward(planned(many_tasks, DType::kBFloat16, bound));
  EXPECT_EQ(all.threads, std::min(bound, 128));
  EXPECT_EQ(all.workspace_bytes - 64, static_cast<std::size_t>(all.threads) * (one.workspace_bytes - 64));

  // Forward: 16 channels read through a per-thread channel-minor copy of the
  // plane; 8x8 output pixels make one task, and their taps read a 31x31
  // plane's pixels about once (sparser taps sample the planes, no copy).
  const Dims one_range{1, 16, 31, 31, 8, 8};
  const auto copy = plan_forward(planned(one_range, DType::kFloat32, 1));
  const auto copies = plan_forward(planned(one_range, DType::kFloat32, bound));
  EXPECT_EQ(copies.lanes, 16);
  EXPECT_EQ(copies.threads, 1);
  EXPECT_EQ(copies.copy_bytes, copy.copy_bytes);
  EXPECT_EQ(copy.copy_bytes, (31 * 31 + 1) * 16 * sizeof(float));
  // Planar: 128 tiles of 64 output pixels.
  EXPECT_EQ(plan_forward(planned({1, 1, 8, 8, 64, 128}, DType::kFloat32, bound)).threads, std::min(bound, 128));
}

// OpenMP's default above the bound (OMP_NUM_THREADS, omp_set_num_threads) is
// capped, not refused; the bound itself is a valid count. Same bits.
TEST(Threads, OpenMPsDefaultAboveTheBoundIsCapped) {
  const int bound = gridsampler::max_threads();
  Problem p = Problem::random(kSplits[0].dims, DType::kFloat32,
                              {Interpolation::kBicubic, Padding::kBorder, false}, 3);
  const Outputs one = run_threads(p, 1);
  const Outputs at_bound = run_threads(p, bound);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(100000);
  const int planned_threads = gridsampler::cpu::plan_forward(planned({1, 1, 8, 8, 64, 128}, DType::kFloat32, 0)).threads;
  const Outputs capped = run_threads(p, 0);
  omp_set_num_threads(saved);
  EXPECT_EQ(planned_threads, std::min(bound, 128));
  for (const Outputs* o : {&at_bound, &capped}) {
    EXPECT_EQ(o->out.storage(), one.out.storage());
    EXPECT_EQ(o->dx.storage(), one.dx.storage());
    EXPECT_EQ(o->dgrid.storage(), one.dgrid.storage());
  }
}

}  // namespace
}  // namespace gstest
