// The double backward: the float64 reference against finite differences of
// the first-order reference, the kernel against the reference on sweeps of
// modes, paddings, dtypes, layouts, absent incoming gradients and masks,
// bit-identical results for any thread count, non-finite grids, and the
// argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/problem.hpp"
#include "cpu/dispatch.hpp"
#include "reference/reference.hpp"

namespace gstest {
namespace {

using gridsampler::DoubleBackwardMask;
using gridsampler::Interpolation;
using gridsampler::Options;
using gridsampler::Padding;
using gridsampler::Status;

constexpr Interpolation kModes[] = {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic};
constexpr Padding kPaddings[] = {Padding::kZeros, Padding::kBorder, Padding::kReflection};

// A double-backward problem: the first-order problem and the two incoming
// gradients.
struct Second {
  Problem first;
  Tensor gg_dx, gg_dgrid;
};

struct Results {
  Tensor d_grad, d_input, d_grid;
};

// [-1, 1] value of pixel coordinate `pix` on an axis of `size` pixels.
double normalize(double pix, int64_t size, bool align) {
  return align ? pix * 2 / static_cast<double>(size - 1) - 1 : (2 * pix + 1) / static_cast<double>(size) - 1;
}

// Grid coordinates at pixel positions k + f with f in [0.15, 0.85] and k from
// two pixels outside the image to two beyond: no floor, fold or clip edge is
// within 0.15 pixels, so finite differences see smooth functions there.
void fill_smooth_grid(Tensor* grid, int64_t in_h, int64_t in_w, bool align, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> frac(0.15, 0.85);
  const Shape4 s = grid->shape();
  for (int64_t n = 0; n < s[0]; ++n) {
    for (int64_t h = 0; h < s[1]; ++h) {
      for (int64_t w = 0; w < s[2]; ++w) {
        for (int a = 0; a < 2; ++a) {
          const int64_t size = a == 0 ? in_w : in_h;
          std::uniform_int_distribution<int64_t> cell(-3, size + 1);
          grid->set(n, h, w, a, normalize(static_cast<double>(cell(rng)) + frac(rng), size, align));
        }
      }
    }
  }
}

Second make(const Dims& d, DType dt, const Options& o, uint64_t seed, bool smooth_grid = false) {
  Second s;
  s.first = Problem::random(d, dt, o, seed, 1.2);
  std::mt19937_64 rng(seed + 1000);
  if (smooth_grid) fill_smooth_grid(&s.first.grid, d.in_h, d.in_w, o.align_corners, rng);
  s.gg_dx = Tensor(dt, s.first.input.shape());
  s.gg_dgrid = Tensor(dt, s.first.grid.shape());
  s.gg_dx.fill_uniform(rng, -1, 1);
  s.gg_dgrid.fill_uniform(rng, -1, 1);
  return s;
}

Second relayout(const Second& s, Layout layout) {
  return {s.first.relayout(layout), s.gg_dx.relayout(layout), s.gg_dgrid.relayout(layout)};
}

// Runs the kernel or the reference, outputs pre-filled with NaN. An absent
// incoming gradient is passed as a null view.
Results run2(const Second& s, bool reference, Layout layout = Layout::kContiguous, DoubleBackwardMask mask = {},
             bool with_gg_dx = true, bool with_gg_dgrid = true, int threads = 0) {
  const DType dt = s.first.input.dtype();
  Results r{Tensor(dt, s.first.grad.shape(), layout), Tensor(dt, s.first.input.shape(), layout),
            Tensor(dt, s.first.grid.shape(), layout)};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  r.d_grad.fill(nan);
  r.d_input.fill(nan);
  r.d_grid.fill(nan);
  Options o = s.first.options;
  o.num_threads = threads;
  auto fn = reference ? &gridsampler::reference::grid_sampler_2d_double_backward
                      : &gridsampler::grid_sampler_2d_double_backward;
  gridsampler::TensorView none{nullptr, dt, {}, {}};
  const Status st = fn(with_gg_dx ? s.gg_dx.view() : none, with_gg_dgrid ? s.gg_dgrid.view() : none,
                       s.first.grad.view(), s.first.input.view(), s.first.grid.view(), r.d_grad.mutable_view(),
                       r.d_input.mutable_view(), r.d_grid.mutable_view(), o, mask);
  EXPECT_TRUE(st.ok()) << st.message();
  return r;
}

// <gg_dx, dx> + <gg_dgrid, dgrid> from the first-order reference.
double pairing(const Second& s) {
  const Outputs o = run(s.first, true);
  double sum = 0;
  const auto dx = o.dx.values(), ex = s.gg_dx.values();
  const auto dg = o.dgrid.values(), eg = s.gg_dgrid.values();
  for (size_t i = 0; i < dx.size(); ++i) sum += dx[i] * ex[i];
  for (size_t i = 0; i < dg.size(); ++i) sum += dg[i] * eg[i];
  return sum;
}

// Central differences of pairing() in every element of one tensor of `s`.
std::vector<double> numeric_gradient(Second s, Tensor Problem::*member, double eps) {
  Tensor& t = s.first.*member;
  std::vector<double> v = t.values(), out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const double keep = v[i];
    v[i] = keep + eps;
    t.assign(v);
    const double up = pairing(s);
    v[i] = keep - eps;
    t.assign(v);
    const double down = pairing(s);
    v[i] = keep;
    out[i] = (up - down) / (2 * eps);
  }
  t.assign(v);
  return out;
}

TEST(DoubleBackward, ReferenceMatchesFiniteDifferencesOfTheFirstOrder) {
  const Dims d{2, 2, 5, 6, 3, 4};
  for (Interpolation mode : kModes) {
    for (Padding pad : kPaddings) {
      for (bool align : {false, true}) {
        const Options o{mode, pad, align};
        const Second s = make(d, DType::kFloat64, o, 11, true);
        const Results r = run2(s, true);
        const struct {
          const char* name;
          Tensor Problem::*member;
          const Tensor* analytic;
        } cases[] = {{"d_grad", &Problem::grad, &r.d_grad},
                     {"d_input", &Problem::input, &r.d_input},
                     {"d_grid", &Problem::grid, &r.d_grid}};
        for (const auto& c : cases) {
          const std::vector<double> fd = numeric_gradient(s, c.member, 1e-6);
          const Diff diff = compare(c.analytic->values(), fd);
          EXPECT_LE(diff.max_abs, 1e-6 * std::max(1.0, diff.max_ref))
              << describe(o) << " " << c.name << " at " << diff.index;
          if (mode != Interpolation::kNearest || c.member == &Problem::grad) {
            EXPECT_GT(diff.max_ref, 1e-3) << describe(o) << " " << c.name << ": the check saw only zeros";
          }
        }
      }
    }
  }
}

// dtype-scaled bound against the float64 reference: k * eps * max|ref|.
double bound(DType dt, const Dims& d, Interpolation mode) {
  const double taps = mode == Interpolation::kBicubic ? 16 : 4;
  switch (dt) {
    case DType::kFloat64: return 64 * taps * static_cast<double>(d.c + 1);
    case DType::kFloat32: return 64 * taps * static_cast<double>(d.c + 1);
    default: return 4;  // one rounding of a float32 result
  }
}

TEST(DoubleBackward, KernelMatchesReferenceOnEveryModeDtypeAndLayout) {
  const Dims dims[] = {{2, 3, 7, 9, 5, 6}, {1, 1, 16, 12, 9, 17}};
  for (const Dims& d : dims) {
    for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
      for (Interpolation mode : kModes) {
        for (Padding pad : kPaddings) {
          for (bool align : {false, true}) {
            const Options o{mode, pad, align};
            const Second s = make(d, dt, o, 23 + static_cast<uint64_t>(d.c));
            const Results want = run2(s, true);
            const Results contiguous = run2(s, false);
            for (Layout layout : {Layout::kContiguous, Layout::kChannelsLast, Layout::kNegative}) {
              const Results got = run2(relayout(s, layout), false, layout);
              const std::string what = describe(o) + " " + std::string(gridsampler::to_string(dt)) + " " +
                                       to_string(layout) + " " + to_string(d);
              // Layouts change where values are, not the sums: the same bits.
              EXPECT_EQ(got.d_grad.values(), contiguous.d_grad.values()) << what;
              EXPECT_EQ(got.d_input.values(), contiguous.d_input.values()) << what;
              EXPECT_EQ(got.d_grid.values(), contiguous.d_grid.values()) << what;
              for (auto [g, w, name] : {std::tuple{&got.d_grad, &want.d_grad, "d_grad"},
                                        std::tuple{&got.d_input, &want.d_input, "d_input"},
                                        std::tuple{&got.d_grid, &want.d_grid, "d_grid"}}) {
                const Diff diff = compare(g->values(), w->values());
                EXPECT_LE(diff.max_abs, tolerance(dt, diff.max_ref, bound(dt, d, mode))) << what << " " << name;
              }
            }
          }
        }
      }
    }
  }
}

