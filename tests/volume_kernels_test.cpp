// The 3-D kernels through grid_sampler_3d / grid_sampler_3d_backward, on
// properties that need no reference: a volume of depth 1 sampled at z = 0 is
// the image; layouts and strides (merged or packed) give the same bits;
// thread counts give the same bits on shapes that take every split; empty
// problems succeed; outputs are written in full and nothing around them.
// (The values against the float64 reference: volume_kernel_vs_reference_test.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "common/problem.hpp"
#include "common/volume_tensor.hpp"
#include "common/volume_problem.hpp"
#include "cpu/plan.hpp"

namespace gstest {
namespace {

using gridsampler::Interpolation;
using gridsampler::Options;
using gridsampler::Padding;
using gridsampler::Shape5;

const Interpolation kModes[] = {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic};
const Padding kPaddings[] = {Padding::kZeros, Padding::kBorder, Padding::kReflection};

// A volume of depth 1 sampled at z = 0 reads one slice with weight 1 along z
// (trilinear: 1 - 0; tricubic: the weights (0, 1, 0, 0)), so output, dx and
// the (x, y) components of dgrid are the image's, computed by the 2-D kernels.
TEST(VolumeKernels, DepthOneIsTheImage) {
  for (DType dt : {DType::kFloat32, DType::kFloat64}) {
    for (Interpolation mode : kModes) {
      for (Padding pad : kPaddings) {
        for (bool align : {false, true}) {
          const Options opt{mode, pad, align};
          for (const VolDims& d : {VolDims{2, 3, 1, 7, 9, 1, 5, 6}, VolDims{1, 19, 1, 6, 5, 1, 7, 4},
                                   VolDims{1, 1, 1, 40, 50, 1, 30, 33}, VolDims{2, 6, 1, 9, 4, 1, 6, 11}}) {
            VolProblem p = VolProblem::random(d, dt, opt, 5, 1.2);
            for (int64_t n = 0; n < d.n; ++n)
              for (int64_t h = 0; h < d.out_h; ++h)
                for (int64_t w = 0; w < d.out_w; ++w) p.grid.set({n, 0, h, w, 2}, 0.0);
            const VolOutputs got = run_volume(p);
            // The same problem as an image.
            Problem q;
            q.options = opt;
            q.input = Tensor(dt, {d.n, d.c, d.in_h, d.in_w});
            q.grid = Tensor(dt, {d.n, d.out_h, d.out_w, 2});
            q.grad = Tensor(dt, {d.n, d.c, d.out_h, d.out_w});
            for (int64_t n = 0; n < d.n; ++n) {
              for (int64_t c = 0; c < d.c; ++c) {
                for (int64_t h = 0; h < d.in_h; ++h)
                  for (int64_t w = 0; w < d.in_w; ++w) q.input.set(n, c, h, w, p.input.get({n, c, 0, h, w}));
                for (int64_t h = 0; h < d.out_h; ++h)
                  for (int64_t w = 0; w < d.out_w; ++w) q.grad.set(n, c, h, w, p.grad.get({n, c, 0, h, w}));
              }
              for (int64_t h = 0; h < d.out_h; ++h)
                for (int64_t w = 0; w < d.out_w; ++w)
                  for (int64_t k = 0; k < 2; ++k) q.grid.set(n, h, w, k, p.grid.get({n, 0, h, w, k}));
            }
            const Outputs want = run(q, false);
            const std::string what = describe(opt) + " " + std::string(gridsampler::to_string(dt)) + " " + to_string(d);
            EXPECT_EQ(got.out.values(), want.out.values()) << what << " forward";
            EXPECT_EQ(got.dx.values(), want.dx.values()) << what << " dx";
            const std::vector<double> g3 = got.dgrid.values(), g2 = want.dgrid.values();
            for (std::size_t i = 0; i < g2.size(); ++i) {
              ASSERT_EQ(g3[i / 2 * 3 + i % 2], g2[i]) << what << " dgrid element " << i;
            }
          }
        }
      }
    }
  }
}

// Every layout the views can take (merged rows, or packed: sliced H,
// negative D) gives the contiguous layout's bits, and writes nothing
// outside the output views.
TEST(VolumeKernels, LayoutsAreBitIdentical) {
  const VolLayout kLayouts[] = {VolLayout::kChannelsLast, VolLayout::kPaddedRows, VolLayout::kSlicedH,
                                VolLayout::kNegativeW, VolLayout::kNegativeD};
  for (DType dt : {DType::kFloat16, DType::kFloat32, DType::kFloat64}) {
    for (Interpolation mode : kModes) {
      const Options opt{mode, Padding::kReflection, false};
      // Planar (1 channel), 4-lane blocks (3), 16-lane blocks (18).
      for (const VolDims& d : {VolDims{2, 1, 5, 6, 7, 4, 5, 6}, VolDims{1, 3, 4, 5, 6, 3, 4, 7},
                               VolDims{2, 18, 3, 4, 5, 4, 3, 5}}) {
        const VolProblem p = VolProblem::random(d, dt, opt, 11, 1.3);
        const VolOutputs base = run_volume(p);
        for (VolLayout layout : kLayouts) {
          const VolOutputs got = run_volume(p.relayout(layout), layout);
          const std::string what = describe(opt) + " " + std::string(gridsampler::to_string(dt)) + " " + to_string(d) + " " +
                                   to_string(layout);
          EXPECT_EQ(got.out.element_bytes(), base.out.element_bytes()) << what << " forward";
          EXPECT_EQ(got.dx.element_bytes(), base.dx.element_bytes()) << what << " dx";
          EXPECT_EQ(got.dgrid.element_bytes(), base.dgrid.element_bytes()) << what << " dgrid";
          EXPECT_TRUE(got.out.outside_untouched() && got.dx.outside_untouched() && got.dgrid.outside_untouched())
              << what;
        }
      }
    }
  }
}

// Thread counts 1, 2, 3 and 7 give the same bits, on shapes whose plans
// split the work every way: planar pixel chunks (1 channel), planar channel
// blocks, interleaved 4- and 16-lane groups with pixel chunks and with
// several channel blocks (dgrid summed over blocks), several images.
TEST(VolumeKernels, ThreadCountsAreBitIdentical) {
  const VolDims kShapes[] = {
      {1, 1, 6, 6, 6, 16, 16, 16},     // one channel: pixel chunks
      {1, 3, 6, 6, 6, 16, 16, 16},     // 4 lanes, chunks sharing one input copy
      {2, 40, 4, 5, 6, 5, 4, 6},       // 16 lanes, groups
      {1, 600, 2, 3, 3, 2, 3, 4},      // several channel blocks: dgrid partials
      {3, 2, 5, 4, 3, 6, 5, 4},
  };
  // The first two shapes do take pixel chunks (at least 1024 voxels each).
  for (int i = 0; i < 2; ++i) {
    const VolDims& d = kShapes[i];
    gridsampler::detail::Problem q;
    q.volume = true;
    q.n = d.n, q.c = d.c, q.in_d = d.in_d, q.in_h = d.in_h, q.in_w = d.in_w;
    q.out_d = d.out_d, q.out_h = d.out_h, q.out_w = d.out_w;
    q.options.num_threads = 2;
    EXPECT_GT(gridsampler::cpu::plan_backward(q).pixel_chunks, 1) << to_string(d);
  }
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    for (Interpolation mode : kModes) {
      const Options opt{mode, Padding::kZeros, true};
      for (const VolDims& d : kShapes) {
        VolProblem p = VolProblem::random(d, dt, opt, 7, 1.2);
        p.options.num_threads = 1;
        const VolOutputs one = run_volume(p);
        for (int threads : {2, 3, 7}) {
          p.options.num_threads = threads;
          const VolOutputs got = run_volume(p);
          const std::string what = describe(opt) + " " + std::string(gridsampler::to_string(dt)) + " " + to_string(d) +
                                   " threads " + std::to_string(threads);
          EXPECT_EQ(got.out.element_bytes(), one.out.element_bytes()) << what;
          EXPECT_EQ(got.dx.element_bytes(), one.dx.element_bytes()) << what;
          EXPECT_EQ(got.dgrid.element_bytes(), one.dgrid.element_bytes()) << what;
        }
      }
    }
  }
}

// Output masks: an unwanted output is neither written nor needed, and the
// wanted one has the bits of the full call.
TEST(VolumeKernels, MaskedRunsMatchFullRuns) {
  for (Interpolation mode : kModes) {
    const Options opt{mode, Padding::kBorder, false};
    for (const VolDims& d : {VolDims{1, 2, 4, 5, 6, 3, 4, 5}, VolDims{2, 17, 3, 4, 5, 3, 3, 3}}) {
      const VolProblem p = VolProblem::random(d, DType::kFloat32, opt, 3, 1.2);
      const VolOutputs full = run_volume(p);
      const VolOutputs dx_only = run_volume(p, VolLayout::kContiguous, {true, false});
      const VolOutputs dgrid_only = run_volume(p, VolLayout::kContiguous, {false, true});
      EXPECT_EQ(dx_only.dx.element_bytes(), full.dx.element_bytes()) << describe(opt);
      EXPECT_EQ(dgrid_only.dgrid.element_bytes(), full.dgrid.element_bytes()) << describe(opt);
      for (double v : dx_only.dgrid.values()) ASSERT_TRUE(std::isnan(v));
      for (double v : dgrid_only.dx.values()) ASSERT_TRUE(std::isnan(v));
    }
  }
}

// Empty problems (N, C or an output dimension 0) succeed; dx is zeros.
TEST(VolumeKernels, EmptyProblemsSucceed) {
  for (const VolDims& d : {VolDims{0, 2, 3, 4, 5, 2, 2, 2}, VolDims{1, 0, 3, 4, 5, 2, 2, 2},
                           VolDims{2, 3, 3, 4, 5, 0, 2, 2}, VolDims{2, 3, 3, 4, 5, 2, 0, 2},
                           VolDims{2, 3, 3, 4, 5, 2, 2, 0}}) {
    for (Interpolation mode : kModes) {
      const VolProblem p = VolProblem::random(d, DType::kFloat32, Options{mode, Padding::kZeros, false}, 1);
      const VolOutputs got = run_volume(p, VolLayout::kSlicedH);
      for (double v : got.dx.values()) ASSERT_EQ(v, 0.0) << to_string(d);
      for (double v : got.dgrid.values()) ASSERT_EQ(v, 0.0) << to_string(d);
      EXPECT_EQ(got.out.numel(), 0) << to_string(d);
    }
  }
}

}  // namespace
}  // namespace gstest
