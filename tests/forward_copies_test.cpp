// The interleaved forward's channel-minor copies, private per thread or one
// shared by the team (ForwardPlan::shared_copy), and the planar path that
// samples the planes themselves, against each other: the same bits (each
// sums its taps in order as multiply-adds) on every SIMD target this CPU runs, for every mode,
// padding and align_corners, every dtype, 2 to 17 channels (both lane
// widths, partial blocks), several images, dense, channels-last and
// strided planes, 1 to 3 threads, and volumes; planes of one copy stretch
// and of several. Which copies the planner chooses is checked too.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <utility>

#include "common/problem.hpp"
#include "common/volume_problem.hpp"
#include "cpu/tuning.hpp"
#include "core/validate.hpp"
#include "cpu/dispatch.hpp"
#include "cpu/plan.hpp"
#include "cpu/volume_call.hpp"
#include "hwy/targets.h"

namespace gstest {
namespace {

namespace gs = gridsampler;
using gs::Interpolation;
using gs::Options;
using gs::Padding;
using gs::cpu::ForwardCopies;

using Param = std::tuple<Interpolation, DType>;

std::string name(const ::testing::TestParamInfo<Param>& info) {
  const auto [mode, dtype] = info.param;
  return std::string(gs::to_string(mode)) + "_" + std::string(gs::to_string(dtype));
}

// The forward of p through a plan made with `copies`, on `threads` threads.
Tensor run_forward(const Problem& p, Layout layout, ForwardCopies copies, int threads) {
  const DType dt = p.input.dtype();
  Tensor out(dt, {p.dims.n, p.dims.c, p.dims.out_h, p.dims.out_w}, layout);
  Options opt = p.options;
  opt.num_threads = threads;
  gs::detail::Problem fp;
  gs::Status s = gs::detail::validate_forward(p.input.view(), p.grid.view(), out.mutable_view(), opt, &fp);
  EXPECT_TRUE(s.ok()) << s.message();
  const gs::cpu::ForwardPlan plan = gs::cpu::plan_forward(fp, copies);
  EXPECT_EQ(plan.lanes > 1, copies != ForwardCopies::kNone);
  EXPECT_EQ(plan.shared_copy, copies == ForwardCopies::kShared);
  gs::cpu::run_forward(plan, p.input.view(), p.grid.view(), out.mutable_view());
  return out;
}

const Dims kShapes[] = {
    {3, 2, 5, 7, 6, 9},        // tiny planes, partial tiles
    {2, 3, 70, 90, 33, 40},    // a plane of two copy stretches (6300 pixels)
    {1, 5, 64, 80, 100, 70},   // one image, more output pixels than input
    {2, 16, 9, 11, 8, 8},      // one full 16-lane block, one tile
    {2, 17, 65, 66, 20, 21},   // a full and a partial 16-lane block
};

class ForwardCopiesPaths : public ::testing::TestWithParam<Param> {};

TEST_P(ForwardCopiesPaths, SharedAndPrivateCopiesGiveTheSameBits) {
  const auto [mode, dtype] = GetParam();
  const int64_t targets = gs::cpu::available_targets();
  for (int64_t t = targets; t != 0; t &= t - 1) {
    const int64_t target = t & -t;
    gs::cpu::force_targets(target);
    uint64_t seed = 21;
    for (const Dims& d : kShapes) {
      for (Padding pad : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
        for (bool align : {false, true}) {
          const Options opt{mode, pad, align};
          const Problem base = Problem::random(d, dtype, opt, seed++, 1.4);
          for (Layout layout : {Layout::kContiguous, Layout::kChannelsLast, Layout::kNegative}) {
            const Problem p = base.relayout(layout);
            const Tensor want = run_forward(p, layout, ForwardCopies::kPerThread, 1);
            const std::string what = std::string(gs::cpu::target_name(target)) + " " + describe(opt) + " " +
                                     std::string(gs::to_string(dtype)) + " " + to_string(d) + " " +
                                     to_string(layout);
            const std::pair<ForwardCopies, int> runs[] = {{ForwardCopies::kPerThread, 3},
                                                          {ForwardCopies::kShared, 1},
                                                          {ForwardCopies::kShared, 2},
                                                          {ForwardCopies::kNone, 2}};
            for (const auto& [copies, threads] : runs) {
              const Tensor got = run_forward(p, layout, copies, threads);
              const char* path = copies == ForwardCopies::kShared  ? " shared"
                                 : copies == ForwardCopies::kNone ? " planar"
                                                                   : " per thread";
              EXPECT_EQ(got.storage(), want.storage()) << what << path << ", " << threads << " threads";
            }
          }
        }
      }
    }
  }
  gs::cpu::force_targets(0);
}

INSTANTIATE_TEST_SUITE_P(All, ForwardCopiesPaths,
                         ::testing::Combine(::testing::Values(Interpolation::kBilinear, Interpolation::kNearest,
                                                              Interpolation::kBicubic),
                                            ::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32,
                                                              DType::kFloat64)),
                         name);

// The lane width the planner gives p's forward.
int planned_lanes(const Problem& p, Layout layout) {
  Tensor out(p.input.dtype(), {p.dims.n, p.dims.c, p.dims.out_h, p.dims.out_w}, layout);
  gs::detail::Problem fp;
  const gs::Status s = gs::detail::validate_forward(p.input.view(), p.grid.view(), out.mutable_view(), p.options, &fp);
  EXPECT_TRUE(s.ok()) << s.message();
  return gs::cpu::plan_forward(fp).lanes;
}

// Exactly 8 channels take two narrow blocks from planar input where the
// stencil is small (nearest, bilinear), one full block from channels-last
// input or for bicubic. Each output value is its own lane's arithmetic, so
// both widths give the same bits, on every target and dtype.
TEST(ForwardCopies, EightChannelsGiveTheSameBitsInEitherBlockWidth) {
  const Dims d{2, 8, 20, 23, 17, 19};
  const int64_t targets = gs::cpu::available_targets();
  for (int64_t t = targets; t != 0; t &= t - 1) {
    const int64_t target = t & -t;
    gs::cpu::force_targets(target);
    uint64_t seed = 40;
    for (Interpolation mode : {Interpolation::kNearest, Interpolation::kBilinear, Interpolation::kBicubic}) {
      for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
        for (Padding pad : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
          for (bool align : {false, true}) {
            const Options opt{mode, pad, align};
            const Problem planar = Problem::random(d, dtype, opt, seed++, 1.4);
            const Problem last = planar.relayout(Layout::kChannelsLast);
            const std::string what = std::string(gs::cpu::target_name(target)) + " " + describe(opt) + " " +
                                     std::string(gs::to_string(dtype));
            EXPECT_EQ(planned_lanes(planar, Layout::kContiguous),
                      mode == Interpolation::kBicubic ? gs::cpu::kLanes : gs::cpu::kNarrowLanes)
                << what;
            EXPECT_EQ(planned_lanes(last, Layout::kChannelsLast), gs::cpu::kLanes) << what;
            const Tensor want = run_forward(planar, Layout::kContiguous, ForwardCopies::kPerThread, 1);
            const Tensor got =
                run_forward(last, Layout::kChannelsLast, ForwardCopies::kPerThread, 2).relayout(Layout::kContiguous);
            EXPECT_EQ(got.storage(), want.storage()) << what;
          }
        }
      }
    }
  }
  gs::cpu::force_targets(0);
}

