// Fused one-channel tiles (src/cpu/fused-inl.h) of images and volumes
// against the builders and microkernels they replace: the same bits for the
// forward, dx and dgrid, on every SIMD target this CPU runs, for every
// padding and align_corners, float and double, each output mask, 2 and 3
// threads; affine grids (neighbouring pixels close together), grids near
// the image, far outside it (reflection folding
// thousands of times), beyond the vector fold's limit, and with NaN,
// infinities, huge values and lattice points; planes of 1, 2 and more
// pixels, tiny outputs, partial tiles, and an image (a volume) large enough
// that its pixels are split into chunks; bilinear (trilinear), bicubic
// (float images) and nearest. Which plans take fused
// tiles is checked too, that strided grids and grads give the dense ones'
// bits, that forward tiles of 2 to 4 channels give the planar and
// channel-minor paths' bits, backward ones the planar path's, and that tiny
// images sampled as one sequence give the bits of a run per image.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/problem.hpp"
#include "common/volume_problem.hpp"
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

const Dims kShapes[] = {
    {3, 1, 1, 1, 2, 3},        // 1-pixel planes (no pairs)
    {2, 1, 1, 2, 3, 5},        // 2-pixel planes
    {2, 1, 1, 9, 4, 5},        // Hin = 1
    {2, 1, 7, 1, 3, 4},        // Win = 1
    {40, 1, 5, 6, 3, 3},       // many images, 9 output pixels each
    {2, 1, 19, 23, 17, 21},    // several tiles and a partial one
    {1, 1, 33, 40, 1, 70},     // a row of points
    {64, 1, 32, 48, 7, 7},     // correlation windows
    {1, 1, 120, 130, 150, 140} // one image: pixel chunks
};

// Grid values that take the vector builders' scalar fallbacks or sit on
// their edges, written over a few pixels of a random grid.
void add_specials(Problem* p) {
  const double inf = std::numeric_limits<double>::infinity();
  const double specials[] = {std::nan(""), inf, -inf, 1e30, -1e30, -1.0, 1.0, 0.0, 3e6, -7e5};
  const Dims& d = p->dims;
  int64_t k = 0;
  for (int64_t n = 0; n < d.n; ++n) {
    for (int64_t h = 0; h < d.out_h; ++h) {
      for (int64_t w = 0; w < d.out_w; ++w, ++k) {
        if (k % 7 != 3) continue;
        const int64_t c = (k / 7) % 2;
        p->grid.set(n, h, w, c, specials[(k / 14) % 10]);
      }
    }
  }
}

// An affine grid per image: rotations up to 0.1 rad, scales 1 (the whole
// image), 0.25 and 0.05 (a few pixels: a correlation window or glimpse),
// shifts up to 0.9 (so some stencils leave the image). Neighbouring pixels
// then read neighbouring elements, which the fused tiles read from windows
// of consecutive elements rather than by gathers.
void make_affine(Problem* p) {
  const Dims& d = p->dims;
  const double scales[] = {1.0, 0.25, 0.05};
  for (int64_t n = 0; n < d.n; ++n) {
    const double s = scales[n % 3], angle = 0.05 * static_cast<double>(n % 5 - 2);
    const double tx = 0.3 * static_cast<double>(n % 7 - 3), ty = 0.2 * static_cast<double>(n % 4 - 2);
    for (int64_t h = 0; h < d.out_h; ++h) {
      for (int64_t w = 0; w < d.out_w; ++w) {
        const double u = d.out_w > 1 ? 2.0 * static_cast<double>(w) / static_cast<double>(d.out_w - 1) - 1.0 : 0.0;
        const double v = d.out_h > 1 ? 2.0 * static_cast<double>(h) / static_cast<double>(d.out_h - 1) - 1.0 : 0.0;
        p->grid.set(n, h, w, 0, s * (std::cos(angle) * u - std::sin(angle) * v) + tx);
        p->grid.set(n, h, w, 1, s * (std::sin(angle) * u + std::cos(angle) * v) + ty);
      }
    }
  }
}

// How run_plans runs: without the plans' fused tiles (the builders and
// microkernels then run), or with them, their window reads off or on
// whatever the CPU (the planner turns them on for some CPUs only).
enum class Fused { kNo, kGathers, kWindows };

// Forward and backward through the planner and drivers.
Outputs run_plans(const Problem& p, gs::OutputMask mask, Fused fused, int threads) {
  const DType dt = p.input.dtype();
  Outputs o{Tensor(dt, p.grad.shape()), Tensor(dt, p.input.shape()), Tensor(dt, p.grid.shape())};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  o.out.fill(nan);
  o.dx.fill(nan);
  o.dgrid.fill(nan);
  Options opt = p.options;
  opt.num_threads = threads;
  const bool vector_target = gs::cpu::current_target() != HWY_SCALAR;
  gs::detail::Problem fp, bp;
  gs::Status s = gs::detail::validate_forward(p.input.view(), p.grid.view(), o.out.mutable_view(), opt, &fp);
  EXPECT_TRUE(s.ok()) << s.message();
  gs::cpu::ForwardPlan forward = gs::cpu::plan_forward(fp);
  EXPECT_EQ(forward.fused != nullptr, vector_target);
  if (fused == Fused::kNo) forward.fused = nullptr;
  forward.window_reads = fused == Fused::kWindows;
  gs::cpu::run_forward(forward, p.input.view(), p.grid.view(), o.out.mutable_view());
  s = gs::detail::validate_backward(p.grad.view(), p.input.view(), p.grid.view(), o.dx.mutable_view(),
                                    o.dgrid.mutable_view(), opt, mask, &bp);
  EXPECT_TRUE(s.ok()) << s.message();
  gs::cpu::BackwardPlan backward = gs::cpu::plan_backward(bp);
  EXPECT_EQ(backward.fused != nullptr, vector_target);
  if (fused == Fused::kNo) backward.fused = nullptr;
  backward.window_reads = fused == Fused::kWindows;
  std::vector<unsigned char> workspace(backward.workspace_bytes);
  gs::cpu::run_backward(backward, p.grad.view(), p.input.view(), p.grid.view(), o.dx.mutable_view(),
                        o.dgrid.mutable_view(), workspace.data());
  return o;
}

