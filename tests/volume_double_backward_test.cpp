// The double backward of volumes: the float64 reference against central
// differences of the 3-D first-order reference and against the 2-D double
// backward on depth-1 volumes; the kernel against the reference over modes,
// paddings, dtypes and layouts; nearest, absent incoming gradients, masks,
// bit-identical results for any thread count, hostile grids, empty problems
// and the argument checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/problem.hpp"
#include "common/tensor.hpp"
#include "cpu/dispatch.hpp"
#include "gridsampler/gridsampler.hpp"
#include "host/tensor.hpp"
#include "reference/reference.hpp"

namespace gridsampler {
namespace {

using host::VolumeTensor;

const Interpolation kModes[] = {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic};
const Padding kPaddings[] = {Padding::kZeros, Padding::kBorder, Padding::kReflection};
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

std::string describe(const Options& o) {
  return std::string(to_string(o.interpolation)) + "/" + std::string(to_string(o.padding)) +
         "/align=" + std::to_string(o.align_corners);
}

struct Dims {
  int64_t n, c, in_d, in_h, in_w, out_d, out_h, out_w;
};
std::string to_string(const Dims& d) {
  return "n=" + std::to_string(d.n) + " c=" + std::to_string(d.c) + " in=" + std::to_string(d.in_d) + "x" +
         std::to_string(d.in_h) + "x" + std::to_string(d.in_w) + " out=" + std::to_string(d.out_d) + "x" +
         std::to_string(d.out_h) + "x" + std::to_string(d.out_w);
}

void fill_uniform(VolumeTensor* t, std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<std::size_t>(t->numel()));
  for (double& x : v) x = u(rng);
  t->assign(v);
}

// [-1, 1] value of pixel coordinate `pix` on an axis of `size` pixels.
double normalize(double pix, int64_t size, bool align) {
  return align ? pix * 2 / static_cast<double>(size - 1) - 1 : (2 * pix + 1) / static_cast<double>(size) - 1;
}

// A double-backward problem: the first-order problem and the two incoming
// gradients.
struct Second {
  Options options;
  VolumeTensor input, grid, grad, gg_dx, gg_dgrid;
};

// Random values in [-1, 1]; the grid in [-1.2, 1.2], or with smooth_grid at
// pixel positions k + f, f in [0.15, 0.85], k from three pixels outside the
// volume to two beyond, per component: no floor, clip or (align_corners)
// fold is within 0.15 pixels, so finite differences see smooth functions.
Second make(const Dims& d, DType dt, const Options& o, uint64_t seed, bool smooth_grid = false) {
  std::mt19937_64 rng(seed);
  Second s{o,
           VolumeTensor(dt, {d.n, d.c, d.in_d, d.in_h, d.in_w}),
           VolumeTensor(dt, {d.n, d.out_d, d.out_h, d.out_w, 3}),
           VolumeTensor(dt, {d.n, d.c, d.out_d, d.out_h, d.out_w}),
           VolumeTensor(dt, {d.n, d.c, d.in_d, d.in_h, d.in_w}),
           VolumeTensor(dt, {d.n, d.out_d, d.out_h, d.out_w, 3})};
  fill_uniform(&s.input, rng, -1, 1);
  fill_uniform(&s.grid, rng, -1.2, 1.2);
  fill_uniform(&s.grad, rng, -1, 1);
  fill_uniform(&s.gg_dx, rng, -1, 1);
  fill_uniform(&s.gg_dgrid, rng, -1, 1);
  if (smooth_grid) {
    std::uniform_real_distribution<double> frac(0.15, 0.85);
    const int64_t sizes[3] = {d.in_w, d.in_h, d.in_d};
    for (int64_t n = 0; n < d.n; ++n)
      for (int64_t z = 0; z < d.out_d; ++z)
        for (int64_t y = 0; y < d.out_h; ++y)
          for (int64_t x = 0; x < d.out_w; ++x)
            for (int a = 0; a < 3; ++a) {
              std::uniform_int_distribution<int64_t> cell(-3, sizes[a] + 1);
              s.grid.set(n, z, y, x, a,
                         normalize(static_cast<double>(cell(rng)) + frac(rng), sizes[a], o.align_corners));
            }
  }
  return s;
}

Shape5 negative_strides(const Shape5& s) {
  Shape5 st = contiguous_strides_5d(s);
  st[2] = -st[2];
  st[4] = -st[4];
  return st;
}

// Layouts: 0 NCDHW, 1 NDHWC (grids stay dense), 2 negative depth and width
// strides.
Shape5 strides_for(const Shape5& s, int layout) {
  switch (layout) {
    case 1: return s[4] == 3 ? contiguous_strides_5d(s) : channels_last_strides_5d(s);
    case 2: return negative_strides(s);
    default: return contiguous_strides_5d(s);
  }
}
const char* layout_name(int layout) { return layout == 0 ? "NCDHW" : layout == 1 ? "NDHWC" : "negative"; }

VolumeTensor relayout(const VolumeTensor& t, int layout) {
  VolumeTensor r(t.dtype(), t.shape(), strides_for(t.shape(), layout));
  r.assign_from(t);
  return r;
}
Second relayout(const Second& s, int layout) {
  return {s.options,          relayout(s.input, layout),    relayout(s.grid, layout),
          relayout(s.grad, layout), relayout(s.gg_dx, layout), relayout(s.gg_dgrid, layout)};
}

struct Results {
  VolumeTensor d_grad, d_input, d_grid;
};

// Runs the kernel or the reference, outputs (in `layout`) pre-filled with
// NaN. An absent incoming gradient is passed as a null view.
Results run2(const Second& s, bool reference, int layout = 0, DoubleBackwardMask mask = {}, bool with_gg_dx = true,
             bool with_gg_dgrid = true, int threads = 0) {
  const DType dt = s.input.dtype();
  Results r{VolumeTensor(dt, s.grad.shape(), strides_for(s.grad.shape(), layout)),
            VolumeTensor(dt, s.input.shape(), strides_for(s.input.shape(), layout)),
            VolumeTensor(dt, s.grid.shape(), strides_for(s.grid.shape(), layout))};
  r.d_grad.fill(kNaN);
  r.d_input.fill(kNaN);
  r.d_grid.fill(kNaN);
  Options o = s.options;
  o.num_threads = threads;
  auto fn = reference ? &reference::grid_sampler_3d_double_backward : &grid_sampler_3d_double_backward;
  const VolumeView none{nullptr, dt, {}, {}};
  const Status st = fn(with_gg_dx ? s.gg_dx.view() : none, with_gg_dgrid ? s.gg_dgrid.view() : none,
                       s.grad.view(), s.input.view(), s.grid.view(), r.d_grad.mutable_view(),
                       r.d_input.mutable_view(), r.d_grid.mutable_view(), o, mask);
  EXPECT_TRUE(st.ok()) << st.message();
  return r;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

// <gg_dx, dx> + <gg_dgrid, dgrid> from the 3-D first-order reference.
double pairing(const Second& s) {
  VolumeTensor dx(DType::kFloat64, s.input.shape()), dgrid(DType::kFloat64, s.grid.shape());
  const Status st = reference::grid_sampler_3d_backward(s.grad.view(), s.input.view(), s.grid.view(),
                                                        dx.mutable_view(), dgrid.mutable_view(), s.options);
  EXPECT_TRUE(st.ok()) << st.message();
  return dot(dx.values(), s.gg_dx.values()) + dot(dgrid.values(), s.gg_dgrid.values());
}

// Central differences of pairing() in every element of one tensor of `s`.
std::vector<double> numeric_gradient(Second s, VolumeTensor Second::*member, double eps) {
  VolumeTensor& t = s.*member;
  std::vector<double> v = t.values(), out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
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

TEST(VolumeDoubleBackward, ReferenceMatchesFiniteDifferencesOfTheFirstOrder) {
  const Dims d{1, 2, 3, 4, 5, 2, 2, 2};
  for (Interpolation mode : kModes) {
    for (Padding pad : kPaddings) {
      for (bool align : {false, true}) {
        const Options o{mode, pad, align};
        const Second s = make(d, DType::kFloat64, o, 11, true);
        const Results r = run2(s, true);
        const struct {
          const char* name;
          VolumeTensor Second::*member;
          const VolumeTensor* analytic;
        } cases[] = {{"d_grad", &Second::grad, &r.d_grad},
                     {"d_input", &Second::input, &r.d_input},
                     {"d_grid", &Second::grid, &r.d_grid}};
        for (const auto& c : cases) {
          const std::vector<double> fd = numeric_gradient(s, c.member, 1e-6);
          const gstest::Diff diff = gstest::compare(c.analytic->values(), fd);
          EXPECT_LE(diff.max_abs, 1e-6 * std::max(1.0, diff.max_ref))
              << describe(o) << " " << c.name << " at " << diff.index;
          if (mode != Interpolation::kNearest || c.member == &Second::grad) {
            EXPECT_GT(diff.max_ref, 1e-3) << describe(o) << " " << c.name << ": the check saw only zeros";
          }
        }
      }
    }
  }
}

// A volume of depth 1 sampled at z = 0 with align_corners (iz = 0 exactly,
// d(iz)/dz = 0) is the image of its one slice: the 3-D reference gives the
// 2-D reference's numbers, and a zero d_grid along z.
TEST(VolumeDoubleBackward, ReferenceOfADepthOneVolumeIsThe2DReference) {
  for (Interpolation mode : kModes) {
    for (Padding pad : kPaddings) {
      const Options o{mode, pad, true};
      const Second s = make({2, 3, 1, 5, 6, 1, 3, 4}, DType::kFloat64, o, 7);
      auto image = [](const VolumeTensor& v, bool grid) {
        const Shape5 sh = v.shape();
        host::Tensor t(DType::kFloat64, grid ? Shape4{sh[0], sh[2], sh[3], 2} : Shape4{sh[0], sh[1], sh[3], sh[4]});
        for (int64_t a = 0; a < t.shape()[0]; ++a)
          for (int64_t b = 0; b < t.shape()[1]; ++b)
            for (int64_t c = 0; c < t.shape()[2]; ++c)
              for (int64_t e = 0; e < t.shape()[3]; ++e) t.set(a, b, c, e, grid ? v.get(a, 0, b, c, e) : v.get(a, b, 0, c, e));
        return t;
      };
      const host::Tensor input = image(s.input, false), grid = image(s.grid, true), grad = image(s.grad, false),
                         ggx = image(s.gg_dx, false), ggg = image(s.gg_dgrid, true);
      host::Tensor d_grad(DType::kFloat64, grad.shape()), d_input(DType::kFloat64, input.shape()),
          d_grid(DType::kFloat64, grid.shape());
      ASSERT_TRUE(reference::grid_sampler_2d_double_backward(ggx.view(), ggg.view(), grad.view(), input.view(),
                                                             grid.view(), d_grad.mutable_view(),
                                                             d_input.mutable_view(), d_grid.mutable_view(), o)
                      .ok());
      const Results r = run2(s, true);
      EXPECT_EQ(image(r.d_grad, false).values(), d_grad.values()) << describe(o);
      EXPECT_EQ(image(r.d_input, false).values(), d_input.values()) << describe(o);
      std::vector<double> xy, z;
      const std::vector<double> all = r.d_grid.values();
      for (std::size_t i = 0; i < all.size(); ++i) (i % 3 == 2 ? z : xy).push_back(all[i]);
      EXPECT_EQ(xy, d_grid.values()) << describe(o);
      for (double v : z) EXPECT_EQ(v, 0.0) << describe(o);
    }
  }
}

// dtype-scaled bound against the float64 reference: k * eps * max|ref|.
double bound(DType dt, const Dims& d, Interpolation mode) {
  const double taps = mode == Interpolation::kBicubic ? 64 : 8;
  switch (dt) {
    case DType::kFloat64:
    case DType::kFloat32: return 64 * taps * static_cast<double>(d.c + 1);
    default: return 4;  // one rounding of a float32 result
  }
}

void expect_close(const Results& got, const Results& want, DType dt, double k, const std::string& what) {
  for (auto [g, w, name] : {std::tuple{&got.d_grad, &want.d_grad, "d_grad"},
                            std::tuple{&got.d_input, &want.d_input, "d_input"},
                            std::tuple{&got.d_grid, &want.d_grid, "d_grid"}}) {
    const gstest::Diff diff = gstest::compare(g->values(), w->values());
    EXPECT_LE(diff.max_abs, gstest::tolerance(dt, diff.max_ref, k)) << what << " " << name << " at " << diff.index;
  }
}

TEST(VolumeDoubleBackward, KernelMatchesReferenceOnEveryModeDtypeAndLayout) {
  // Interleaved channels (c >= 2) and planes (one channel).
  const Dims dims[] = {{2, 3, 3, 4, 5, 2, 3, 4}, {1, 1, 4, 3, 5, 3, 2, 5}};
  for (const Dims& d : dims) {
    for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
      for (Interpolation mode : kModes) {
        for (Padding pad : kPaddings) {
          for (bool align : {false, true}) {
            const Options o{mode, pad, align};
            const Second s = make(d, dt, o, 23 + static_cast<uint64_t>(d.c));
            const Results want = run2(s, true);
            for (int layout = 0; layout < 3; ++layout) {
              const Results got = run2(relayout(s, layout), false, layout);
              expect_close(got, want, dt, bound(dt, d, mode),
                           describe(o) + " " + std::string(gridsampler::to_string(dt)) + " " + layout_name(layout) +
                               " " + to_string(d));
            }
          }
        }
      }
    }
  }
}

TEST(VolumeDoubleBackward, NearestIsTheForwardOfGgDxAndNothingElse) {
  for (Padding pad : kPaddings) {
    const Options o{Interpolation::kNearest, pad, false};
    const Second s = make({2, 3, 3, 4, 5, 2, 3, 4}, DType::kFloat32, o, 5);
    const Results r = run2(s, false);
    VolumeTensor fwd(DType::kFloat32, s.grad.shape());
    ASSERT_TRUE(grid_sampler_3d(s.gg_dx.view(), s.grid.view(), fwd.mutable_view(), o).ok());
    EXPECT_EQ(r.d_grad.values(), fwd.values()) << describe(o);
    for (double v : r.d_input.values()) EXPECT_EQ(v, 0.0) << describe(o);
    for (double v : r.d_grid.values()) EXPECT_EQ(v, 0.0) << describe(o);
  }
}

TEST(VolumeDoubleBackward, AbsentIncomingGradientsCountAsZeros) {
  for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kBicubic}) {
    const Options o{mode, Padding::kBorder, true};
    const Second s = make({2, 3, 3, 4, 5, 2, 3, 4}, DType::kFloat64, o, 9);
    Second zero_ggx = s, zero_ggg = s;
    zero_ggx.gg_dx.fill(0);
    zero_ggg.gg_dgrid.fill(0);
    for (bool reference : {true, false}) {
      const Results no_ggx = run2(s, reference, 0, {}, false, true);
      const Results no_ggg = run2(s, reference, 0, {}, true, false);
      const Results want_ggx = run2(zero_ggx, true), want_ggg = run2(zero_ggg, true);
      expect_close(no_ggx, want_ggx, DType::kFloat64, 64 * 64 * 4, describe(o) + " without gg_dx");
      expect_close(no_ggg, want_ggg, DType::kFloat64, 64 * 64 * 4, describe(o) + " without gg_dgrid");
      // Without gg_dgrid, d_input is exactly zero.
      for (double v : no_ggg.d_input.values()) EXPECT_EQ(v, 0.0) << describe(o);
    }
  }
}