// Volumes take the same driver with three grid components.
TEST(ForwardCopies, VolumesSharedAndPrivateGiveTheSameBits) {
  for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic}) {
    const Options opt{mode, Padding::kReflection, false};
    const VolProblem p = VolProblem::random({2, 3, 9, 10, 11, 4, 5, 6}, DType::kFloat32, opt, 5, 1.3);
    std::vector<std::vector<unsigned char>> results;
    for (ForwardCopies copies : {ForwardCopies::kPerThread, ForwardCopies::kShared}) {
      VolTensor out(DType::kFloat32, p.grad.shape());
      Options o = opt;
      o.num_threads = 2;
      gs::detail::Problem fp;
      gs::Status s = gs::detail::validate_forward_3d(p.input.view(), p.grid.view(), out.mutable_view(), o, &fp);
      ASSERT_TRUE(s.ok()) << s.message();
      const gs::cpu::ForwardPlan plan = gs::cpu::plan_forward_3d(fp, p.input.view(), copies);
      EXPECT_EQ(plan.shared_copy, copies == ForwardCopies::kShared);
      s = gs::cpu::run_forward_3d(plan, p.input.view(), p.grid.view(), out.mutable_view());
      ASSERT_TRUE(s.ok()) << s.message();
      results.push_back(out.element_bytes());
    }
    EXPECT_EQ(results[1], results[0]) << describe(opt);
  }
}