using Param = std::tuple<Interpolation, Padding, bool, DType>;
class FusedTiles : public ::testing::TestWithParam<Param> {};

TEST_P(FusedTiles, SameBitsAsBuildersAndMicrokernels) {
  const auto [mode, pad, align, dtype] = GetParam();
  const Options opt{mode, pad, align};
  const int64_t targets = gs::cpu::available_targets();
  for (int64_t t = targets; t != 0; t &= t - 1) {
    const int64_t target = t & -t;
    gs::cpu::force_targets(target);
    uint64_t seed = 5;
    for (const Dims& d : kShapes) {
      // range 0: affine grids.
      for (double range : {0.0, 1.2, 40.0, 5e6}) {
        for (bool specials : {false, true}) {
          Problem p = Problem::random(d, dtype, opt, seed++, range == 0.0 ? 1.0 : range);
          if (range == 0.0) make_affine(&p);
          if (specials) add_specials(&p);
          for (gs::OutputMask mask : {gs::OutputMask{true, true}, {true, false}, {false, true}}) {
            const Outputs want = run_plans(p, mask, Fused::kNo, 2);
            const Outputs got = run_plans(p, mask, Fused::kWindows, 2);
            const std::string what = std::string(gs::cpu::target_name(target)) + " " + describe(opt) + " " +
                                     std::string(gs::to_string(dtype)) + " " + to_string(d) + " range " +
                                     std::to_string(range) + (specials ? " specials" : "") + " mask " +
                                     std::to_string(mask.input) + std::to_string(mask.grid);
            EXPECT_EQ(got.out.storage(), want.out.storage()) << what << " forward";
            EXPECT_EQ(got.dx.storage(), want.dx.storage()) << what << " dx";
            EXPECT_EQ(got.dgrid.storage(), want.dgrid.storage()) << what << " dgrid";
            // Gathers in place of window reads (float bilinear alone has them).
            if (mode == Interpolation::kBilinear && dtype == DType::kFloat32) {
              const Outputs gathers = run_plans(p, mask, Fused::kGathers, 2);
              EXPECT_EQ(gathers.out.storage(), want.out.storage()) << what << " forward, gathers";
              EXPECT_EQ(gathers.dx.storage(), want.dx.storage()) << what << " dx, gathers";
              EXPECT_EQ(gathers.dgrid.storage(), want.dgrid.storage()) << what << " dgrid, gathers";
            }
            // Another thread count, with both outputs (threads_test covers
            // the masks' thread counts).
            if (mask.input && mask.grid) {
              const Outputs got3 = run_plans(p, mask, Fused::kWindows, 3);
              EXPECT_EQ(got3.out.storage(), got.out.storage()) << what << " forward, 3 threads";
              EXPECT_EQ(got3.dx.storage(), got.dx.storage()) << what << " dx, 3 threads";
              EXPECT_EQ(got3.dgrid.storage(), got.dgrid.storage()) << what << " dgrid, 3 threads";
            }
          }
        }
      }
    }
  }
  gs::cpu::force_targets(0);
}

std::string name(const ::testing::TestParamInfo<Param>& info) {
  const auto [mode, pad, align, dtype] = info.param;
  return std::string(gs::to_string(mode)) + "_" + std::string(gs::to_string(pad)) + (align ? "_align_" : "_") +
         std::string(gs::to_string(dtype));
}

INSTANTIATE_TEST_SUITE_P(All, FusedTiles,
                         ::testing::Combine(::testing::Values(Interpolation::kBilinear, Interpolation::kNearest),
                                            ::testing::Values(Padding::kZeros, Padding::kBorder,
                                                              Padding::kReflection),
                                            ::testing::Bool(),
                                            ::testing::Values(DType::kFloat32, DType::kFloat64)),
                         name);
// Bicubic: float (the vector bicubic stencil's type).
INSTANTIATE_TEST_SUITE_P(Bicubic, FusedTiles,
                         ::testing::Combine(::testing::Values(Interpolation::kBicubic),
                                            ::testing::Values(Padding::kZeros, Padding::kBorder,
                                                              Padding::kReflection),
                                            ::testing::Bool(), ::testing::Values(DType::kFloat32)),
                         name);

// A grid or grad of other strides (a grid permuted from (N, 2, H, W), as
// flow warps pass it; a grad of one value broadcast over the output, as a
// loss's sum hands autograd; rows padded; H and W transposed; W walked
// backwards): fused tiles copy a tile's points and grad values in order,
// and the outputs keep the bits of the same values in dense tensors, fused
// or not.
TEST(FusedTilesStrided, GridsAndGradsGiveTheDenseBits) {
  const int64_t targets = gs::cpu::available_targets();
  for (int64_t t = targets; t != 0; t &= t - 1) {
    const int64_t target = t & -t;
    gs::cpu::force_targets(target);
    uint64_t seed = 77;
    for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kBicubic, Interpolation::kNearest}) {
      for (Padding pad : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
        for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
          if (mode == Interpolation::kBicubic && dtype != DType::kFloat32) continue;
          const Options opt{mode, pad, (seed & 1) != 0};
          for (const Dims& d : kShapes) {
            Problem p = Problem::random(d, dtype, opt, seed++, 1.2);
            const std::string what = std::string(gs::cpu::target_name(target)) + " " + describe(opt) + " " +
                                     std::string(gs::to_string(dtype)) + " " + to_string(d);
            auto expect_same = [&](const Problem& strided, const Problem& dense_values, const std::string& how) {
              const Outputs want = run_plans(dense_values, {true, true}, Fused::kWindows, 2);
              for (Fused fused : {Fused::kWindows, Fused::kNo}) {
                const Outputs got = run_plans(strided, {true, true}, fused, 2);
                const std::string where = what + " " + how + (fused == Fused::kNo ? ", unfused" : "");
                EXPECT_EQ(got.out.storage(), want.out.storage()) << where << " forward";
                EXPECT_EQ(got.dx.storage(), want.dx.storage()) << where << " dx";
                EXPECT_EQ(got.dgrid.storage(), want.dgrid.storage()) << where << " dgrid";
              }
            };
            for (Layout layout : {Layout::kChannelsLast, Layout::kPadded, Layout::kTransposedHW, Layout::kNegative}) {
              Problem q = p;
              q.grid = p.grid.relayout(layout);
              expect_same(q, p, std::string("grid ") + to_string(layout));
            }
            for (Layout layout : {Layout::kPadded, Layout::kTransposedHW, Layout::kNegative}) {
              Problem q = p;
              q.grad = p.grad.relayout(layout);
              expect_same(q, p, std::string("grad ") + to_string(layout));
            }
            // Broadcast: every stride 0 over one element.
            Problem broadcast = p, filled = p;
            static_cast<gs::host::Tensor&>(broadcast.grad) =
                gs::host::Tensor(dtype, p.grad.shape(), Shape4{0, 0, 0, 0});
            broadcast.grad.set(0, 0, 0, 0, -0.375);
            filled.grad.fill(-0.375);
            expect_same(broadcast, filled, "grad broadcast");
          }
        }
      }
    }
  }
  gs::cpu::force_targets(0);
}