TEST(VolumeDoubleBackward, MaskedOutputsAreNotWritten) {
  const Options o{Interpolation::kBicubic, Padding::kReflection, false};
  const Second s = make({2, 3, 3, 4, 5, 2, 3, 4}, DType::kFloat32, o, 3);
  for (bool reference : {true, false}) {
    const Results all = run2(s, reference);
    for (int bits = 0; bits < 8; ++bits) {
      const DoubleBackwardMask mask{(bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0};
      const Results r = run2(s, reference, 0, mask);
      for (auto [on, got, want] : {std::tuple{mask.grad, &r.d_grad, &all.d_grad},
                                   std::tuple{mask.input, &r.d_input, &all.d_input},
                                   std::tuple{mask.grid, &r.d_grid, &all.d_grid}}) {
        if (on) {
          EXPECT_EQ(got->storage(), want->storage()) << "mask bits " << bits << " reference " << reference;
        } else {
          for (double v : got->values()) EXPECT_TRUE(std::isnan(v)) << "mask bits " << bits;
        }
      }
    }
  }
}

// Shapes that take every split: one task per volume, voxel chunks of a
// single channel (planes) and of interleaved channels, channel blocks past
// the interleaved block's 64 channels, many batches; float16 goes through
// workspace accumulators.
TEST(VolumeDoubleBackward, BitwiseIdenticalForAnyThreadCount) {
  const Dims dims[] = {{3, 2, 3, 4, 5, 2, 3, 4}, {1, 1, 6, 6, 6, 16, 16, 17}, {1, 5, 5, 6, 6, 16, 16, 17},
                       {20, 2, 2, 3, 3, 2, 2, 2}, {1, 70, 2, 3, 3, 2, 2, 3}};
  for (const Dims& d : dims) {
    for (DType dt : {DType::kFloat32, DType::kFloat16}) {
      for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kBicubic}) {
        // Tricubic's 64 taps on the large shapes would only slow the
        // sanitizer builds; their splits are the trilinear ones.
        if (mode == Interpolation::kBicubic && d.out_d * d.out_h * d.out_w > 1000) continue;
        const Options o{mode, Padding::kZeros, false};
        const Second s = make(d, dt, o, 41);
        const Results one = run2(s, false, 0, {}, true, true, 1);
        for (int threads : {2, 3, 7}) {
          const Results r = run2(s, false, 0, {}, true, true, threads);
          const std::string what = to_string(d) + " " + describe(o) + " threads=" + std::to_string(threads);
          EXPECT_EQ(r.d_grad.storage(), one.d_grad.storage()) << what;
          EXPECT_EQ(r.d_input.storage(), one.d_input.storage()) << what;
          EXPECT_EQ(r.d_grid.storage(), one.d_grid.storage()) << what;
        }
        expect_close(one, run2(s, true), dt, bound(dt, d, mode), to_string(d) + " " + describe(o));
      }
    }
  }
}

