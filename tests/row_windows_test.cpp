// Sliding row windows of interleaved backward tasks (src/cpu/window-inl.h)
// against whole planes: the same bits of dx and dgrid on every SIMD target
// this CPU runs, for images and volumes of 3 to 20 channels (narrow and
// full blocks, two sub-blocks), float, double and float16, every mode,
// padding and align_corners, each output mask, 1 to 3 threads, grids that
// move smoothly or rotate (windows of a band of rows) and that jump about
// (whole planes), special grid values, dx of other strides. A margin below
// zero makes tiles reach rows their window has written out: the task must
// then run again with whole planes, with the same bits. And the reach
// estimate (src/cpu/reach.hpp) must cover every tap of the scalar stencil.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <limits>
#include <string>
#include <vector>

#include "common/problem.hpp"
#include "common/volume_problem.hpp"
#include "core/validate.hpp"
#include "cpu/dispatch.hpp"
#include "cpu/plan.hpp"
#include "cpu/reach.hpp"
#include "cpu/stencil.hpp"
#include "cpu/volume_call.hpp"

namespace gstest {
namespace {

namespace gs = gridsampler;
using gs::Interpolation;
using gs::Options;
using gs::Padding;

// Identity plus a smooth displacement of `amp` (grid units), shifted by
// `shift`; with `turn` radians of rotation about the centre.
double warp(double u, double v, double w, int axis, double amp, double shift, double turn) {
  const double x = std::cos(turn) * u - std::sin(turn) * v, y = std::sin(turn) * u + std::cos(turn) * v;
  const double base[3] = {x, y, w};
  return base[axis] + shift + amp * std::sin(2.1 * u + 1.3 * v + 0.7 * w + axis);
}

double lattice(int64_t i, int64_t n) { return n > 1 ? 2.0 * static_cast<double>(i) / static_cast<double>(n - 1) - 1.0 : 0.0; }

void make_smooth(Problem* p, double amp, double shift, double turn) {
  const Dims& d = p->dims;
  for (int64_t n = 0; n < d.n; ++n) {
    for (int64_t h = 0; h < d.out_h; ++h) {
      for (int64_t w = 0; w < d.out_w; ++w) {
        for (int g = 0; g < 2; ++g) {
          p->grid.set(n, h, w, g, warp(lattice(w, d.out_w), lattice(h, d.out_h), 0.0, g, amp, shift, turn));
        }
      }
    }
  }
}

void make_smooth(VolProblem* p, double amp, double shift) {
  const VolDims& d = p->dims;
  for (int64_t n = 0; n < d.n; ++n) {
    for (int64_t z = 0; z < d.out_d; ++z) {
      for (int64_t h = 0; h < d.out_h; ++h) {
        for (int64_t w = 0; w < d.out_w; ++w) {
          for (int g = 0; g < 3; ++g) {
            const double v = warp(lattice(w, d.out_w), lattice(h, d.out_h), lattice(z, d.out_d), g, amp, shift, 0.0);
            p->grid.set({n, z, h, w, g}, v);
          }
        }
      }
    }
  }
}

// A few special values over a smooth grid's pixels.
template <class P>
void add_specials(P* p, int64_t every) {
  const double inf = std::numeric_limits<double>::infinity();
  const double specials[] = {std::nan(""), inf, -inf, 1e30, -3.5, 1.0};
  int64_t k = 0;
  const int64_t count = p->grid.numel() / (std::is_same_v<P, VolProblem> ? 3 : 2);
  for (int64_t i = every / 2; i < count; i += every, ++k) {
    if constexpr (std::is_same_v<P, VolProblem>) {
      const VolDims& d = p->dims;
      const int64_t w = i % d.out_w, h = i / d.out_w % d.out_h, z = i / (d.out_w * d.out_h) % d.out_d;
      const int64_t n = i / (d.out_w * d.out_h * d.out_d);
      p->grid.set({n, z, h, w, k % 3}, specials[k % 6]);
    } else {
      const Dims& d = p->dims;
      const int64_t w = i % d.out_w, h = i / d.out_w % d.out_h, n = i / (d.out_w * d.out_h);
      p->grid.set(n, h, w, k % 2, specials[k % 6]);
    }
  }
}

struct Bytes2 {
  gs::host::Bytes dx, dgrid;
  bool operator==(const Bytes2& o) const { return dx == o.dx && dgrid == o.dgrid; }
};

// dx's and dgrid's bytes (dx in `layout`) of an image backward, windows on
// wherever they apply (with `margin`) or never; *planned reports whether
// the plan has them.
Bytes2 image_backward(const Problem& p, gs::OutputMask mask, int threads, bool windows, int64_t margin,
                      Layout layout, bool* planned) {
  const DType dt = p.input.dtype();
  Tensor dx(dt, p.input.shape(), layout), dgrid(dt, p.grid.shape());
  dx.fill(std::nan(""));
  dgrid.fill(std::nan(""));
  Options opt = p.options;
  opt.num_threads = threads;
  gs::detail::Problem bp;
  const gs::Status s = gs::detail::validate_backward(p.grad.view(), p.input.view(), p.grid.view(), dx.mutable_view(),
                                                     dgrid.mutable_view(), opt, mask, &bp);
  EXPECT_TRUE(s.ok()) << s.message();
  gs::cpu::BackwardPlan plan =
      gs::cpu::plan_backward(bp, windows ? gs::cpu::RowWindows::kWherever : gs::cpu::RowWindows::kNever);
  *planned = plan.row_windows;
  plan.window_margin = margin;
  std::vector<unsigned char> workspace(plan.workspace_bytes);
  gs::cpu::run_backward(plan, p.grad.view(), p.input.view(), p.grid.view(), dx.mutable_view(), dgrid.mutable_view(),
                        workspace.data());
  return {mask.input ? dx.storage() : gs::host::Bytes{}, mask.grid ? dgrid.storage() : gs::host::Bytes{}};
}

Bytes2 volume_backward(const VolProblem& p, gs::OutputMask mask, int threads, bool windows, int64_t margin,
                       bool* planned) {
  const DType dt = p.input.dtype();
  VolTensor dx(dt, p.input.shape()), dgrid(dt, p.grid.shape());
  dx.fill(std::nan(""));
  dgrid.fill(std::nan(""));
  Options opt = p.options;
  opt.num_threads = threads;
  gs::detail::Problem bp;
  gs::Status s = gs::detail::validate_backward_3d(p.grad.view(), p.input.view(), p.grid.view(), dx.mutable_view(),
                                                  dgrid.mutable_view(), opt, mask, &bp);
  EXPECT_TRUE(s.ok()) << s.message();
  gs::cpu::BackwardPlan plan = gs::cpu::plan_backward_3d(
      bp, p.input.view(), dx.mutable_view(), windows ? gs::cpu::RowWindows::kWherever : gs::cpu::RowWindows::kNever);
  *planned = plan.row_windows;
  plan.window_margin = margin;
  std::vector<unsigned char> workspace(plan.workspace_bytes);
  s = gs::cpu::run_backward_3d(plan, p.grad.view(), p.input.view(), p.grid.view(), dx.mutable_view(),
                               dgrid.mutable_view(), workspace.data());
  EXPECT_TRUE(s.ok()) << s.message();
  // (contiguous: the views' bytes)
  const std::size_t size = dt == DType::kFloat64 ? sizeof(double) : sizeof(float);
  auto bytes = [&](VolTensor& v) {
    const auto* b = static_cast<const std::byte*>(v.mutable_view().data);
    return gs::host::Bytes(b, b + static_cast<std::size_t>(v.numel()) * size);
  };
  return {mask.input ? bytes(dx) : gs::host::Bytes{}, mask.grid ? bytes(dgrid) : gs::host::Bytes{}};
}

// Windows give whole planes' bits, with the default margin and with one
// that makes tiles reach outside their windows.
// (dx wanted, or dgrid with a mode that reads input values: nearest's
// dgrid is zero, and a window would have nothing to hold).
template <class Run>
void expect_window_bits(const std::string& what, Interpolation mode, Run run) {
  for (gs::OutputMask mask : {gs::OutputMask{true, true}, {true, false}, {false, true}}) {
    const std::string how = what + " mask " + std::to_string(mask.input) + std::to_string(mask.grid);
    bool planned = true;
    const Bytes2 want = run(mask, 2, false, 1, &planned);
    EXPECT_FALSE(planned) << how;
    EXPECT_TRUE(run(mask, 2, true, 1, &planned) == want) << how;
    EXPECT_EQ(planned, mask.input || mode != Interpolation::kNearest) << how;
    EXPECT_TRUE(run(mask, 3, true, 1, &planned) == want) << how << ", 3 threads";
    EXPECT_TRUE(run(mask, 1, true, -4, &planned) == want) << how << ", margin -4";
  }
}

// The grid's merged rows reach: a window of at most half the rows for a
// smooth or turned grid (so the bits above compare windows with planes).
template <int G>
int64_t window_size(const gs::detail::Problem& p, const gs::TensorView& grid4, DType dtype) {
  std::vector<int64_t> keep;
  const int64_t pixels = p.out_d * p.out_h * p.out_w, most = p.in_d * p.in_h / 2;
  if (dtype == DType::kFloat64) return gs::cpu::row_window<G, double>(p, grid4, 0, 0, pixels, 1, most, keep).rows;
  if (dtype == DType::kFloat16) return gs::cpu::row_window<G, gs::Half>(p, grid4, 0, 0, pixels, 1, most, keep).rows;
  return gs::cpu::row_window<G, float>(p, grid4, 0, 0, pixels, 1, most, keep).rows;
}

TEST(RowWindows, ImagesGiveWholePlanesBits) {
  const Dims shapes[] = {
      {2, 3, 40, 36, 40, 36},   // narrow lanes
      {1, 16, 48, 40, 40, 44},  // a full block
      {2, 20, 30, 34, 24, 30},  // two sub-blocks
      {1, 8, 64, 20, 30, 18},   // downsampling
      {1, 3, 32, 32, 128, 128}, // upsampling: 16 pixel chunks
      {1, 16, 96, 80, 96, 80},  // two pixel chunks
  };
  const int64_t targets = gs::cpu::available_targets();
  for (int64_t t = targets; t != 0; t &= t - 1) {
    const int64_t target = t & -t;
    gs::cpu::force_targets(target);
    uint64_t seed = 900;
    for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic}) {
      for (Padding pad : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
        bool align = (seed & 1) != 0;
        for (const Dims& d : shapes) {
          for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16}) {
            const Options opt{mode, pad, align = !align};
            Problem p = Problem::random(d, dtype, opt, seed++);
            // 0: smooth; 1: shifted, partly outside the image; 2: turned,
            // with special values.
            const int variant = static_cast<int>(seed % 3);
            make_smooth(&p, 0.04, variant == 1 ? 0.3 : 0.0, variant == 2 ? 0.15 : 0.0);
            if (variant == 2) add_specials(&p, 97);
            const std::string what = std::string(gs::cpu::target_name(target)) + " " + describe(opt) + " " +
                                     std::string(gs::to_string(dtype)) + " " + to_string(d) + " variant " +
                                     std::to_string(variant);
            gs::detail::Problem bp;
            Tensor dx(dtype, p.input.shape()), dgrid(dtype, p.grid.shape());
            ASSERT_TRUE(gs::detail::validate_backward(p.grad.view(), p.input.view(), p.grid.view(),
                                                      dx.mutable_view(), dgrid.mutable_view(), opt, {}, &bp)
                            .ok());
            if (variant == 0) {
              EXPECT_GT(window_size<2>(bp, p.grid.view(), dtype), 0) << what;
            }
            for (Layout layout : {Layout::kContiguous, Layout::kChannelsLast}) {
              expect_window_bits(what + " dx " + to_string(layout), mode,
                                 [&](gs::OutputMask mask, int threads, bool windows, int64_t margin, bool* planned) {
                                   return image_backward(p, mask, threads, windows, margin, layout, planned);
                                 });
              if (dtype != DType::kFloat32 || mode != Interpolation::kBilinear) break;
            }
          }
        }
      }
    }
  }
  gs::cpu::force_targets(0);
}