// Volumes: trilinear and nearest fused tiles against the volume builders and
// microkernels, through the volume planner and runner.
const VolDims kVolumeShapes[] = {
    {2, 1, 1, 1, 1, 2, 2, 3},    // 1-voxel volumes
    {2, 1, 1, 1, 2, 3, 2, 3},    // 2-voxel volumes
    {3, 1, 4, 5, 6, 3, 4, 5},    // partial tiles
    {1, 1, 5, 1, 7, 2, 3, 11},   // Hin = 1
    {1, 1, 6, 7, 8, 16, 15, 17}   // one volume: voxel chunks
};

VolOutputs run_volume_plans(const VolProblem& p, gs::OutputMask mask, bool fused, int threads) {
  const DType dt = p.input.dtype();
  VolOutputs o{VolTensor(dt, p.grad.shape()), VolTensor(dt, p.input.shape()), VolTensor(dt, p.grid.shape())};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  o.out.fill(nan);
  o.dx.fill(nan);
  o.dgrid.fill(nan);
  Options opt = p.options;
  opt.num_threads = threads;
  const bool vector_target = gs::cpu::current_target() != HWY_SCALAR;
  gs::detail::Problem fp, bp;
  gs::Status s = gs::detail::validate_forward_3d(p.input.view(), p.grid.view(), o.out.mutable_view(), opt, &fp);
  EXPECT_TRUE(s.ok()) << s.message();
  gs::cpu::ForwardPlan forward = gs::cpu::plan_forward_3d(fp, p.input.view());
  EXPECT_EQ(forward.fused != nullptr, vector_target);
  if (!fused) forward.fused = nullptr;
  s = gs::cpu::run_forward_3d(forward, p.input.view(), p.grid.view(), o.out.mutable_view());
  EXPECT_TRUE(s.ok()) << s.message();
  s = gs::detail::validate_backward_3d(p.grad.view(), p.input.view(), p.grid.view(), o.dx.mutable_view(),
                                       o.dgrid.mutable_view(), opt, mask, &bp);
  EXPECT_TRUE(s.ok()) << s.message();
  gs::cpu::BackwardPlan backward = gs::cpu::plan_backward_3d(bp, p.input.view(), o.dx.mutable_view());
  EXPECT_EQ(backward.fused != nullptr, vector_target);
  if (!fused) backward.fused = nullptr;
  std::vector<unsigned char> workspace(backward.workspace_bytes);
  s = gs::cpu::run_backward_3d(backward, p.grad.view(), p.input.view(), p.grid.view(), o.dx.mutable_view(),
                               o.dgrid.mutable_view(), workspace.data());
  EXPECT_TRUE(s.ok()) << s.message();
  return o;
}

class FusedVolumeTiles : public ::testing::TestWithParam<Param> {};

TEST_P(FusedVolumeTiles, SameBitsAsBuildersAndMicrokernels) {
  const auto [mode, pad, align, dtype] = GetParam();
  const Options opt{mode, pad, align};
  const double inf = std::numeric_limits<double>::infinity();
  const double specials[] = {std::nan(""), inf, -inf, 1e30, -1.0, 1.0, 0.0, 3e6};
  const int64_t targets = gs::cpu::available_targets();
  for (int64_t t = targets; t != 0; t &= t - 1) {
    const int64_t target = t & -t;
    gs::cpu::force_targets(target);
    uint64_t seed = 9;
    for (const VolDims& d : kVolumeShapes) {
      for (double range : {1.2, 40.0, 5e6}) {
        VolProblem p = VolProblem::random(d, dtype, opt, seed++, range);
        // A few special grid values, on every component in turn.
        int64_t k = 0;
        for (int64_t z = 0; z < d.out_d; ++z) {
          for (int64_t w = 0; w < d.out_w; w += 3, ++k) {
            p.grid.set({0, z, 0, w, k % 3}, specials[k % 8]);
          }
        }
        for (gs::OutputMask mask : {gs::OutputMask{true, true}, {true, false}, {false, true}}) {
          const VolOutputs want = run_volume_plans(p, mask, false, 2);
          const VolOutputs got = run_volume_plans(p, mask, true, 2);
          const VolOutputs got3 = run_volume_plans(p, mask, true, 3);
          const std::string what = std::string(gs::cpu::target_name(target)) + " " + describe(opt) + " " +
                                   std::string(gs::to_string(dtype)) + " " + to_string(d) + " range " +
                                   std::to_string(range) + " mask " + std::to_string(mask.input) +
                                   std::to_string(mask.grid);
          EXPECT_EQ(got.out.element_bytes(), want.out.element_bytes()) << what << " forward";
          EXPECT_EQ(got.dx.element_bytes(), want.dx.element_bytes()) << what << " dx";
          EXPECT_EQ(got.dgrid.element_bytes(), want.dgrid.element_bytes()) << what << " dgrid";
          EXPECT_EQ(got3.out.element_bytes(), got.out.element_bytes()) << what << " forward, 3 threads";
          EXPECT_EQ(got3.dx.element_bytes(), got.dx.element_bytes()) << what << " dx, 3 threads";
          EXPECT_EQ(got3.dgrid.element_bytes(), got.dgrid.element_bytes()) << what << " dgrid, 3 threads";
          // Grids of other strides: merged into rows and copied a tile at
          // a time (channels-last, padded rows, W backwards), or packed
          // whole (D backwards).
          if (!(mask.input && mask.grid)) continue;
          for (VolLayout layout :
               {VolLayout::kChannelsLast, VolLayout::kPaddedRows, VolLayout::kNegativeW, VolLayout::kNegativeD}) {
            VolProblem q = p;
            q.grid = p.grid.relayout(layout);
            const VolOutputs strided = run_volume_plans(q, mask, true, 2);
            const std::string how = what + " grid " + to_string(layout);
            EXPECT_EQ(strided.out.element_bytes(), got.out.element_bytes()) << how << " forward";
            EXPECT_EQ(strided.dx.element_bytes(), got.dx.element_bytes()) << how << " dx";
            EXPECT_EQ(strided.dgrid.element_bytes(), got.dgrid.element_bytes()) << how << " dgrid";
          }
        }
      }
    }
  }
  gs::cpu::force_targets(0);
}

