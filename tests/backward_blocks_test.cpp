// The backward's channel blocks: the width the planner takes, and that a
// narrower width gives the same bits. Exactly 8 channels by nearest go as
// two 4-lane blocks in one task (plan.cpp, backward_lanes_for), while 9
// channels take one 16-lane block. Nearest adds each channel's grad at one
// tap per pixel, in pixel order, whatever the width, so the first 8
// channels of a 9-channel problem must give the bits of the same 8-channel
// problem: on every SIMD target, dtype, padding and layout, for images and
// volumes, on 1 and 3 threads, with pixel chunks and without.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/problem.hpp"
#include "common/volume_problem.hpp"
#include "core/validate.hpp"
#include "cpu/dispatch.hpp"
#include "cpu/plan.hpp"
#include "cpu/tuning.hpp"

namespace gstest {
namespace {

using gridsampler::Interpolation;
using gridsampler::Options;
using gridsampler::Padding;

// The values of the first `keep` channels of an (N, C, ...) tensor's
// row-major values, `inner` elements per channel.
std::vector<double> first_channels(const std::vector<double>& v, int64_t n, int64_t c, int64_t keep,
                                   int64_t inner) {
  std::vector<double> out;
  for (int64_t i = 0; i < n; ++i) {
    const auto from = v.begin() + i * c * inner;
    out.insert(out.end(), from, from + keep * inner);
  }
  return out;
}

// Bit patterns, so that -0 and +0 differ.
std::vector<uint64_t> bits(const std::vector<double>& v) {
  std::vector<uint64_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * sizeof(double));
  return out;
}

gridsampler::detail::Problem planned(int64_t n, int64_t c, int64_t in_d, int64_t in_h, int64_t in_w,
                                     int64_t out_pixels, Interpolation mode) {
  gridsampler::detail::Problem p;
  p.n = n, p.c = c, p.in_d = in_d, p.in_h = in_h, p.in_w = in_w;
  p.out_h = 1, p.out_w = out_pixels;
  p.volume = in_d > 1;
  const int64_t plane = in_d * in_h * in_w;
  p.input_strides = p.dx_strides = {c * plane, plane, in_w, 1};
  p.options.interpolation = mode;
  p.options.num_threads = 2;
  return p;
}

TEST(BackwardBlocks, EightNearestChannelsTakeTwoNarrowBlocksInOneTask) {
  using gridsampler::cpu::plan_backward;
  const auto eight = plan_backward(planned(4, 8, 48, 48, 48, 48 * 48 * 48, Interpolation::kNearest));
  EXPECT_EQ(eight.lanes, gridsampler::cpu::kNarrowLanes);
  EXPECT_EQ(eight.channel_block, 8);
  EXPECT_EQ(eight.channel_blocks, 1);
  // Half the accumulators of a 16-lane block.
  EXPECT_EQ(eight.accumulator_elems, 8 * (48 * 48 * 48 + 1));
  // Images too; other channel counts and modes keep their widths.
  EXPECT_EQ(plan_backward(planned(8, 8, 1, 64, 64, 64 * 64, Interpolation::kNearest)).lanes,
            gridsampler::cpu::kNarrowLanes);
  EXPECT_EQ(plan_backward(planned(8, 9, 1, 64, 64, 64 * 64, Interpolation::kNearest)).lanes,
            gridsampler::cpu::kLanes);
  EXPECT_EQ(plan_backward(planned(8, 8, 1, 64, 64, 64 * 64, Interpolation::kBilinear)).lanes,
            gridsampler::cpu::kLanes);
  EXPECT_EQ(plan_backward(planned(8, 8, 1, 64, 64, 64 * 64, Interpolation::kBicubic)).lanes,
            gridsampler::cpu::kLanes);
  // Nearest needs no copy of the input values: a single large task may take
  // two pixel chunks where the copy would have tipped it over
  // kMaxSingleTaskChunkBytes (two chunks of 8 x 96^3 accumulators are 56 MiB).
  const auto single = plan_backward(planned(1, 8, 96, 96, 96, 96 * 96 * 96, Interpolation::kNearest));
  EXPECT_EQ(single.pixel_chunks, 2);
  EXPECT_EQ(single.threads, 2);
}

TEST(BackwardBlocks, EightNearestChannelsGiveTheBitsOfASixteenLaneBlock) {
  // (n, in_h, in_w, out_h, out_w): small tasks, and one image whose pixels
  // are split in chunks (the same number for 8 and 9 channels, checked).
  const Dims shapes[] = {{3, 0, 11, 13, 9, 10}, {1, 0, 64, 64, 64, 64}};
  const int64_t targets = gridsampler::cpu::available_targets();
  for (int64_t t = targets; t != 0; t &= t - 1) {
    const int64_t target = t & -t;
    gridsampler::cpu::force_targets(target);
    uint64_t seed = 90;
    for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
      for (Padding pad : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
        for (bool align : {false, true}) {
          const Options opt{Interpolation::kNearest, pad, align};
          for (Dims d : shapes) {
            d.c = 9;
            const Problem nine = Problem::random(d, dtype, opt, seed++, 1.3);
            Dims d8 = d;
            d8.c = 8;
            Problem eight{d8, opt, Tensor(dtype, {d.n, 8, d.in_h, d.in_w}), nine.grid,
                          Tensor(dtype, {d.n, 8, d.out_h, d.out_w})};
            eight.input.assign(first_channels(nine.input.values(), d.n, 9, 8, d.in_h * d.in_w));
            eight.grad.assign(first_channels(nine.grad.values(), d.n, 9, 8, d.out_h * d.out_w));
            const std::string what = std::string(gridsampler::cpu::target_name(target)) + " " + describe(opt) +
                                     " " + std::string(gridsampler::to_string(dtype)) + " " + to_string(d8);
            const int64_t pixels = d.out_h * d.out_w;
            const int64_t chunks =
                gridsampler::cpu::plan_backward(planned(d.n, 8, 1, d.in_h, d.in_w, pixels, opt.interpolation))
                    .pixel_chunks;
            ASSERT_EQ(chunks,
                      gridsampler::cpu::plan_backward(planned(d.n, 9, 1, d.in_h, d.in_w, pixels, opt.interpolation))
                          .pixel_chunks)
                << what;
            ASSERT_EQ(chunks > 1, d.n == 1) << what;
            const Outputs want = run(nine, false);
            const auto want_dx = bits(first_channels(want.dx.values(), d.n, 9, 8, d.in_h * d.in_w));
            for (Layout layout : {Layout::kContiguous, Layout::kChannelsLast}) {
              for (int threads : {1, 3}) {
                Problem q = eight.relayout(layout);
                q.options.num_threads = threads;
                const Outputs got = run(q, false, layout);
                const std::string where = what + " " + to_string(layout) + " threads " + std::to_string(threads);
                EXPECT_EQ(bits(got.dx.values()), want_dx) << where;
                EXPECT_EQ(bits(got.dgrid.values()), bits(want.dgrid.values())) << where;
              }
            }
          }
        }
      }
    }
  }
  gridsampler::cpu::force_targets(0);
}

