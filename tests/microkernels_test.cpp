// The microkernels (src/cpu/microkernels-inl.h) on every compiled SIMD
// target, against plain loops in double over random taps: flat taps into
// [pixel][lane] buffers (invalid ones pointing at the zero slot), strided
// taps into planes, every stencil size, both lane counts, every
// combination of wanted outputs, and tile lengths around the vector sizes.
// Fused and unfused multiply-adds round differently, so results are compared
// within a bound relative to the sum of the magnitudes of their terms.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "microkernels_test.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cmath>
#include <memory>
#include <vector>

#include "common/block_test_util.hpp"
#include "core/dtype.hpp"
#include "cpu/microkernels-inl.h"
#include "cpu/tile.hpp"
#include "gtest/gtest.h"
#include "hwy/highway.h"
#include "hwy/tests/hwy_gtest.h"

HWY_BEFORE_NAMESPACE();
namespace gridsampler::cpu {
namespace HWY_NAMESPACE {
namespace {

using gstest::Guarded;
using gstest::Params;
using gstest::Rng;
using gstest::same_bits;

constexpr int kCounts[] = {1, 3, 8, 17, 63, 64};
constexpr int64_t kPlane = 40;  // input pixels; flat index kPlane is the zero slot

template <class T>
double tolerance(double magnitude) {
  return (std::is_same_v<T, float> ? 1e-6 : 1e-14) * (magnitude + 1);
}

// Random taps over kPlane pixels, one in six invalid; strided offsets for
// planes with a stride of `stride`.
template <class T, int K>
void random_tile(Rng& rng, int count, Tile<T, K>* t, int64_t stride = 2) {
  t->count = count;
  for (int i = 0; i < count; ++i) {
    t->out_off[i] = 3 * i + 1;
    for (int k = 0; k < K; ++k) {
      const bool ok = rng.below(6) != 0;
      const int64_t q = rng.below(kPlane);
      t->valid[k][i] = ok;
      t->acc[k][i] = ok ? q : kPlane;
      t->acc32[k][i] = static_cast<int32_t>(t->acc[k][i]);
      t->in_off[k][i] = ok ? q * stride : 0;
      t->w[k][i] = ok ? static_cast<T>(rng.uniform(-1, 1)) : T(0);
      t->dw[0][k][i] = ok ? static_cast<T>(rng.uniform(-1, 1)) : T(0);
      t->dw[1][k][i] = ok ? static_cast<T>(rng.uniform(-1, 1)) : T(0);
    }
    t->mult[0][i] = static_cast<T>(rng.uniform(0, 2));
    t->mult[1][i] = static_cast<T>(rng.uniform(0, 2));
  }
}

// Bilinear-like taps over a kRows x kCols plane (kRows * kCols = kPlane):
// taps 2j + 1 are the right-hand neighbours of taps 2j, for kernels that
// read them as pairs; corners from (-1, -1) to the last pixel, so that
// pairs start before the first pixel and end past the last.
constexpr int64_t kRows = 5, kCols = 8;
static_assert(kRows * kCols == kPlane);
template <class T, int K>
void paired_tile(Rng& rng, int count, Tile<T, K>* t) {
  random_tile(rng, count, t, 1);
  t->pairs = true;
  for (int i = 0; i < count; ++i) {
    const int64_t corner = rng.below(4);  // now and then a corner case
    const int64_t y0 = corner == 0 ? -1 : corner == 1 ? kRows - 1 : static_cast<int64_t>(rng.below(kRows + 1)) - 1;
    const int64_t x0 = corner == 0 ? -1 : corner == 1 ? kCols - 1 : static_cast<int64_t>(rng.below(kCols + 1)) - 1;
    for (int k = 0; k < K; ++k) {
      const int64_t y = y0 + k / 2 % 2, x = x0 + k % 2;
      const bool ok = y >= 0 && y < kRows && x >= 0 && x < kCols;
      t->valid[k][i] = ok;
      t->acc[k][i] = ok ? y * kCols + x : kPlane;
      t->acc32[k][i] = static_cast<int32_t>(t->acc[k][i]);
      t->in_off[k][i] = ok ? t->acc[k][i] : 0;
      if (!ok) t->w[k][i] = t->dw[0][k][i] = t->dw[1][k][i] = T(0);
    }
  }
}

template <int L, class T, int K, bool kDx, bool kDgrid>
void check_lanes(Rng& rng) {
  for (int count : kCounts) {
    const std::string where = Params()("L", L)("double", std::is_same_v<T, double>)("K", K)("dx", kDx)(
                                  "dgrid", kDgrid)("count", count).str();
    auto t = std::make_unique<Tile<T, K>>();
    random_tile(rng, count, t.get());
    Guarded<T> gt(kTile * L), xin((kPlane + 1) * L), acc((kPlane + 1) * L);
    for (int e = 0; e < kTile * L; ++e) gt[e] = static_cast<T>(rng.uniform(-1, 1));
    for (int64_t e = 0; e < (kPlane + 1) * L; ++e) {
      xin[e] = e < kPlane * L ? static_cast<T>(rng.uniform(-1, 1)) : T(0);
      acc[e] = static_cast<T>(rng.uniform(-1, 1));
    }
    T sums[2][kTile];
    for (auto& row : sums) {
      for (T& v : row) v = static_cast<T>(rng.uniform(-1, 1));
    }
    // The plain loops, in double, with the magnitudes of their terms.
    std::vector<double> want_acc(acc.size()), mag_acc(acc.size());
    for (std::size_t e = 0; e < acc.size(); ++e) {
      want_acc[e] = acc[e];
      mag_acc[e] = std::abs(acc[e]);
    }
    double want_sums[2][kTile], mag_sums[2][kTile];
    for (int c = 0; c < 2; ++c) {
      for (int i = 0; i < kTile; ++i) {
        want_sums[c][i] = sums[c][i];
        mag_sums[c][i] = std::abs(sums[c][i]);
      }
    }
    for (int i = 0; i < count; ++i) {
      for (int k = 0; k < K; ++k) {
        const int64_t q = t->acc[k][i];
        for (int l = 0; l < L; ++l) {
          const double g = gt[i * L + l], x = xin[q * L + l];
          const double term = static_cast<double>(t->w[k][i]) * g;
          want_acc[q * L + l] += term;
          mag_acc[q * L + l] += std::abs(term);
          for (int c = 0; c < 2; ++c) {
            const double d = static_cast<double>(t->dw[c][k][i]) * x * g;
            want_sums[c][i] += d;
            mag_sums[c][i] += std::abs(d);
          }
        }
      }
    }
    T got_sums[2][kTile];
    std::memcpy(got_sums, sums, sizeof(sums));
    backward_lanes<L, T, K, 2, kDx, kDgrid>(*t, gt.data(), xin.data(), kDx ? acc.data() : nullptr, got_sums);
    ASSERT_TRUE(acc.guards_intact() && xin.guards_intact()) << where;
    for (std::size_t e = 0; e < acc.size(); ++e) {
      const double want = kDx ? want_acc[e] : static_cast<double>(acc[e]);
      if (e >= static_cast<std::size_t>(kPlane * L)) continue;  // the zero slot takes what invalid taps add
      ASSERT_NEAR(acc[e], want, tolerance<T>(mag_acc[e])) << where << " dx at " << e;
    }
    for (int c = 0; c < 2; ++c) {
      for (int i = 0; i < kTile; ++i) {
        const double want = kDgrid && i < count ? want_sums[c][i] : static_cast<double>(sums[c][i]);
        ASSERT_NEAR(got_sums[c][i], want, tolerance<T>(mag_sums[c][i])) << where << " sum " << c << " pixel " << i;
      }
    }
    // Forward of the same taps: ot[pixel][lane] = sum over taps of w * x.
    if constexpr (kDx && kDgrid) {
      alignas(64) T ot[kTile * L];
      forward_lanes<L>(*t, xin.data(), ot);
      for (int i = 0; i < count; ++i) {
        for (int l = 0; l < L; ++l) {
          double want = 0, mag = 0;
          for (int k = 0; k < K; ++k) {
            const double term = static_cast<double>(t->w[k][i]) * xin[t->acc[k][i] * L + l];
            want += term;
            mag += std::abs(term);
          }
          ASSERT_NEAR(ot[i * L + l], want, tolerance<T>(mag)) << where << " forward pixel " << i << " lane " << l;
        }
      }
    }
  }
}

// Planar microkernels. Strided taps read one channel plane with a stride of
// 2, NaN between the pixels: an invalid tap or a wrong offset would read it.
// Flat taps read a dense plane followed by NaN (where an invalid tap's index
// points), and write consecutive outputs.
template <bool kFlat, class S, int K, bool kDx, bool kDgrid>
void check_planar(Rng& rng, bool pairs = false) {
  using T = compute_t<S>;
  for (int count : kCounts) {
    const std::string where = Params()("dtype", static_cast<int>(dtype_of<S>()))("K", K)("flat", kFlat)(
                                  "pairs", pairs)("dx", kDx)("dgrid", kDgrid)("count", count).str();
    auto t = std::make_unique<Tile<T, K>>();
    if (pairs) {
      paired_tile(rng, count, t.get());
    } else {
      random_tile(rng, count, t.get(), kFlat ? 1 : 2);
    }
    if constexpr (kFlat) {
      t->out_dense = true;
      for (int i = 0; i < count; ++i) t->out_off[i] = 5 + i;
    }
    std::vector<S> in(2 * kPlane), grad(3 * kTile + 1);
    for (int64_t q = 0; q < 2 * kPlane; ++q) {
      const bool pixel = kFlat ? q < kPlane : q % 2 == 0;
      in[q] = store<S>(pixel ? rng.uniform(-1, 1) : std::nan(""));
    }
    for (auto& g : grad) g = store<S>(rng.uniform(-1, 1));
    Guarded<T> acc(kPlane + 1);
    for (int64_t e = 0; e <= kPlane; ++e) acc[e] = static_cast<T>(rng.uniform(-1, 1));
    std::vector<double> want_acc(kPlane + 1), mag(kPlane + 1);
    for (int64_t e = 0; e <= kPlane; ++e) {
      want_acc[e] = acc[e];
      mag[e] = std::abs(acc[e]);
    }
    T sums[2][kTile] = {};
    double want_sums[2][kTile] = {}, mag_sums[2][kTile] = {};
    for (int i = 0; i < count; ++i) {
      const double g = load(grad[t->out_off[i]]);
      for (int k = 0; k < K; ++k) {
        const double term = static_cast<double>(t->w[k][i]) * g;
        want_acc[t->acc[k][i]] += term;
        mag[t->acc[k][i]] += std::abs(term);
        const double x = t->valid[k][i] ? static_cast<double>(load(in[t->in_off[k][i]])) : 0.0;
        for (int c = 0; c < 2; ++c) {
          want_sums[c][i] += static_cast<double>(t->dw[c][k][i]) * x * g;
          mag_sums[c][i] += std::abs(static_cast<double>(t->dw[c][k][i]) * x * g);
        }
      }
    }
    // The same accumulators with their elements 3 apart (dx's own, channels
    // last), the gaps holding a sentinel.
    constexpr int64_t kStep = 3;
    Guarded<T> spread(kPlane * kStep);
    for (int64_t e = 0; e < kPlane * kStep; ++e) spread[e] = e % kStep == 0 ? acc[e / kStep] : T(-7);
    backward_channel<kFlat, S, T, K, 2, kDx, kDgrid>(*t, grad.data(), in.data(), kPlane, kDx ? acc.data() : nullptr,
                                                     1, sums);
    ASSERT_TRUE(acc.guards_intact()) << where;
    if constexpr (kDx) {
      T spread_sums[2][kTile] = {};
      backward_channel<kFlat, S, T, K, 2, kDx, kDgrid>(*t, grad.data(), in.data(), kPlane, spread.data(), kStep,
                                                       spread_sums);
      ASSERT_TRUE(spread.guards_intact()) << where;
      for (int64_t e = 0; e < kPlane * kStep; ++e) {
        ASSERT_TRUE(same_bits(spread[e], e % kStep == 0 ? acc[e / kStep] : T(-7))) << where << " step 3 at " << e;
      }
    }
    for (int64_t e = 0; e < kPlane && kDx; ++e) {
      ASSERT_NEAR(acc[e], want_acc[e], tolerance<T>(mag[e])) << where << " dx at " << e;
    }
    for (int c = 0; c < 2; ++c) {
      for (int i = 0; i < count; ++i) {
        const double want = kDgrid ? want_sums[c][i] : 0.0;
        ASSERT_NEAR(sums[c][i], want, tolerance<T>(mag_sums[c][i])) << where << " sum " << c << " pixel " << i;
      }
    }
    if constexpr (kDx && kDgrid) {
      std::vector<S> out(3 * kTile + 1, store<S>(0.0));
      forward_channel<kFlat>(*t, in.data(), kPlane, out.data());
      for (int i = 0; i < count; ++i) {
        double want = 0, m = 0;
        for (int k = 0; k < K; ++k) {
          if (!t->valid[k][i]) continue;
          const double term = static_cast<double>(t->w[k][i]) * load(in[t->in_off[k][i]]);
          want += term;
          m += std::abs(term);
        }
        // Rounded once to S: allow its half ulp on top.
        const double ulp = std::is_same_v<S, double> ? 0 : std::is_same_v<S, float> ? 0x1p-24 : 0x1p-8;
        ASSERT_NEAR(load(out[t->out_off[i]]), want, tolerance<T>(m) + ulp * (std::abs(want) + 1e-30) * 2)
            << where << " forward pixel " << i;
      }
    }
  }
}

template <int L, class T, int K>
void check_lane_outputs(Rng& rng) {
  check_lanes<L, T, K, true, true>(rng);
  check_lanes<L, T, K, true, false>(rng);
  check_lanes<L, T, K, false, true>(rng);
}

template <class S, int K>
void check_planar_outputs(Rng& rng) {
  check_planar<false, S, K, true, true>(rng);
  check_planar<false, S, K, true, false>(rng);
  check_planar<false, S, K, false, true>(rng);
  check_planar<true, S, K, true, true>(rng);
  check_planar<true, S, K, true, false>(rng);
  check_planar<true, S, K, false, true>(rng);
  if constexpr (K % 2 == 0) {
    check_planar<true, S, K, true, true>(rng, true);
    check_planar<true, S, K, false, true>(rng, true);
  }
}

template <class T>
void check_compute_type(uint64_t seed) {
  Rng rng(seed);
  check_lane_outputs<kNarrowLanes, T, 1>(rng);
  check_lane_outputs<kNarrowLanes, T, 4>(rng);
  check_lane_outputs<kNarrowLanes, T, 16>(rng);
  check_lane_outputs<kLanes, T, 1>(rng);
  check_lane_outputs<kLanes, T, 4>(rng);
  check_lane_outputs<kLanes, T, 16>(rng);
}

template <class S>
void check_planar_dtype(uint64_t seed) {
  Rng rng(seed);
  check_planar_outputs<S, 1>(rng);
  check_planar_outputs<S, 4>(rng);
  check_planar_outputs<S, 16>(rng);
}

// The planar dx scatter against the plain loop in float, exactly: taps
// whose indices rise by 1 or 2 per pixel within a vector (a downsampling's:
// AVX-512 adds those by windows), by 3 (too far apart for a window), by 1
// or 2 at random, with now and then an invalid tap or a repeated index, by
// 0, 1 or 2 at random (a smooth warp's), in runs of two (a zoom's) and of
// five, and random ones; elements no tap hits keep their values.
void check_dx_scatter(Rng& rng) {
  constexpr int64_t kWide = 700;
  for (int pattern = 0; pattern < 9; ++pattern) {
    for (int count : {1, 15, 16, 17, 31, 32, 48, 63, 64}) {
      auto t = std::make_unique<Tile<float, 4>>();
      t->count = count;
      t->out_dense = true;
      t->out_off[0] = 0;
      for (int k = 0; k < 4; ++k) {
        int64_t q = rng.below(kWide / 4);
        for (int i = 0; i < count; ++i) {
          int64_t at = q;
          switch (pattern) {
            case 0: q += 1; break;
            case 1: q += 2; break;
            case 2: q += 3; break;
            case 3: q += 1 + rng.below(2); break;
            case 4:  // mostly rising by 2, now and then invalid or repeated
              q += rng.below(8) == 0 ? 0 : 2;
              if (rng.below(10) == 0) at = kWide;
              break;
            case 5: q += rng.below(3); break;  // a smooth warp: repeats, steps of 1 and 2
            case 6: q += i % 2; break;          // a 2x zoom: runs of two
            case 7: q += i % 5 == 4 ? 1 : 0; break;  // runs of five
            default: at = rng.below(kWide + 1); break;
          }
          t->acc32[k][i] = static_cast<int32_t>(at);
          t->w[k][i] = static_cast<float>(rng.uniform(-1, 1));
        }
      }
      std::vector<float> grad(static_cast<std::size_t>(count));
      for (float& v : grad) v = static_cast<float>(rng.uniform(-2, 2));
      Guarded<float> acc(static_cast<std::size_t>(kWide));
      std::vector<float> want(static_cast<std::size_t>(kWide));
      for (int64_t e = 0; e < kWide; ++e) acc[e] = want[e] = static_cast<float>(rng.uniform(-1, 1));
      for (int k = 0; k < 4; ++k) {
        for (int i = 0; i < count; ++i) {
          const int32_t at = t->acc32[k][i];
          if (at != kWide) want[at] += t->w[k][i] * grad[i];
        }
      }
      float sums[2][kTile] = {};
      backward_channel<true, float, float, 4, 2, true, false>(*t, grad.data(), grad.data(), kWide, acc.data(), 1,
                                                              sums);
      ASSERT_TRUE(acc.guards_intact()) << "pattern " << pattern << " count " << count;
      for (int64_t e = 0; e < kWide; ++e) {
        ASSERT_TRUE(same_bits(acc[e], want[e])) << "pattern " << pattern << " count " << count << " element " << e;
      }
    }
  }
}

void TestDxScatter() {
  Rng rng(27);
  for (int round = 0; round < 20; ++round) check_dx_scatter(rng);
}

void TestLanesFloat() { check_compute_type<float>(21); }
void TestLanesDouble() { check_compute_type<double>(22); }
void TestPlanarFloat() { check_planar_dtype<float>(23); }
void TestPlanarDouble() { check_planar_dtype<double>(24); }
void TestPlanarHalf() { check_planar_dtype<Half>(25); }
void TestPlanarBFloat16() { check_planar_dtype<BFloat16>(26); }

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace gridsampler::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gridsampler::cpu {
HWY_BEFORE_TEST(Microkernels);
HWY_EXPORT_AND_TEST_P(Microkernels, TestLanesFloat);
HWY_EXPORT_AND_TEST_P(Microkernels, TestLanesDouble);
HWY_EXPORT_AND_TEST_P(Microkernels, TestPlanarFloat);
HWY_EXPORT_AND_TEST_P(Microkernels, TestPlanarDouble);
HWY_EXPORT_AND_TEST_P(Microkernels, TestPlanarHalf);
HWY_EXPORT_AND_TEST_P(Microkernels, TestPlanarBFloat16);
HWY_EXPORT_AND_TEST_P(Microkernels, TestDxScatter);
}  // namespace gridsampler::cpu
#endif