INSTANTIATE_TEST_SUITE_P(All, FusedVolumeTiles,
                         ::testing::Combine(::testing::Values(Interpolation::kBilinear, Interpolation::kNearest),
                                            ::testing::Values(Padding::kZeros, Padding::kBorder,
                                                              Padding::kReflection),
                                            ::testing::Bool(),
                                            ::testing::Values(DType::kFloat32, DType::kFloat64)),
                         name);

// Several channels: a fused forward tile reads each vector's stencil once
// for all of its channels' planes. Same bits as the builders and planar
// microkernels and as the channel-minor blocks, with input and output
// planes a channel slice of a larger tensor (planes dense, channels and
// images further apart than a plane).
Tensor channel_slice(const Tensor& dense) {
  const Shape4 shape = dense.shape();
  const int64_t plane = shape[2] * shape[3];
  const Shape4 strides{(shape[1] + 3) * plane, plane, shape[3], 1};
  Tensor slice;
  static_cast<gs::host::Tensor&>(slice) =
      gs::host::Tensor(dense.dtype(), shape, strides, 2 * plane, std::max<int64_t>(strides[0] * shape[0], 1));
  slice.assign_from(dense);
  return slice;
}

// The forward of p (input `input`) into `out`, planned with `copies`; with
// `fused` false the planner's fused tiles are dropped, with `windows` their
// window reads are on whatever the CPU.
void forward_into(const Problem& p, const Tensor& input, gs::cpu::ForwardCopies copies, bool fused, bool windows,
                  int threads, Tensor* out) {
  Options opt = p.options;
  opt.num_threads = threads;
  gs::detail::Problem fp;
  const gs::Status s = gs::detail::validate_forward(input.view(), p.grid.view(), out->mutable_view(), opt, &fp);
  EXPECT_TRUE(s.ok()) << s.message();
  gs::cpu::ForwardPlan plan = gs::cpu::plan_forward(fp, copies);
  if (!fused) plan.fused = nullptr;
  plan.window_reads = windows;
  gs::cpu::run_forward(plan, input.view(), p.grid.view(), out->mutable_view());
}

TEST(FusedChannels, ForwardGivesThePlanarAndBlockBits) {
  const Dims shapes[] = {
      {3, 2, 1, 1, 2, 3},       // 1-pixel planes
      {2, 3, 1, 2, 3, 5},       // 2-pixel planes
      {4, 4, 19, 23, 17, 21},   // several tiles and a partial one
      {16, 3, 32, 48, 7, 7},    // correlation windows (window reads)
      {1, 2, 70, 80, 40, 41},   // one image, several runs of tiles
  };
  const int64_t targets = gs::cpu::available_targets();
  for (int64_t t = targets; t != 0; t &= t - 1) {
    const int64_t target = t & -t;
    gs::cpu::force_targets(target);
    const bool vector_target = gs::cpu::current_target() != HWY_SCALAR;
    uint64_t seed = 300;
    for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic}) {
      for (Padding pad : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
        for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
          if (mode == Interpolation::kBicubic && dtype != DType::kFloat32) continue;
          const Options opt{mode, pad, (seed & 1) != 0};
          for (const Dims& d : shapes) {
            // range 0: affine grids.
            for (double range : {0.0, 1.2, 40.0}) {
              Problem p = Problem::random(d, dtype, opt, seed++, range == 0.0 ? 1.0 : range);
              if (range == 0.0) make_affine(&p);
              if (range == 1.2) add_specials(&p);
              const Shape4 out_shape{d.n, d.c, d.out_h, d.out_w};
              const std::string what = std::string(gs::cpu::target_name(target)) + " " + describe(opt) + " " +
                                       std::string(gs::to_string(dtype)) + " " + to_string(d) + " range " +
                                       std::to_string(range);
              Tensor want(dtype, out_shape), blocks(dtype, out_shape);
              forward_into(p, p.input, gs::cpu::ForwardCopies::kNone, false, false, 2, &want);
              forward_into(p, p.input, gs::cpu::ForwardCopies::kPerThread, false, false, 2, &blocks);
              EXPECT_EQ(blocks.storage(), want.storage()) << what << " blocks";
              const Tensor input = channel_slice(p.input);
              // Window reads on 2 threads, gathers on 3.
              for (int threads : {2, 3}) {
                Tensor got = channel_slice(Tensor(dtype, out_shape));
                forward_into(p, input, gs::cpu::ForwardCopies::kNone, true, threads == 2, threads, &got);
                EXPECT_EQ(got.relayout(Layout::kContiguous).storage(), want.storage())
                    << what << " fused, " << threads << " threads";
              }
              // The planar plan takes fused tiles for these channel counts.
              gs::detail::Problem fp;
              Tensor out(dtype, out_shape);
              ASSERT_TRUE(gs::detail::validate_forward(input.view(), p.grid.view(), out.mutable_view(), opt, &fp).ok());
              EXPECT_EQ(gs::cpu::plan_forward(fp, gs::cpu::ForwardCopies::kNone).fused != nullptr, vector_target)
                  << what;
            }
          }
        }
      }
    }
  }
  gs::cpu::force_targets(0);
}