TEST(BackwardBlocks, EightNearestVolumeChannelsGiveTheBitsOfASixteenLaneBlock) {
  const int64_t targets = gridsampler::cpu::available_targets();
  for (int64_t t = targets; t != 0; t &= t - 1) {
    const int64_t target = t & -t;
    gridsampler::cpu::force_targets(target);
    uint64_t seed = 120;
    for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
      for (Padding pad : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
        for (bool align : {false, true}) {
          const Options opt{Interpolation::kNearest, pad, align};
          const VolDims d{2, 9, 7, 8, 9, 6, 5, 7};
          const VolProblem nine = VolProblem::random(d, dtype, opt, seed++, 1.3);
          VolDims d8 = d;
          d8.c = 8;
          VolProblem eight{d8, opt, VolTensor(dtype, {d.n, 8, d.in_d, d.in_h, d.in_w}), nine.grid,
                           VolTensor(dtype, {d.n, 8, d.out_d, d.out_h, d.out_w})};
          const int64_t in_plane = d.in_d * d.in_h * d.in_w, out_plane = d.out_d * d.out_h * d.out_w;
          eight.input.assign(first_channels(nine.input.values(), d.n, 9, 8, in_plane));
          eight.grad.assign(first_channels(nine.grad.values(), d.n, 9, 8, out_plane));
          const VolOutputs want = run_volume(nine);
          const auto want_dx = bits(first_channels(want.dx.values(), d.n, 9, 8, in_plane));
          for (VolLayout layout : {VolLayout::kContiguous, VolLayout::kChannelsLast}) {
            for (int threads : {1, 3}) {
              VolProblem q = eight.relayout(layout);
              q.options.num_threads = threads;
              const VolOutputs got = run_volume(q, layout);
              const std::string where = std::string(gridsampler::cpu::target_name(target)) + " " + describe(opt) +
                                        " " + std::string(gridsampler::to_string(dtype)) + " " +
                                        to_string(layout) + " threads " + std::to_string(threads);
              EXPECT_EQ(bits(got.dx.values()), want_dx) << where;
              EXPECT_EQ(bits(got.dgrid.values()), bits(want.dgrid.values())) << where;
            }
          }
        }
      }
    }
  }
  gridsampler::cpu::force_targets(0);
}

}  // namespace
}  // namespace gstest