TEST(DoubleBackward, NearestIsTheForwardOfGgDxAndNothingElse) {
  for (Padding pad : kPaddings) {
    const Options o{Interpolation::kNearest, pad, false};
    const Second s = make({2, 3, 6, 5, 4, 7}, DType::kFloat32, o, 5);
    const Results r = run2(s, false);
    Tensor fwd(DType::kFloat32, s.first.grad.shape());
    ASSERT_TRUE(gridsampler::grid_sampler_2d(s.gg_dx.view(), s.first.grid.view(), fwd.mutable_view(), o).ok());
    EXPECT_EQ(r.d_grad.values(), fwd.values());
    for (double v : r.d_input.values()) EXPECT_EQ(v, 0.0);
    for (double v : r.d_grid.values()) EXPECT_EQ(v, 0.0);
  }
}

TEST(DoubleBackward, AbsentIncomingGradientsCountAsZeros) {
  for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kBicubic}) {
    const Options o{mode, Padding::kBorder, true};
    Second s = make({2, 3, 8, 7, 5, 6}, DType::kFloat64, o, 9);
    Second zero_ggx = s, zero_ggg = s;
    zero_ggx.gg_dx.fill(0);
    zero_ggg.gg_dgrid.fill(0);
    const Results no_ggx = run2(s, false, Layout::kContiguous, {}, false, true);
    const Results no_ggg = run2(s, false, Layout::kContiguous, {}, true, false);
    const Results want_ggx = run2(zero_ggx, true), want_ggg = run2(zero_ggg, true);
    for (auto [got, want] : {std::pair{&no_ggx, &want_ggx}, std::pair{&no_ggg, &want_ggg}}) {
      for (auto [g, w] : {std::pair{&got->d_grad, &want->d_grad}, std::pair{&got->d_input, &want->d_input},
                          std::pair{&got->d_grid, &want->d_grid}}) {
        const Diff diff = compare(g->values(), w->values());
        EXPECT_LE(diff.max_abs, 1e-12 * std::max(1.0, diff.max_ref)) << describe(o);
      }
    }
    // Without gg_dgrid, d_input is exactly zero.
    for (double v : no_ggg.d_input.values()) EXPECT_EQ(v, 0.0);
  }
}

