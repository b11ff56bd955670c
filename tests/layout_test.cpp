// Results do not depend on memory layout, and output_mask is honoured.
#include <gtest/gtest.h>

#include "common/problem.hpp"
#include "cpu/dispatch.hpp"
#include "cpu/plan.hpp"
#include "reference/reference.hpp"

namespace gstest {
namespace {

using gridsampler::Interpolation;
using gridsampler::Options;
using gridsampler::Padding;

const Layout kLayouts[] = {Layout::kChannelsLast, Layout::kPadded, Layout::kTransposedHW,
                           Layout::kNegative};

// Every input and output layout gives bit-for-bit the contiguous result.
TEST(Layout, StridedInputsAndOutputsMatchContiguous) {
  // Few channels (planes one at a time), and enough for a full 16-channel
  // block plus a partial one over several tiles of output pixels (the
  // channel-minor copies have one path per layout); one channel (fused
  // tiles where the grid is dense) with output rows longer than a tile, so
  // that a tile's grid points start and end mid-row.
  for (const Dims& dims : {Dims{2, 5, 6, 7, 4, 3}, Dims{2, 35, 9, 11, 13, 7}, Dims{3, 1, 8, 9, 5, 70}})
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
    for (Interpolation mode :
         {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic}) {
      const Options opt{mode, Padding::kReflection, false};
      const Problem p = Problem::random(dims, dtype, opt, 8, 1.2);
      const Outputs base = run(p, false);
      for (Layout in_layout : kLayouts) {
        for (Layout out_layout : {Layout::kContiguous, in_layout}) {
          const Outputs o = run(p.relayout(in_layout), false, out_layout);
          const std::string what = describe(opt) + " " + to_string(dims) + " " +
                                   std::string(gridsampler::to_string(dtype)) + " in=" +
                                   to_string(in_layout) + " out=" + to_string(out_layout);
          EXPECT_EQ(o.out.values(), base.out.values()) << what;
          EXPECT_EQ(o.dx.values(), base.dx.values()) << what;
          EXPECT_EQ(o.dgrid.values(), base.dgrid.values()) << what;
        }
      }
    }
  }
}

// Backwards that touch a small part of each input plane (tiny outputs,
// downsampling) accumulate into planes, not channel-minor blocks, whatever
// the layout: the choice is the shape's, so channels-last and strided
// tensors give the contiguous bits. Channels-last dx is accumulated in
// place, its pixels C apart.
TEST(Layout, SparseBackwardsTakeThePlanesOfContiguousOnes) {
  gridsampler::detail::Problem shape;
  shape.n = 4, shape.c = 6, shape.in_h = 512, shape.in_w = 256, shape.out_h = 5, shape.out_w = 5;
  shape.options = {Interpolation::kBicubic, Padding::kBorder, true};
  shape.input_strides = shape.dx_strides = {6 * 512 * 256, 1, 256 * 6, 6};  // channels-last
  const auto last = gridsampler::cpu::plan_backward(shape);
  EXPECT_EQ(last.lanes, 1);
  EXPECT_TRUE(last.direct_dx);
  EXPECT_EQ(last.acc_step, 6);
  // In 16 bits, [pixel][channel] accumulators, written out by rows.
  shape.dtype = DType::kBFloat16;
  const auto last16 = gridsampler::cpu::plan_backward(shape);
  EXPECT_EQ(last16.lanes, 1);
  EXPECT_FALSE(last16.direct_dx);
  EXPECT_EQ(last16.acc_step, last16.channel_block);
  shape.dtype = DType::kFloat32;
  shape.input_strides = shape.dx_strides = {6 * 512 * 256, 512 * 256, 256, 1};
  const auto contiguous = gridsampler::cpu::plan_backward(shape);
  EXPECT_EQ(contiguous.lanes, 1);
  EXPECT_EQ(contiguous.channel_block, last.channel_block);
  EXPECT_EQ(contiguous.acc_step, 1);

  // Few output pixels for 5 channels (narrow blocks otherwise) and for 18
  // (16 lanes), 20 in blocks of 8, 8 and 4 (planes too large for more),
  // and a 4x downsampling of 3 channels.
  const Dims shapes[] = {
      {2, 5, 40, 48, 3, 4}, {2, 18, 40, 48, 3, 4}, {1, 20, 96, 120, 3, 4}, {2, 3, 48, 48, 12, 12}};
  const int64_t targets = gridsampler::cpu::available_targets();
  for (int64_t t = targets; t != 0; t &= t - 1) {
    gridsampler::cpu::force_targets(t & -t);
    for (const Dims& dims : shapes)
    for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64})
    for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic})
    for (int threads : {1, 3}) {
      Options opt{mode, Padding::kReflection, false};
      opt.num_threads = threads;
      const Problem p = Problem::random(dims, dtype, opt, 31, 1.2);
      const Outputs base = run(p, false);
      for (Layout in_layout : kLayouts) {
        for (Layout out_layout : {Layout::kContiguous, in_layout}) {
          const Outputs o = run(p.relayout(in_layout), false, out_layout);
          const std::string what = describe(opt) + " " + to_string(dims) + " " +
                                   std::string(gridsampler::to_string(dtype)) + " threads " +
                                   std::to_string(threads) + " target " + std::to_string(t & -t) +
                                   " in=" + to_string(in_layout) + " out=" + to_string(out_layout);
          EXPECT_EQ(o.dx.values(), base.dx.values()) << what;
          EXPECT_EQ(o.dgrid.values(), base.dgrid.values()) << what;
        }
      }
    }
  }
  gridsampler::cpu::force_targets(0);
}