// The channel loop is compiled per SIMD target: every target gives the same
// bits on volumes too (whole vectors, narrower ones, single lanes).
TEST(VolumeDoubleBackward, EverySimdTargetGivesTheSameBits) {
  const Dims dims[] = {{1, 3, 3, 4, 5, 2, 3, 3}, {1, 8, 3, 3, 4, 2, 2, 3}, {1, 17, 2, 3, 3, 2, 2, 2}};
  const int64_t targets = gridsampler::cpu::available_targets();
  uint64_t seed = 77;
  for (const Dims& d : dims) {
    for (DType dt : {DType::kFloat32, DType::kFloat64}) {
      for (Interpolation mode : {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic}) {
        const Options o{mode, seed % 2 ? Padding::kBorder : Padding::kZeros, seed % 3 == 0};
        const Second s = make(d, dt, o, seed++);
        std::vector<Results> got;
        for (int64_t t = targets; t != 0; t &= t - 1) {
          gridsampler::cpu::force_targets(t & -t);
          got.push_back(run2(s, false));
        }
        gridsampler::cpu::force_targets(0);
        const std::string what = to_string(d) + " " + describe(o);
        for (std::size_t i = 1; i < got.size(); ++i) {
          EXPECT_EQ(got[i].d_grad.storage(), got[0].d_grad.storage()) << what << " target " << i;
          EXPECT_EQ(got[i].d_input.storage(), got[0].d_input.storage()) << what << " target " << i;
          EXPECT_EQ(got[i].d_grid.storage(), got[0].d_grid.storage()) << what << " target " << i;
        }
        expect_close(got[0], run2(s, true), dt, bound(dt, d, mode), what);
      }
    }
  }
}