TEST(RowWindows, VolumesGiveWholePlanesBits) {
  const VolDims shapes[] = {
      {1, 4, 32, 6, 8, 32, 6, 8},  // narrow lanes
      {2, 16, 24, 5, 6, 20, 5, 7},  // a full block
      {1, 4, 32, 16, 16, 32, 16, 16},  // two voxel chunks
  };
  const int64_t targets = gs::cpu::available_targets();
  for (int64_t t = targets; t != 0; t &= t - 1) {
    const int64_t target = t & -t;
    gs::cpu::force_targets(target);
    uint64_t seed = 950;
    for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic}) {
      for (Padding pad : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
        for (const VolDims& d : shapes) {
          for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
            const Options opt{mode, pad, (seed & 1) != 0};
            VolProblem p = VolProblem::random(d, dtype, opt, seed++);
            const bool plain = (seed & 2) != 0;  // else shifted, with special values
            make_smooth(&p, 0.05, plain ? 0.0 : 0.2);
            if (!plain) add_specials(&p, 131);
            const std::string what = std::string(gs::cpu::target_name(target)) + " " + describe(opt) + " " +
                                     std::string(gs::to_string(dtype)) + " " + to_string(d);
            // The drivers' view of the grid: depth and height merged into rows.
            const gs::VolumeView g = p.grid.view();
            const gs::TensorView grid4{g.data, dtype, {d.n, d.out_d * d.out_h, d.out_w, 3},
                                       {g.strides[0], g.strides[2], g.strides[3], g.strides[4]}};
            gs::detail::Problem bp;
            VolTensor dx(dtype, p.input.shape()), dgrid(dtype, p.grid.shape());
            ASSERT_TRUE(gs::detail::validate_backward_3d(p.grad.view(), p.input.view(), g, dx.mutable_view(),
                                                         dgrid.mutable_view(), opt, {}, &bp)
                            .ok());
            if (plain) {
              EXPECT_GT(window_size<3>(bp, grid4, dtype), 0) << what;
            }
            expect_window_bits(what, mode, [&](gs::OutputMask mask, int threads, bool windows, int64_t margin,
                                         bool* planned) {
              return volume_backward(p, mask, threads, windows, margin, planned);
            });
          }
        }
      }
    }
  }
  gs::cpu::force_targets(0);
}