// Several channels backward: planar plans of 2 to kMaxFusedBackwardChannels
// channels (double images that touch little of each plane, volumes too
// large for channel-minor blocks) take fused tiles that compute each vector's stencil
// once for every channel, with the bits of the builders and planar
// microkernels: dx, and dgrid summed over the channels in order, for each
// output mask, at 2 and 3 threads, dense grads and grads of other strides.
template <class P, class Run>
void expect_fused_channels_bits(const P& p, const std::string& what, Run run) {
  const bool vector_target = gs::cpu::current_target() != HWY_SCALAR;
  for (gs::OutputMask mask : {gs::OutputMask{true, true}, {true, false}, {false, true}}) {
    const std::string how = what + " mask " + std::to_string(mask.input) + std::to_string(mask.grid);
    bool fused = false;
    const auto want = run(p, mask, false, 2, &fused);
    const auto got = run(p, mask, true, 2, &fused);
    EXPECT_EQ(fused, vector_target) << how;
    const auto got3 = run(p, mask, true, 3, &fused);
    EXPECT_EQ(got.first, want.first) << how << " dx";
    EXPECT_EQ(got.second, want.second) << how << " dgrid";
    EXPECT_EQ(got3.first, want.first) << how << " dx, 3 threads";
    EXPECT_EQ(got3.second, want.second) << how << " dgrid, 3 threads";
  }
}

// dx's and dgrid's bytes from an image backward's own plan, with its fused
// tiles (which `*fused` reports) or without; the plan is planar.
std::pair<gs::host::Bytes, gs::host::Bytes> image_backward(const Problem& p, gs::OutputMask mask, bool fused,
                                                           int threads, bool* has_fused) {
  const DType dt = p.input.dtype();
  Tensor dx(dt, p.input.shape()), dgrid(dt, p.grid.shape());
  dx.fill(std::nan(""));
  dgrid.fill(std::nan(""));
  Options opt = p.options;
  opt.num_threads = threads;
  gs::detail::Problem bp;
  const gs::Status s = gs::detail::validate_backward(p.grad.view(), p.input.view(), p.grid.view(), dx.mutable_view(),
                                                     dgrid.mutable_view(), opt, mask, &bp);
  EXPECT_TRUE(s.ok()) << s.message();
  gs::cpu::BackwardPlan plan = gs::cpu::plan_backward(bp);
  EXPECT_EQ(plan.lanes, 1);
  *has_fused = plan.fused != nullptr;
  if (!fused) plan.fused = nullptr;
  std::vector<unsigned char> workspace(plan.workspace_bytes);
  gs::cpu::run_backward(plan, p.grad.view(), p.input.view(), p.grid.view(), dx.mutable_view(), dgrid.mutable_view(),
                        workspace.data());
  return {mask.input ? dx.storage() : gs::host::Bytes{}, mask.grid ? dgrid.storage() : gs::host::Bytes{}};
}

// ... and a volume backward's (float or double, contiguous: filled with
// NaN and read as raw bytes, as the element-wise helpers would take most of
// the test's time on these volumes).
std::pair<std::vector<unsigned char>, std::vector<unsigned char>> volume_backward(const VolProblem& p,
                                                                                   gs::OutputMask mask,
                                                                                   bool fused, int threads,
                                                                                   bool* has_fused) {
  const DType dt = p.input.dtype();
  const std::size_t size = dt == DType::kFloat64 ? sizeof(double) : sizeof(float);
  VolTensor dx(dt, p.input.shape()), dgrid(dt, p.grid.shape());
  const gs::MutableVolumeView dx_view = dx.mutable_view(), dgrid_view = dgrid.mutable_view();
  auto bytes = [&](const gs::MutableVolumeView& v, int64_t numel) {
    auto* b = static_cast<unsigned char*>(v.data);
    return std::make_pair(b, b + numel * static_cast<int64_t>(size));
  };
  const auto [dx0, dx1] = bytes(dx_view, dx.numel());
  const auto [dg0, dg1] = bytes(dgrid_view, dgrid.numel());
  std::fill(dx0, dx1, 0xff);  // (a NaN in float and double)
  std::fill(dg0, dg1, 0xff);
  Options opt = p.options;
  opt.num_threads = threads;
  gs::detail::Problem bp;
  gs::Status s = gs::detail::validate_backward_3d(p.grad.view(), p.input.view(), p.grid.view(), dx_view, dgrid_view,
                                                  opt, mask, &bp);
  EXPECT_TRUE(s.ok()) << s.message();
  gs::cpu::BackwardPlan plan = gs::cpu::plan_backward_3d(bp, p.input.view(), dx_view);
  EXPECT_EQ(plan.lanes, 1);
  *has_fused = plan.fused != nullptr;
  if (!fused) plan.fused = nullptr;
  std::vector<unsigned char> workspace(plan.workspace_bytes);
  s = gs::cpu::run_backward_3d(plan, p.grad.view(), p.input.view(), p.grid.view(), dx_view, dgrid_view,
                               workspace.data());
  EXPECT_TRUE(s.ok()) << s.message();
  return {mask.input ? std::vector<unsigned char>(dx0, dx1) : std::vector<unsigned char>{},
          mask.grid ? std::vector<unsigned char>(dg0, dg1) : std::vector<unsigned char>{}};
}