// NaN, +-Inf and huge values in one component at a time: each follows the
// 2-D rules on its own axis, in the kernel as in the reference.
TEST(VolumeDoubleBackward, NonFiniteAndHugeGridsMatchTheReference) {
  const double hostile[] = {kNaN, kInf, -kInf, 1e30, -1e30, 3e9, 1.0, -1.0};
  for (Interpolation mode : kModes) {
    for (Padding pad : kPaddings) {
      const Options o{mode, pad, true};
      Second s = make({1, 2, 3, 4, 5, 2, 3, 4}, DType::kFloat32, o, 17);
      int i = 0;
      for (int64_t z = 0; z < 2; ++z)
        for (int64_t y = 0; y < 3; ++y)
          for (int64_t x = 0; x < 4; ++x, ++i) s.grid.set(0, z, y, x, i % 3, hostile[i % 8]);
      const Results got = run2(s, false), want = run2(s, true);
      for (auto [g, w] : {std::pair{&got.d_grad, &want.d_grad}, std::pair{&got.d_input, &want.d_input},
                          std::pair{&got.d_grid, &want.d_grid}}) {
        const std::vector<double> gv = g->values(), wv = w->values();
        for (std::size_t k = 0; k < gv.size(); ++k) {
          EXPECT_EQ(std::isnan(gv[k]), std::isnan(wv[k])) << describe(o) << " at " << k;
          if (!std::isnan(wv[k])) {
            EXPECT_NEAR(gv[k], wv[k], 1e-4 * std::max(1.0, std::abs(wv[k]))) << describe(o);
          }
        }
      }
      // Finite inputs stay finite through padding.
      for (double v : got.d_input.values()) EXPECT_TRUE(std::isfinite(v)) << describe(o);
    }
  }
}