// A grid that jumps about reaches the whole plane from its first tile on:
// no window (the plan's whole planes run).
TEST(RowWindows, NoneForGridsThatJumpAbout) {
  const Dims d{1, 8, 40, 40, 40, 40};
  const Problem p = Problem::random(d, DType::kFloat32, Options{}, 990);
  Tensor dx(DType::kFloat32, p.input.shape()), dgrid(DType::kFloat32, p.grid.shape());
  gs::detail::Problem bp;
  ASSERT_TRUE(gs::detail::validate_backward(p.grad.view(), p.input.view(), p.grid.view(), dx.mutable_view(),
                                            dgrid.mutable_view(), Options{}, {}, &bp)
                  .ok());
  EXPECT_EQ(window_size<2>(bp, p.grid.view(), DType::kFloat32), 0);
}

// The planner's choice: windows where a task's whole-plane buffers would
// take kMinWindowBytes or more, interleaved plans only.
TEST(RowWindowsPlan, TakenForLargeInterleavedBuffers) {
  auto plan = [](int64_t c, int64_t side, DType dtype) {
    gs::detail::Problem p;
    p.n = 1;
    p.c = c;
    p.in_h = p.in_w = p.out_h = p.out_w = side;
    p.dtype = dtype;
    p.input_strides = p.dx_strides = {c * side * side, side * side, side, 1};
    return gs::cpu::plan_backward(p);
  };
  // 16 channels of 512^2 floats: 16 MiB a buffer; of 256^2: 4 MiB.
  EXPECT_EQ(plan(16, 512, DType::kFloat32).lanes, 16);
  EXPECT_TRUE(plan(16, 512, DType::kFloat32).row_windows);
  EXPECT_FALSE(plan(16, 256, DType::kFloat32).row_windows);
  // 3 channels (4 lanes) of 1024^2: 16 MiB; of 256^2: 1 MiB.
  EXPECT_TRUE(plan(3, 1024, DType::kFloat32).row_windows);
  EXPECT_FALSE(plan(3, 256, DType::kFloat32).row_windows);
  // One channel: planes, no windows.
  EXPECT_EQ(plan(1, 2048, DType::kFloat32).lanes, 1);
  EXPECT_FALSE(plan(1, 2048, DType::kFloat32).row_windows);
}