gs::detail::Problem dense(int64_t n, int64_t c, int64_t side, DType dtype, int threads) {
  gs::detail::Problem p;
  p.n = n;
  p.c = c;
  p.in_h = p.in_w = side;
  p.out_h = p.out_w = side;
  p.input_strides = {c * side * side, side * side, side, 1};
  p.dtype = dtype;
  p.options.num_threads = threads;
  return p;
}

// Private copies while every thread has its own (n, block) tasks and all
// the copies fit kMaxPrivateCopiesBytes and the output; one shared copy
// otherwise.
TEST(ForwardCopies, PlannerSharesCopiesOnlyWherePrivateOnesCostMore) {
  using gs::cpu::plan_forward;
  using gs::cpu::kMaxPrivateCopiesBytes;
  const std::size_t rgb_1024 = (1024 * 1024 + 1) * 4 * sizeof(float);
  // Many small images: one copy per thread.
  const auto small = plan_forward(dense(256, 3, 32, DType::kFloat32, 2));
  EXPECT_EQ(small.lanes, 4);
  EXPECT_FALSE(small.shared_copy);
  EXPECT_EQ(small.copy_bytes, 2 * (32 * 32 + 1) * 4 * sizeof(float));
  // One image for two threads: one copy, made and read by both.
  const auto one = plan_forward(dense(1, 3, 1024, DType::kFloat32, 2));
  EXPECT_TRUE(one.shared_copy);
  EXPECT_EQ(one.threads, 2);
  EXPECT_EQ(one.copy_bytes, rgb_1024);
  // ... and for one thread, its private copy.
  const auto alone = plan_forward(dense(1, 3, 1024, DType::kFloat32, 1));
  EXPECT_FALSE(alone.shared_copy);
  EXPECT_EQ(alone.copy_bytes, rgb_1024);
  // Two images, two threads: private copies while both fit the bound.
  ASSERT_GT(2 * rgb_1024, kMaxPrivateCopiesBytes);
  EXPECT_TRUE(plan_forward(dense(2, 3, 1024, DType::kFloat32, 2)).shared_copy);
  const auto fits = plan_forward(dense(4, 3, 512, DType::kFloat32, 2));
  EXPECT_FALSE(fits.shared_copy);
  EXPECT_EQ(fits.copy_bytes, 2 * (512 * 512 + 1) * 4 * sizeof(float));
  // Two copies of 4 lanes would outgrow the output of two 3-channel images.
  const auto outgrown = plan_forward(dense(2, 3, 512, DType::kFloat32, 2));
  EXPECT_TRUE(outgrown.shared_copy);
  EXPECT_EQ(outgrown.copy_bytes, (512 * 512 + 1) * 4 * sizeof(float));
  // ... but not where all the private copies are small: four 8-channel
  // 64^2 images sampled bicubically take two 16-lane copies a little larger
  // than their output, 0.5 MiB in all.
  auto bicubic = dense(4, 8, 64, DType::kFloat32, 2);
  bicubic.options.interpolation = gs::Interpolation::kBicubic;
  const auto small_outgrown = plan_forward(bicubic);
  EXPECT_EQ(small_outgrown.lanes, 16);
  EXPECT_FALSE(small_outgrown.shared_copy);
  EXPECT_EQ(small_outgrown.copy_bytes, 2 * (64 * 64 + 1) * 16 * sizeof(float));
  // One channel stays planar.
  EXPECT_EQ(plan_forward(dense(1, 1, 1024, DType::kFloat32, 2)).lanes, 1);
}