// The reference too.
TEST(Layout, ReferenceIsLayoutIndependent) {
  const Options opt{Interpolation::kBicubic, Padding::kBorder, true};
  const Problem p = Problem::random({2, 3, 5, 4, 6, 3}, DType::kFloat32, opt, 9);
  const Outputs base = run(p, true);
  for (Layout layout : kLayouts) {
    const Outputs o = run(p.relayout(layout), true, layout);
    EXPECT_EQ(o.dx.values(), base.dx.values()) << to_string(layout);
    EXPECT_EQ(o.dgrid.values(), base.dgrid.values()) << to_string(layout);
  }
}

// An output that is not asked for is left byte-for-byte as it was, and the
// one that is asked for equals the full computation.
TEST(OutputMask, UnrequestedOutputsUntouched) {
  for (bool reference : {false, true}) {
    for (DType dtype : {DType::kFloat16, DType::kFloat32}) {
      const Options opt{Interpolation::kBilinear, Padding::kZeros, false};
      const Problem p = Problem::random({2, 3, 5, 6, 4, 4}, dtype, opt, 12);
      const Outputs full = run(p, reference);
      for (gridsampler::OutputMask mask : {gridsampler::OutputMask{true, false},
                                           gridsampler::OutputMask{false, true}}) {
        Tensor dx(dtype, p.input.shape()), dgrid(dtype, p.grid.shape());
        const auto dx_before = dx.storage();
        const auto dgrid_before = dgrid.storage();
        auto bwd = reference ? &gridsampler::reference::grid_sampler_2d_backward
                             : &gridsampler::grid_sampler_2d_backward;
        const auto s = bwd(p.grad.view(), p.input.view(), p.grid.view(), dx.mutable_view(),
                           dgrid.mutable_view(), opt, mask);
        ASSERT_TRUE(s.ok()) << s.message();
        if (mask.input) {
          EXPECT_EQ(dx.values(), full.dx.values());
          EXPECT_EQ(dgrid.storage(), dgrid_before);
        } else {
          EXPECT_EQ(dgrid.values(), full.dgrid.values());
          EXPECT_EQ(dx.storage(), dx_before);
        }
      }
      // A masked-out output may be an empty view.
      Tensor dx(dtype, p.input.shape());
      auto bwd = reference ? &gridsampler::reference::grid_sampler_2d_backward
                           : &gridsampler::grid_sampler_2d_backward;
      const auto s = bwd(p.grad.view(), p.input.view(), p.grid.view(), dx.mutable_view(),
                         gridsampler::MutableTensorView{}, opt, {true, false});
      EXPECT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(dx.values(), full.dx.values());
    }
  }
}

}  // namespace
}  // namespace gstest