// Every valid tap of the scalar stencil of every pixel lies in the rows
// reach_rows gives its tile (margin 0: the stencil's extent alone).
template <Interpolation M, Padding P, bool kAlign, class T>
void expect_image_reach(const Problem& p, const gs::detail::Problem& bp, const std::string& what) {
  const Dims& d = p.dims;
  const int64_t pixels = d.out_h * d.out_w;
  for (int64_t n = 0; n < d.n; ++n) {
    for (int64_t p0 = 0; p0 < pixels; p0 += gs::cpu::kTile) {
      const int64_t count = std::min<int64_t>(gs::cpu::kTile, pixels - p0);
      const gs::cpu::RowSpan r = gs::cpu::reach_rows<2, T>(bp, p.grid.view(), n, p0, count, 0);
      for (int64_t q = p0; q < p0 + count; ++q) {
        gs::cpu::Stencil<T, gs::cpu::kTaps<M>> s;
        const auto gx = static_cast<T>(p.grid.get(n, q / d.out_w, q % d.out_w, 0));
        const auto gy = static_cast<T>(p.grid.get(n, q / d.out_w, q % d.out_w, 1));
        gs::cpu::build_stencil<M, P, kAlign>(gx, gy, d.in_h, d.in_w, &s);
        for (int k = 0; k < gs::cpu::kTaps<M>; ++k) {
          if (!s.valid[k]) continue;
          EXPECT_TRUE(s.y[k] >= r.lo && s.y[k] < r.hi)
              << what << " pixel " << q << " tap row " << s.y[k] << " outside [" << r.lo << ", " << r.hi << ")";
        }
      }
    }
  }
}