// Where the CPU's gathers are cheap (planar_downsampling_pays()), forwards
// sample the planes directly: of 2 to 7 channels that read each input pixel
// about once or less (downsampling by 2 or more), and through fused tiles
// of 2 channels, of 3 by nearest, or of 3 or 4 with at most half a plane of
// output pixels. The others keep their copies. Either way the bits are the
// same (above).
TEST(ForwardCopies, PlannerSamplesPlanesForDownsamplingWhereGathersAreCheap) {
  using gs::cpu::plan_forward;
  auto resize = [](int64_t c, int64_t side, int64_t out_side, Interpolation mode) {
    gs::detail::Problem p = dense(8, c, side, DType::kFloat32, 2);
    p.out_h = p.out_w = out_side;
    p.options.interpolation = mode;
    return p;
  };
  const int downsampling = gs::cpu::planar_downsampling_pays() ? 1 : gs::cpu::kNarrowLanes;
  EXPECT_EQ(plan_forward(resize(3, 512, 256, Interpolation::kBilinear)).lanes, downsampling);
  EXPECT_EQ(plan_forward(resize(2, 1024, 256, Interpolation::kBicubic)).lanes, downsampling);  // 16 taps x 1/16
  // (a tap per output pixel at 1/16 of the plane: planes on every CPU, below)
  EXPECT_EQ(plan_forward(resize(7, 512, 128, Interpolation::kNearest)).lanes, 1);
  // Each input pixel read more than once, 16 taps at a quarter and 4 taps
  // at half the plane: fused tiles, which take 3 or 4 channels up to half a
  // plane of output pixels, and 2 channels at any size.
  EXPECT_EQ(plan_forward(resize(3, 512, 256, Interpolation::kBicubic)).lanes, downsampling);
  EXPECT_EQ(plan_forward(resize(4, 512, 362, Interpolation::kBilinear)).lanes, downsampling);
  EXPECT_EQ(plan_forward(resize(2, 64, 128, Interpolation::kBilinear)).lanes, downsampling);
  EXPECT_EQ(plan_forward(resize(3, 512, 512, Interpolation::kNearest)).lanes, downsampling);
  EXPECT_EQ(plan_forward(resize(3, 512, 363, Interpolation::kBilinear)).lanes, gs::cpu::kNarrowLanes);
  EXPECT_EQ(plan_forward(resize(4, 512, 512, Interpolation::kNearest)).lanes, gs::cpu::kNarrowLanes);
  EXPECT_EQ(plan_forward(resize(4, 64, 64, Interpolation::kBicubic)).lanes, gs::cpu::kNarrowLanes);
  // Fused tiles wherever they sample the planes (5 to 7 channels use the
  // builders' tiles).
  EXPECT_EQ(plan_forward(resize(3, 512, 256, Interpolation::kBilinear)).fused != nullptr,
            gs::cpu::planar_downsampling_pays() && gs::cpu::current_target() != HWY_SCALAR);
  EXPECT_EQ(plan_forward(resize(7, 512, 128, Interpolation::kNearest)).fused, nullptr);
  // Full blocks keep their copies, and so does channels-last input.
  EXPECT_EQ(plan_forward(resize(16, 512, 256, Interpolation::kBilinear)).lanes, gs::cpu::kLanes);
  gs::detail::Problem last = resize(3, 512, 256, Interpolation::kBilinear);
  last.input_strides = {3 * 512 * 512, 1, 3 * 512, 3};
  EXPECT_EQ(plan_forward(last).lanes, gs::cpu::kNarrowLanes);
}

// Forwards of at most an eighth of a plane's pixels whose taps read each
// input pixel a quarter of a time or less (tiny outputs, points, bilinear
// downsampling by 4 or more) sample the planes on every CPU and in every
// layout: a channel-minor copy would move the whole plane for a few taps.
// Larger outputs keep their copies. (The bits are those of the copies:
// SharedAndPrivateCopiesGiveTheSameBits.)
TEST(ForwardCopies, PlannerSamplesPlanesForTinyOutputs) {
  using gs::cpu::plan_forward;
  auto sampled = [](int64_t c, int64_t side, int64_t out_h, int64_t out_w, Interpolation mode) {
    gs::detail::Problem p = dense(16, c, side, DType::kFloat64, 2);
    p.out_h = out_h, p.out_w = out_w;
    p.options.interpolation = mode;
    return p;
  };
  EXPECT_EQ(plan_forward(sampled(24, 128, 3, 3, Interpolation::kBilinear)).lanes, 1);
  EXPECT_EQ(plan_forward(sampled(64, 128, 1, 64, Interpolation::kBicubic)).lanes, 1);  // 16 x 64 = plane / 16
  EXPECT_EQ(plan_forward(sampled(16, 128, 32, 32, Interpolation::kBilinear)).lanes, 1);  // 4 x 1024 = plane / 4
  gs::detail::Problem last = sampled(5, 128, 7, 7, Interpolation::kNearest);
  last.input_strides = {5 * 128 * 128, 1, 5 * 128, 5};
  EXPECT_EQ(plan_forward(last).lanes, 1);
  // Each input pixel read more than a quarter of a time, or more than an
  // eighth of a plane of output pixels: copies.
  EXPECT_EQ(plan_forward(sampled(24, 128, 32, 36, Interpolation::kBilinear)).lanes, gs::cpu::kLanes);
  EXPECT_EQ(plan_forward(sampled(24, 128, 64, 64, Interpolation::kNearest)).lanes, gs::cpu::kLanes);
  EXPECT_EQ(plan_forward(sampled(64, 128, 1, 1024, Interpolation::kBicubic)).lanes, gs::cpu::kLanes);
}

}  // namespace
}  // namespace gstest