TEST(FusedChannels, BackwardGivesThePlanarBits) {
  // Image backwards that touch little of each plane run on planes (double
  // images through fused tiles).
  const Dims shapes[] = {
      {2, 2, 40, 44, 9, 11},    // a few pixels of each plane
      {1, 3, 64, 64, 32, 32},   // 2x downsampling: several tiles, pixel chunks
      {3, 4, 30, 50, 1, 37},    // a row of points, a partial tile
  };
  const int64_t targets = gs::cpu::available_targets();
  for (int64_t t = targets; t != 0; t &= t - 1) {
    const int64_t target = t & -t;
    gs::cpu::force_targets(target);
    uint64_t seed = 600;
    for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kNearest}) {
      for (Padding pad : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
        for (bool align : {false, true}) {
          const DType dtype = DType::kFloat64;
          const Options opt{mode, pad, align};
          for (const Dims& d : shapes) {
            for (double range : {0.0, 1.2, 40.0}) {
              Problem p = Problem::random(d, dtype, opt, seed++, range == 0.0 ? 1.0 : range);
              if (range == 0.0) make_affine(&p);
              if (range == 1.2) add_specials(&p);
              const std::string what = std::string(gs::cpu::target_name(target)) + " " + describe(opt) + " " +
                                       std::string(gs::to_string(dtype)) + " " + to_string(d) + " range " +
                                       std::to_string(range);
              expect_fused_channels_bits(p, what, image_backward);
              // A grad of other strides: copied a tile and a channel at a time.
              Problem q = p;
              q.grad = p.grad.relayout(Layout::kTransposedHW);
              bool fused = false;
              EXPECT_EQ(image_backward(q, {true, true}, true, 2, &fused), image_backward(p, {true, true}, false, 2, &fused))
                  << what << " strided grad";
            }
          }
        }
      }
    }
  }
  gs::cpu::force_targets(0);
}

TEST(FusedChannels, VolumeBackwardGivesThePlanarBits) {
  // Volumes past the channel-minor blocks' bound (kMaxInterleavedBytes)
  // run on planes: over 2^21 voxels for float, 2^20 for double. (Made once:
  // each mode and padding reads the same values.)
  VolProblem problems[] = {
      VolProblem::random({1, 2, 128, 128, 129, 3, 5, 17}, DType::kFloat32, Options{}, 700, 1.2),
      VolProblem::random({1, 3, 64, 128, 129, 2, 4, 19}, DType::kFloat64, Options{}, 701, 1.2)};
  for (VolProblem& p : problems) p.grid.set({0, 0, 0, 0, 1}, std::nan(""));
  const int64_t targets = gs::cpu::available_targets();
  for (int64_t t = targets; t != 0; t &= t - 1) {
    const int64_t target = t & -t;
    gs::cpu::force_targets(target);
    bool align = false;
    for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kNearest}) {
      for (Padding pad : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
        for (VolProblem& p : problems) {
          p.options = Options{mode, pad, align = !align};
          const std::string what = std::string(gs::cpu::target_name(target)) + " " + describe(p.options) + " " +
                                   std::string(gs::to_string(p.input.dtype())) + " " + to_string(p.dims);
          expect_fused_channels_bits(p, what, volume_backward);
        }
      }
    }
  }
  gs::cpu::force_targets(0);
}

// Fused forwards of 2 to 4 channel planes of a volume (each vector's pair
// starts worked out once for every channel): the same bits as the blocks
// and as planes without fused tiles, on every target, every mode, padding
// and align_corners, float and double, smooth and scattered grids with
// special values, on 2 and 3 threads.
TEST(FusedChannels, VolumeForwardGivesThePlanarAndBlockBits) {
  const VolDims shapes[] = {{1, 3, 9, 10, 11, 9, 10, 13}, {2, 2, 5, 6, 7, 4, 5, 19}, {1, 4, 2, 1, 9, 3, 2, 17}};
  const int64_t targets = gs::cpu::available_targets();
  uint64_t seed = 900;
  for (int64_t t = targets; t != 0; t &= t - 1) {
    const int64_t target = t & -t;
    gs::cpu::force_targets(target);
    const bool vector_target = gs::cpu::current_target() != HWY_SCALAR;
    for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kNearest}) {
      for (Padding pad : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
        for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
          for (const VolDims& d : shapes) {
            for (double range : {1.05, 1.2, 40.0}) {
              const Options opt{mode, pad, (seed & 1) != 0};
              VolProblem p = VolProblem::random(d, dtype, opt, seed++, range);
              if (range == 1.2) {
                p.grid.set({0, 0, 0, 1, 0}, std::nan(""));
                p.grid.set({0, 1, 1, 2, 2}, std::numeric_limits<double>::infinity());
                p.grid.set({0, 2, 0, 3, 1}, -1e30);
              }
              const std::string what = std::string(gs::cpu::target_name(target)) + " " + describe(opt) + " " +
                                       std::string(gs::to_string(dtype)) + " " + to_string(d) + " range " +
                                       std::to_string(range);
              const auto forward = [&](gs::cpu::ForwardCopies copies, bool fused, int threads, bool* took_fused) {
                VolTensor out(dtype, p.grad.shape());
                out.fill(std::nan(""));
                Options o = p.options;
                o.num_threads = threads;
                gs::detail::Problem fp;
                gs::Status s = gs::detail::validate_forward_3d(p.input.view(), p.grid.view(), out.mutable_view(), o, &fp);
                EXPECT_TRUE(s.ok()) << s.message();
                gs::cpu::ForwardPlan plan = gs::cpu::plan_forward_3d(fp, p.input.view(), copies);
                *took_fused = plan.fused != nullptr;
                if (!fused) plan.fused = nullptr;
                s = gs::cpu::run_forward_3d(plan, p.input.view(), p.grid.view(), out.mutable_view());
                EXPECT_TRUE(s.ok()) << s.message();
                return out.element_bytes();
              };
              bool took = false;
              const auto planes = forward(gs::cpu::ForwardCopies::kNone, false, 2, &took);
              const auto blocks = forward(gs::cpu::ForwardCopies::kPerThread, false, 2, &took);
              const auto fused = forward(gs::cpu::ForwardCopies::kNone, true, 2, &took);
              EXPECT_EQ(took, vector_target) << what;
              const auto fused3 = forward(gs::cpu::ForwardCopies::kNone, true, 3, &took);
              EXPECT_EQ(blocks, planes) << what << " blocks";
              EXPECT_EQ(fused, planes) << what << " fused";
              EXPECT_EQ(fused3, planes) << what << " fused, 3 threads";
            }
          }
        }
      }
    }
  }
  gs::cpu::force_targets(0);
}