template <Interpolation M, Padding P>
void image_reach(const Problem& p, const gs::detail::Problem& bp, const std::string& what) {
  if (p.options.align_corners) {
    expect_image_reach<M, P, true, float>(p, bp, what);
  } else {
    expect_image_reach<M, P, false, float>(p, bp, what);
  }
}

TEST(ReachRows, CoversEveryTapOfTheStencil) {
  const Dims shapes[] = {{2, 1, 17, 23, 19, 21}, {1, 1, 1, 5, 7, 9}, {1, 1, 6, 1, 9, 7}};
  uint64_t seed = 1000;
  for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic}) {
    for (Padding pad : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
      for (bool align : {false, true}) {
        for (const Dims& d : shapes) {
          for (int variant = 0; variant < 4; ++variant) {
            const Options opt{mode, pad, align};
            Problem p = Problem::random(d, DType::kFloat32, opt, seed++, variant == 3 ? 3.0 : 1.05);
            if (variant < 3) make_smooth(&p, 0.05 * variant, 0.1 * variant, 0.2 * variant);
            if (variant == 2) add_specials(&p, 5);
            Tensor dx(DType::kFloat32, p.input.shape()), dgrid(DType::kFloat32, p.grid.shape());
            gs::detail::Problem bp;
            ASSERT_TRUE(gs::detail::validate_backward(p.grad.view(), p.input.view(), p.grid.view(),
                                                      dx.mutable_view(), dgrid.mutable_view(), opt, {}, &bp)
                            .ok());
            const std::string what = describe(opt) + " " + to_string(d) + " variant " + std::to_string(variant);
            switch (mode) {
              case Interpolation::kBilinear:
                if (pad == Padding::kZeros) image_reach<Interpolation::kBilinear, Padding::kZeros>(p, bp, what);
                if (pad == Padding::kBorder) image_reach<Interpolation::kBilinear, Padding::kBorder>(p, bp, what);
                if (pad == Padding::kReflection) image_reach<Interpolation::kBilinear, Padding::kReflection>(p, bp, what);
                break;
              case Interpolation::kNearest:
                if (pad == Padding::kZeros) image_reach<Interpolation::kNearest, Padding::kZeros>(p, bp, what);
                if (pad == Padding::kBorder) image_reach<Interpolation::kNearest, Padding::kBorder>(p, bp, what);
                if (pad == Padding::kReflection) image_reach<Interpolation::kNearest, Padding::kReflection>(p, bp, what);
                break;
              case Interpolation::kBicubic:
                if (pad == Padding::kZeros) image_reach<Interpolation::kBicubic, Padding::kZeros>(p, bp, what);
                if (pad == Padding::kBorder) image_reach<Interpolation::kBicubic, Padding::kBorder>(p, bp, what);
                if (pad == Padding::kReflection) image_reach<Interpolation::kBicubic, Padding::kReflection>(p, bp, what);
                break;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace gstest