TEST(DoubleBackward, MaskedOutputsAreNotWritten) {
  const Options o{Interpolation::kBicubic, Padding::kReflection, false};
  const Second s = make({2, 3, 8, 7, 5, 6}, DType::kFloat32, o, 3);
  const Results all = run2(s, false);
  for (int bits = 0; bits < 8; ++bits) {
    const DoubleBackwardMask mask{(bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0};
    const Results r = run2(s, false, Layout::kContiguous, mask);
    for (auto [on, got, want] : {std::tuple{mask.grad, &r.d_grad, &all.d_grad},
                                 std::tuple{mask.input, &r.d_input, &all.d_input},
                                 std::tuple{mask.grid, &r.d_grid, &all.d_grid}}) {
      if (on) {
        EXPECT_EQ(got->storage(), want->storage()) << "mask bits " << bits;
      } else {
        for (double v : got->values()) EXPECT_TRUE(std::isnan(v)) << "mask bits " << bits;
      }
    }
  }
}

// Shapes that take every split: one task per image, pixel chunks, channel
// blocks (also past the interleaved block's 64 channels), and both; float16
// goes through workspace accumulators.
TEST(DoubleBackward, BitwiseIdenticalForAnyThreadCount) {
  // Interleaved (2+ channels) and planar (1 channel, pixel chunks) tasks.
  const Dims dims[] = {{3, 2, 9, 11, 7, 6},     {1, 5, 40, 44, 96, 96}, {1, 40, 20, 20, 16, 16},
                       {20, 2, 6, 6, 5, 5},     {2, 1, 30, 30, 80, 80}, {1, 70, 6, 6, 5, 5}};
  for (const Dims& d : dims) {
    for (DType dt : {DType::kFloat32, DType::kFloat16}) {
      for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kBicubic}) {
        const Options o{mode, Padding::kZeros, false};
        const Second s = make(d, dt, o, 41);
        const Results one = run2(s, false, Layout::kContiguous, {}, true, true, 1);
        for (int threads : {2, 3, 7}) {
          const Results r = run2(s, false, Layout::kContiguous, {}, true, true, threads);
          const std::string what = to_string(d) + " " + describe(o) + " threads=" + std::to_string(threads);
          EXPECT_EQ(r.d_grad.storage(), one.d_grad.storage()) << what;
          EXPECT_EQ(r.d_input.storage(), one.d_input.storage()) << what;
          EXPECT_EQ(r.d_grid.storage(), one.d_grid.storage()) << what;
        }
        const Results ref = run2(s, true);
        const Diff diff = compare(one.d_input.values(), ref.d_input.values());
        EXPECT_LE(diff.max_abs, tolerance(dt, diff.max_ref, bound(dt, d, mode))) << to_string(d);
      }
    }
  }
}