TEST(VolumeDoubleBackward, EmptyProblemsSucceed) {
  for (const Dims& d : {Dims{0, 2, 2, 3, 3, 2, 2, 2}, Dims{2, 0, 2, 3, 3, 2, 2, 2}, Dims{2, 2, 2, 3, 3, 0, 2, 2}}) {
    for (bool reference : {true, false}) {
      const Second s = make(d, DType::kFloat32, {}, 1);
      const Results r = run2(s, reference);
      for (double v : r.d_input.values()) EXPECT_EQ(v, 0.0) << to_string(d);
      for (double v : r.d_grid.values()) EXPECT_EQ(v, 0.0) << to_string(d);
    }
  }
}

TEST(VolumeDoubleBackward, ArgumentsAreChecked) {
  const Second s = make({1, 2, 3, 4, 4, 2, 3, 3}, DType::kFloat32, {}, 2);
  Results r{VolumeTensor(DType::kFloat32, s.grad.shape()), VolumeTensor(DType::kFloat32, s.input.shape()),
            VolumeTensor(DType::kFloat32, s.grid.shape())};
  auto call = [&](VolumeView ggx, VolumeView ggg, MutableVolumeView dgrad, const VolumeView& grid) {
    return grid_sampler_3d_double_backward(ggx, ggg, s.grad.view(), s.input.view(), grid, dgrad,
                                           r.d_input.mutable_view(), r.d_grid.mutable_view());
  };
  // gg_dx shaped like the grid.
  Status st = call(s.gg_dgrid.view(), s.gg_dgrid.view(), r.d_grad.mutable_view(), s.grid.view());
  EXPECT_EQ(st.message(), "gg_dx: shape (1, 2, 3, 3, 3) must be (1, 2, 3, 4, 4), the shape of input");
  // gg_dgrid in another dtype.
  VolumeTensor wrong(DType::kFloat64, s.gg_dgrid.shape());
  st = call(s.gg_dx.view(), wrong.view(), r.d_grad.mutable_view(), s.grid.view());
  EXPECT_EQ(st.message(), "gg_dgrid: dtype float64 differs from input's float32");
  // A grid of pairs.
  VolumeTensor pairs(DType::kFloat32, {1, 2, 3, 3, 2});
  st = call(s.gg_dx.view(), VolumeView{}, r.d_grad.mutable_view(), pairs.view());
  EXPECT_EQ(st.message(), "grid: last dimension must be 3, got 2");
  // d_grad of the wrong shape.
  VolumeTensor small(DType::kFloat32, {1, 2, 2, 3, 2});
  st = call(s.gg_dx.view(), s.gg_dgrid.view(), small.mutable_view(), s.grid.view());
  EXPECT_EQ(st.message(),
            "d_grad: shape (1, 2, 2, 3, 2) must be (1, 2, 2, 3, 3), the shape of grad");
  // d_grad writing over gg_dx.
  MutableVolumeView alias = r.d_grad.mutable_view();
  alias.data = const_cast<void*>(s.gg_dx.view().data);
  st = call(s.gg_dx.view(), s.gg_dgrid.view(), alias, s.grid.view());
  EXPECT_EQ(st.message(), "d_grad: memory overlaps gg_dx");
  // The reference checks the same way.
  st = reference::grid_sampler_3d_double_backward(s.gg_dx.view(), s.gg_dgrid.view(), s.grad.view(), s.input.view(),
                                                  pairs.view(), r.d_grad.mutable_view(), r.d_input.mutable_view(),
                                                  r.d_grid.mutable_view());
  EXPECT_EQ(st.message(), "grid: last dimension must be 3, got 2");
  // Masked-off outputs are not checked.
  st = grid_sampler_3d_double_backward(s.gg_dx.view(), s.gg_dgrid.view(), s.grad.view(), s.input.view(),
                                       s.grid.view(), MutableVolumeView{}, r.d_input.mutable_view(),
                                       MutableVolumeView{}, {}, {false, true, false});
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(call(s.gg_dx.view(), s.gg_dgrid.view(), r.d_grad.mutable_view(), s.grid.view()).ok());
}

}  // namespace
}  // namespace gridsampler