// Tiny images sampled as one sequence of pixels (ForwardPlan::batched):
// the same bits as a run per image, on every target, bilinear and nearest,
// every padding and align_corners, float and double, for outputs of 1 to 49
// pixels (vectors that hold the ends of several images), planes that follow
// one another, lie further apart, or are one plane for every image (stride
// 0), special grid values, and 1 and 3 threads.
TEST(FusedBatches, TinyImagesGiveThePerImageBits) {
  const Dims shapes[] = {{37, 1, 5, 6, 1, 1}, {29, 1, 4, 7, 1, 3},   {40, 1, 9, 11, 3, 3},
                         {9, 1, 32, 48, 7, 7}, {23, 1, 1, 2, 2, 5}, {50, 1, 6, 5, 17, 1}};
  const int64_t targets = gs::cpu::available_targets();
  for (int64_t t = targets; t != 0; t &= t - 1) {
    const int64_t target = t & -t;
    gs::cpu::force_targets(target);
    const bool vector_target = gs::cpu::current_target() != HWY_SCALAR;
    uint64_t seed = 31;
    for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kNearest}) {
      for (Padding pad : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
        for (bool align : {false, true}) {
          for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
            const Options opt{mode, pad, align};
            for (const Dims& d : shapes) {
              Problem p = Problem::random(d, dtype, opt, seed++, 1.3);
              if (seed % 2 == 0) add_specials(&p);
              const int64_t plane = d.in_h * d.in_w;
              for (int64_t apart : {plane, plane + 7, int64_t{0}}) {
                // The input's planes `apart` elements from one image to the next.
                gs::host::Tensor input(dtype, p.input.shape(), {apart, plane, d.in_w, 1}, 0,
                                       apart == 0 ? plane : d.n * apart);
                input.assign_from(p.input);
                gs::detail::Problem fp;
                Tensor batched(dtype, p.grad.shape()), per_image(dtype, p.grad.shape());
                const std::string what = std::string(gs::cpu::target_name(target)) + " " + describe(opt) + " " +
                                         std::string(gs::to_string(dtype)) + " " + to_string(d) + " apart " +
                                         std::to_string(apart);
                for (int threads : {1, 3}) {
                  Options o = opt;
                  o.num_threads = threads;
                  ASSERT_TRUE(gs::detail::validate_forward(input.view(), p.grid.view(), batched.mutable_view(), o,
                                                           &fp)
                                  .ok());
                  gs::cpu::ForwardPlan plan = gs::cpu::plan_forward(fp);
                  EXPECT_EQ(plan.batched, vector_target && !plan.window_reads) << what;
                  plan.window_reads = false;  // (so that the runs per image read what the batches read)
                  batched.fill(std::nan(""));
                  gs::cpu::run_forward(plan, input.view(), p.grid.view(), batched.mutable_view());
                  plan.batched = false;
                  per_image.fill(std::nan(""));
                  gs::cpu::run_forward(plan, input.view(), p.grid.view(), per_image.mutable_view());
                  EXPECT_EQ(batched.storage(), per_image.storage()) << what << " threads " << threads;
                }
              }
            }
          }
        }
      }
    }
  }
  gs::cpu::force_targets(0);
}

// A dense problem of c channels, as the planner sees it.
gs::detail::Problem dense(int64_t c, DType dtype, Interpolation mode, bool volume = false) {
  gs::detail::Problem p;
  p.n = 4;
  p.c = c;
  p.in_h = 20;
  p.in_w = 30;
  p.out_h = p.out_w = 16;
  p.volume = volume;
  p.input_strides = p.dx_strides = {c * 600, 600, 30, 1};
  p.dtype = dtype;
  p.options.interpolation = mode;
  return p;
}