// The interleaved driver's channel loop and its tile builders are compiled
// per SIMD target: every target gives the same bits, on channel counts that
// take whole vectors, narrower ones and single lanes (and blocks past 64
// channels), every term combination (gg_dx with and without gg_dgrid's,
// nearest's gg_dx alone), d_input wanted or not, and the three compute
// dtypes; the first target's results also match the reference.
TEST(DoubleBackward, EverySimdTargetGivesTheSameBits) {
  const Dims dims[] = {{2, 2, 7, 9, 5, 6}, {1, 3, 6, 6, 4, 5}, {1, 5, 5, 7, 6, 4}, {1, 8, 6, 5, 5, 5},
                       {1, 13, 5, 6, 4, 4}, {1, 16, 6, 6, 5, 3}, {1, 17, 4, 5, 3, 4}, {1, 70, 4, 4, 3, 3}};
  const int64_t targets = gridsampler::cpu::available_targets();
  uint64_t seed = 900;
  for (const Dims& d : dims) {
    for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kFloat16}) {
      for (Interpolation mode : kModes) {
        const Options o{mode, seed % 2 ? Padding::kReflection : Padding::kZeros, seed % 3 == 0};
        const Second s = make(d, dt, o, seed++);
        for (bool with_gg_dx : {true, false}) {
          for (bool want_input : {true, false}) {
            const DoubleBackwardMask mask{true, want_input, true};
            const std::string what = to_string(d) + " " + describe(o) + " " + std::string(gridsampler::to_string(dt)) +
                                     (with_gg_dx ? " gg_dx" : "") + (want_input ? " d_input" : "");
            std::vector<Results> got;
            for (int64_t t = targets; t != 0; t &= t - 1) {
              gridsampler::cpu::force_targets(t & -t);
              got.push_back(run2(s, false, Layout::kContiguous, mask, with_gg_dx, true));
            }
            gridsampler::cpu::force_targets(0);
            for (std::size_t i = 1; i < got.size(); ++i) {
              EXPECT_EQ(got[i].d_grad.storage(), got[0].d_grad.storage()) << what << " target " << i;
              EXPECT_EQ(got[i].d_input.storage(), got[0].d_input.storage()) << what << " target " << i;
              EXPECT_EQ(got[i].d_grid.storage(), got[0].d_grid.storage()) << what << " target " << i;
            }
            const Results ref = run2(s, true, Layout::kContiguous, mask, with_gg_dx, true);
            for (auto [g, r, name] : {std::tuple{&got[0].d_grad, &ref.d_grad, "d_grad"},
                                      std::tuple{&got[0].d_grid, &ref.d_grid, "d_grid"}}) {
              const Diff diff = compare(g->values(), r->values());
              EXPECT_LE(diff.max_abs, tolerance(dt, diff.max_ref, bound(dt, d, mode))) << what << " " << name;
            }
            if (want_input) {
              const Diff diff = compare(got[0].d_input.values(), ref.d_input.values());
              EXPECT_LE(diff.max_abs, tolerance(dt, diff.max_ref, bound(dt, d, mode))) << what << " d_input";
            }
          }
        }
      }
    }
  }
}