TEST(FusedTilesPlan, TakenForOneDensePlaneInTheComputeType) {
  const bool vector_target = gs::cpu::current_target() != HWY_SCALAR;
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    EXPECT_EQ(gs::cpu::plan_forward(dense(1, dtype, Interpolation::kBilinear)).fused != nullptr, vector_target);
    EXPECT_EQ(gs::cpu::plan_backward(dense(1, dtype, Interpolation::kBilinear)).fused != nullptr, vector_target);
    EXPECT_EQ(gs::cpu::plan_forward(dense(1, dtype, Interpolation::kNearest)).fused != nullptr, vector_target);
    EXPECT_EQ(gs::cpu::plan_backward(dense(1, dtype, Interpolation::kNearest)).fused != nullptr, vector_target);
  }
  // Window reads where fused tiles run, as the CPU's answer says (off
  // elsewhere: nothing would read the flag).
  const bool pay = gs::cpu::window_reads_pay();
  EXPECT_EQ(gs::cpu::plan_forward(dense(1, DType::kFloat32, Interpolation::kBilinear)).window_reads,
            pay && vector_target);
  EXPECT_EQ(gs::cpu::plan_backward(dense(1, DType::kFloat32, Interpolation::kBilinear)).window_reads,
            pay && vector_target);
  EXPECT_FALSE(gs::cpu::plan_forward(dense(gs::cpu::kMaxFusedForwardChannels + 1, DType::kFloat32,
                                           Interpolation::kBilinear),
                                     gs::cpu::ForwardCopies::kNone)
                   .window_reads);
  // Planar forwards' tiles take up to kMaxFusedForwardChannels channels
  // (whether a plan samples planes is forward_copies_test's), planar
  // backwards' of double images up to kMaxFusedBackwardChannels (bicubic
  // ones, float alone, one), of float images one: sparse scatters run on
  // planes.
  for (int64_t c = 2; c <= gs::cpu::kMaxFusedForwardChannels + 1; ++c) {
    for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic}) {
      const gs::cpu::ForwardPlan planar = gs::cpu::plan_forward(dense(c, DType::kFloat32, mode),
                                                                gs::cpu::ForwardCopies::kNone);
      EXPECT_EQ(planar.fused != nullptr, c <= gs::cpu::kMaxFusedForwardChannels && vector_target) << c;
    }
  }
  for (int64_t c = 2; c <= gs::cpu::kMaxFusedBackwardChannels + 1; ++c) {
    for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic}) {
      for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
        gs::detail::Problem downsampling = dense(c, dtype, mode);
        downsampling.out_h = 5;  // (few enough taps for bicubic too)
        downsampling.out_w = 6;
        const gs::cpu::BackwardPlan plan = gs::cpu::plan_backward(downsampling);
        EXPECT_EQ(plan.lanes, 1) << c;
        const bool fused = c <= gs::cpu::kMaxFusedBackwardChannels && mode != Interpolation::kBicubic &&
                           dtype == DType::kFloat64 && vector_target;
        EXPECT_EQ(plan.fused != nullptr, fused) << c << " " << gs::to_string(mode) << " " << gs::to_string(dtype);
      }
    }
  }
  // Not for 16-bit storage, other modes, channel-minor blocks backward or
  // strided planes.
  EXPECT_EQ(gs::cpu::plan_forward(dense(1, DType::kFloat16, Interpolation::kBilinear)).fused, nullptr);
  EXPECT_EQ(gs::cpu::plan_backward(dense(1, DType::kBFloat16, Interpolation::kBilinear)).fused, nullptr);
  // Bicubic: float images alone.
  EXPECT_EQ(gs::cpu::plan_forward(dense(1, DType::kFloat32, Interpolation::kBicubic)).fused != nullptr,
            vector_target);
  EXPECT_EQ(gs::cpu::plan_backward(dense(1, DType::kFloat32, Interpolation::kBicubic)).fused != nullptr,
            vector_target);
  EXPECT_EQ(gs::cpu::plan_forward(dense(1, DType::kFloat64, Interpolation::kBicubic)).fused, nullptr);
  EXPECT_EQ(gs::cpu::plan_backward(dense(1, DType::kFloat64, Interpolation::kBicubic)).fused, nullptr);
  EXPECT_EQ(gs::cpu::plan_forward(dense(1, DType::kFloat32, Interpolation::kBicubic, true)).fused, nullptr);
  EXPECT_EQ(gs::cpu::plan_backward(dense(1, DType::kFloat32, Interpolation::kBicubic, true)).fused, nullptr);
  EXPECT_EQ(gs::cpu::plan_forward(dense(1, DType::kFloat16, Interpolation::kNearest)).fused, nullptr);
  EXPECT_EQ(gs::cpu::plan_backward(dense(2, DType::kFloat32, Interpolation::kBilinear)).fused, nullptr);
  gs::detail::Problem strided = dense(1, DType::kFloat32, Interpolation::kBilinear);
  strided.input_strides = {1200, 1200, 40, 1};
  EXPECT_EQ(gs::cpu::plan_forward(strided).fused, nullptr);
  // Volumes: trilinear and nearest likewise.
  EXPECT_EQ(gs::cpu::plan_backward(dense(1, DType::kFloat32, Interpolation::kBilinear, true)).fused != nullptr,
            vector_target);
  EXPECT_EQ(gs::cpu::plan_forward(dense(1, DType::kFloat32, Interpolation::kNearest, true)).fused != nullptr,
            vector_target);
  EXPECT_EQ(gs::cpu::plan_backward(dense(1, DType::kFloat32, Interpolation::kNearest, true)).fused != nullptr,
            vector_target);
  EXPECT_EQ(gs::cpu::plan_backward(dense(1, DType::kFloat16, Interpolation::kNearest)).fused, nullptr);
  EXPECT_EQ(gs::cpu::plan_backward(dense(2, DType::kFloat32, Interpolation::kNearest)).fused, nullptr);
  // Tiny images run as one sequence where the fused tiles read no windows:
  // one channel, bilinear (trilinear) or nearest, fewer than kFusedRun
  // output pixels each, planes apart by one or more planes (or none).
  for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic}) {
    for (bool volume : {false, true}) {
      if (volume && mode == Interpolation::kBicubic) continue;
      const gs::cpu::ForwardPlan plan = gs::cpu::plan_forward(dense(1, DType::kFloat32, mode, volume));
      EXPECT_EQ(plan.batched, vector_target && !plan.window_reads && mode != Interpolation::kBicubic)
          << gs::to_string(mode) << volume;
    }
  }
  EXPECT_FALSE(gs::cpu::plan_forward(dense(2, DType::kFloat32, Interpolation::kBilinear)).batched);
  gs::detail::Problem large = dense(1, DType::kFloat32, Interpolation::kBilinear);
  large.out_h = large.out_w = 32;  // kFusedRun pixels
  EXPECT_FALSE(gs::cpu::plan_forward(large).batched);
  gs::detail::Problem overlapping = dense(1, DType::kFloat32, Interpolation::kBilinear);
  overlapping.input_strides = {599, 600, 30, 1};
  EXPECT_FALSE(gs::cpu::plan_forward(overlapping).batched);
  gs::detail::Problem shared = dense(1, DType::kFloat32, Interpolation::kBilinear);
  shared.input_strides = {0, 600, 30, 1};
  EXPECT_EQ(gs::cpu::plan_forward(shared).batched, vector_target && !gs::cpu::window_reads_pay());
  // Beyond the gathers' int32 indices (float), not beyond double's.
  gs::detail::Problem far = dense(1, DType::kFloat32, Interpolation::kBilinear);
  far.input_strides = {int64_t{1} << 30, 600, 30, 1};
  EXPECT_FALSE(gs::cpu::plan_forward(far).batched);
  far.dtype = DType::kFloat64;
  EXPECT_EQ(gs::cpu::plan_forward(far).batched, vector_target && !gs::cpu::window_reads_pay());
}

}  // namespace
}  // namespace gstest