TEST(DoubleBackward, NonFiniteAndHugeGridsMatchTheReference) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double hostile[] = {nan, inf, -inf, 1e30, -1e30, 3e9, 1.0, -1.0};
  for (Interpolation mode : kModes) {
    for (Padding pad : kPaddings) {
      const Options o{mode, pad, true};
      Second s = make({1, 2, 5, 6, 4, 4}, DType::kFloat32, o, 17);
      int i = 0;
      for (int64_t h = 0; h < 4; ++h) {
        for (int64_t w = 0; w < 4; ++w, ++i) s.first.grid.set(0, h, w, i % 2, hostile[i % 8]);
      }
      const Results got = run2(s, false), want = run2(s, true);
      for (auto [g, w] : {std::pair{&got.d_grad, &want.d_grad}, std::pair{&got.d_input, &want.d_input},
                          std::pair{&got.d_grid, &want.d_grid}}) {
        const std::vector<double> gv = g->values(), wv = w->values();
        for (size_t k = 0; k < gv.size(); ++k) {
          EXPECT_EQ(std::isnan(gv[k]), std::isnan(wv[k])) << describe(o) << " at " << k;
          if (!std::isnan(wv[k])) {
            EXPECT_NEAR(gv[k], wv[k], 1e-4 * std::max(1.0, std::abs(wv[k]))) << describe(o);
          }
        }
      }
      // Finite inputs stay finite through padding (zeros samples nothing
      // far away; border and reflection map non-finite coordinates in).
      for (double v : got.d_input.values()) EXPECT_TRUE(std::isfinite(v)) << describe(o);
    }
  }
}

TEST(DoubleBackward, EmptyProblemsSucceed) {
  for (const Dims& d : {Dims{0, 2, 3, 3, 2, 2}, Dims{2, 0, 3, 3, 2, 2}, Dims{2, 2, 3, 3, 0, 2}}) {
    const Second s = make(d, DType::kFloat32, {}, 1);
    const Results r = run2(s, false);
    for (double v : r.d_input.values()) EXPECT_EQ(v, 0.0) << to_string(d);
    for (double v : r.d_grid.values()) EXPECT_EQ(v, 0.0) << to_string(d);
  }
}

TEST(DoubleBackward, ArgumentsAreChecked) {
  const Second s = make({1, 2, 4, 4, 3, 3}, DType::kFloat32, {}, 2);
  Results r{Tensor(DType::kFloat32, s.first.grad.shape()), Tensor(DType::kFloat32, s.first.input.shape()),
            Tensor(DType::kFloat32, s.first.grid.shape())};
  auto call = [&](gridsampler::TensorView ggx, gridsampler::TensorView ggg, gridsampler::MutableTensorView dgrad) {
    return gridsampler::grid_sampler_2d_double_backward(ggx, ggg, s.first.grad.view(), s.first.input.view(),
                                                        s.first.grid.view(), dgrad, r.d_input.mutable_view(),
                                                        r.d_grid.mutable_view());
  };
  // gg_dx shaped like the grid.
  Status st = call(s.gg_dgrid.view(), s.gg_dgrid.view(), r.d_grad.mutable_view());
  EXPECT_EQ(st.message(), "gg_dx: shape (1, 3, 3, 2) must be (1, 2, 4, 4), the shape of input");
  // gg_dgrid in another dtype.
  Tensor wrong(DType::kFloat64, s.gg_dgrid.shape());
  st = call(s.gg_dx.view(), wrong.view(), r.d_grad.mutable_view());
  EXPECT_EQ(st.message(), "gg_dgrid: dtype float64 differs from input's float32");
  // d_grad writing over gg_dx.
  gridsampler::MutableTensorView alias = r.d_grad.mutable_view();
  alias.data = const_cast<void*>(s.gg_dx.view().data);
  alias.shape = s.first.grad.shape();
  alias.strides = gridsampler::contiguous_strides(alias.shape);
  st = call(s.gg_dx.view(), s.gg_dgrid.view(), alias);
  EXPECT_EQ(st.message(), "d_grad: memory overlaps gg_dx");
  EXPECT_TRUE(call(s.gg_dx.view(), s.gg_dgrid.view(), r.d_grad.mutable_view()).ok());
}

}  // namespace
}  // namespace gstest
