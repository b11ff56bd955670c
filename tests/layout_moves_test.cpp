// The layout moves (src/cpu/layout-inl.h) on every compiled SIMD target:
// interleaving into [pixel][lane] and back, round trips, value copies from
// every input layout, grad tiles, dx and dgrid stores; every storage dtype,
// both lane counts, every row count and lengths around the vector sizes.
// Buffers are guarded by NaN bytes so that a stray write fails the test.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "layout_moves_test.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cmath>
#include <cstring>
#include <vector>

#include "common/block_test_util.hpp"
#include "core/dtype.hpp"
#include "core/validate.hpp"
#include "cpu/layout-inl.h"
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

constexpr int64_t kLengths[] = {0, 1, 3, 4, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 255, 256, 257, 300};

// A value of S's range, sometimes NaN, infinite or a negative zero.
template <class S>
S random_value(Rng& rng) {
  switch (rng.below(20)) {
    case 0: return store<S>(std::nan(""));
    case 1: return store<S>(-std::numeric_limits<double>::infinity());
    case 2: return store<S>(-0.0);
    default: return store<S>(rng.uniform(-3, 3));
  }
}

template <int L, class S>
void check_interleave(Rng& rng) {
  using T = compute_t<S>;
  for (int64_t n : kLengths) {
    for (int rows = 1; rows <= L; ++rows) {
      const int64_t stride = n + rng.below(5);
      const std::string where = Params()("L", L)("dtype", static_cast<int>(dtype_of<S>()))("n", n)("rows", rows)(
                                    "stride", stride).str();
      Guarded<S> src(static_cast<std::size_t>(rows * stride));
      for (std::size_t i = 0; i < src.size(); ++i) src[i] = random_value<S>(rng);
      Guarded<T> wide(static_cast<std::size_t>(n * L));
      interleave_rows<L>(src.data(), stride, rows, n, wide.data());
      ASSERT_TRUE(wide.guards_intact()) << where;
      for (int64_t q = 0; q < n; ++q) {
        for (int j = 0; j < L; ++j) {
          const T want = j < rows ? load(src[j * stride + q]) : T(0);
          ASSERT_TRUE(same_bits(wide[q * L + j], want)) << where << " q=" << q << " lane=" << j;
        }
      }
      // Back out, into rows with gaps between them that must stay untouched.
      Guarded<S> back(static_cast<std::size_t>(L * stride));
      std::vector<unsigned char> before(back.size() * sizeof(S));
      if (!before.empty()) std::memcpy(before.data(), back.data(), before.size());
      deinterleave_rows<L>(wide.data(), rows, n, back.data(), stride);
      ASSERT_TRUE(back.guards_intact()) << where;
      for (int j = 0; j < L; ++j) {
        for (int64_t q = 0; q < stride; ++q) {
          const std::size_t at = static_cast<std::size_t>(j * stride + q);
          if (j < rows && q < n) {
            // The round trip: NaNs come back as NaNs (16-bit stores make them canonical).
            const S want = store<S>(wide[q * L + j]);
            ASSERT_TRUE(same_bits(back[at], want)) << where << " q=" << q << " lane=" << j;
            if (!std::isnan(static_cast<double>(load(src[j * stride + q])))) {
              ASSERT_TRUE(same_bits(back[at], src[j * stride + q])) << where << " round trip q=" << q;
            }
          } else {
            ASSERT_EQ(std::memcmp(&back[at], before.data() + at * sizeof(S), sizeof(S)), 0)
                << where << " wrote outside: q=" << q << " lane=" << j;
          }
        }
      }
    }
  }
}

template <class S>
void check_store_pairs(Rng& rng) {
  using T = compute_t<S>;
  for (int64_t count : {0, 1, 5, 8, 16, 17, 63, 64}) {
    for (bool with_factors : {false, true}) {
      std::vector<T> ax(64), bx(64), ay(64), by(64);
      for (int i = 0; i < 64; ++i) {
        ax[i] = load(random_value<S>(rng));
        bx[i] = load(random_value<S>(rng));
        ay[i] = load(random_value<S>(rng));
        by[i] = load(random_value<S>(rng));
      }
      Guarded<S> out(static_cast<std::size_t>(2 * count));
      store_pairs<S>(ax.data(), with_factors ? bx.data() : nullptr, ay.data(), with_factors ? by.data() : nullptr,
                     static_cast<int>(count), out.data());
      ASSERT_TRUE(out.guards_intact());
      for (int64_t i = 0; i < count; ++i) {
        const T x = with_factors ? T(ax[i] * bx[i]) : ax[i];
        const T y = with_factors ? T(ay[i] * by[i]) : ay[i];
        ASSERT_TRUE(same_bits(out[2 * i], store<S>(x))) << "count=" << count << " i=" << i;
        ASSERT_TRUE(same_bits(out[2 * i + 1], store<S>(y))) << "count=" << count << " i=" << i;
      }
      // Three components (volumes' dgrid).
      T a[3][kTile], b[3][kTile];
      for (int g = 0; g < 3; ++g) {
        for (int i = 0; i < kTile; ++i) {
          a[g][i] = load(random_value<S>(rng));
          b[g][i] = load(random_value<S>(rng));
        }
      }
      Guarded<S> out3(static_cast<std::size_t>(3 * count));
      store_points<3, S>(a, with_factors ? b : nullptr, static_cast<int>(count), out3.data());
      ASSERT_TRUE(out3.guards_intact());
      for (int64_t i = 0; i < count; ++i) {
        for (int g = 0; g < 3; ++g) {
          const T v = with_factors ? T(a[g][i] * b[g][i]) : a[g][i];
          ASSERT_TRUE(same_bits(out3[3 * i + g], store<S>(v))) << "3 components, count=" << count << " i=" << i;
        }
      }
    }
  }
}

// copy_values from dense planes, channels-last and transposed planes, by
// ranges of pixels; load_grad_lanes likewise at a tile's pixels; the dx and
// output-tile stores back into each layout. The second block has 1, 2, 3 or
// 5 channels, or the only block 2 or 3 (channels-last copies specialise
// those counts and a full block, and whole packed pixels).
template <int L, class S>
void check_copies(Rng& rng, int64_t c) {
  using T = compute_t<S>;
  const int64_t n_img = 2, h = 5, w = 7, plane = h * w;
  const Shape4 shape{n_img, c, h, w};
  const Shape4 layouts[] = {contiguous_strides(shape), channels_last_strides(shape),
                            Shape4{c * h * w, h * w, 1, h}};  // H and W transposed
  for (const Shape4& st : layouts) {
    Guarded<S> data(static_cast<std::size_t>(n_img * c * plane));
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = random_value<S>(rng);
    auto at = [&](int64_t n, int64_t ch, int64_t y, int64_t x) { return n * st[0] + ch * st[1] + y * st[2] + x * st[3]; };
    TensorView view{data.data(), DType::kFloat32, shape, st};
    view.dtype = dtype_of<S>();
    detail::Problem p;
    p.n = n_img;
    p.c = c;
    p.in_h = p.out_h = h;
    p.in_w = p.out_w = w;
    for (int64_t s0 : {int64_t{0}, int64_t{L}}) {
      if (s0 >= c) continue;
      const int64_t s1 = std::min(c, s0 + L);
      for (int64_t q0 : {int64_t{0}, int64_t{3}, int64_t{16}}) {
        for (int64_t q1 : {int64_t{17}, plane}) {
          const std::string where = Params()("L", L)("dtype", static_cast<int>(dtype_of<S>()))("c", c)(
                                        "strides", st[1])("s0", s0)("q0", q0)("q1", q1).str();
          Guarded<T> xb(static_cast<std::size_t>((plane + 1) * L));
          for (std::size_t i = 0; i < xb.size(); ++i) xb[i] = T(7);
          copy_values<L, S>(p, view, 1, s0, s1, xb.data(), q0, q1);
          ASSERT_TRUE(xb.guards_intact()) << where;
          for (int64_t q = 0; q <= plane; ++q) {
            for (int j = 0; j < L; ++j) {
              T want = T(7);  // untouched outside [q0, q1)
              if (q == plane && q1 == plane) want = T(0);
              if (q >= q0 && q < q1) want = j < s1 - s0 ? load(data[at(1, s0 + j, q / w, q % w)]) : T(0);
              ASSERT_TRUE(same_bits(xb[q * L + j], want)) << where << " q=" << q << " lane=" << j;
            }
          }
          // A grad tile of the same pixels (grad shaped like this input).
          const int count = static_cast<int>(q1 - q0);
          std::vector<int64_t> out_off(kTile);
          for (int i = 0; i < count; ++i) out_off[i] = (q0 + i) / w * st[2] + (q0 + i) % w * st[3];
          Guarded<T> gt(static_cast<std::size_t>(kTile * L));
          load_grad_lanes<L, S>(view, w, 1, s0, s1, out_off.data(), count, q0, gt.data());
          ASSERT_TRUE(gt.guards_intact()) << where;
          for (int i = 0; i < count; ++i) {
            for (int j = 0; j < L; ++j) {
              const T want = j < s1 - s0 ? load(data[at(1, s0 + j, (q0 + i) / w, (q0 + i) % w)]) : T(0);
              ASSERT_TRUE(same_bits(gt[i * L + j], want)) << where << " grad i=" << i << " lane=" << j;
            }
          }
          // dx from interleaved accumulators (the copy itself) and from planes.
          Guarded<S> dx(data.size());
          std::vector<unsigned char> before(dx.size() * sizeof(S));
          std::memcpy(before.data(), dx.data(), before.size());
          MutableTensorView dv{dx.data(), dtype_of<S>(), shape, st};
          store_lanes<L, S>(dv, w, plane + 1, 1, s0, s1, xb.data() + q0 * L, q0, q1);
          std::vector<T> planes(static_cast<std::size_t>((s1 - s0) * (plane + 1)));
          for (std::size_t i = 0; i < planes.size(); ++i) planes[i] = load(random_value<S>(rng));
          Guarded<S> dx2(data.size());
          std::memcpy(dx2.data(), before.data(), before.size());
          MutableTensorView dv2{dx2.data(), dtype_of<S>(), shape, st};
          store_planes<S>(dv2, w, plane + 1, 1, s0, s1, planes.data() + q0, 1, q0, q1);
          // An output tile of the pixels [q0, q1), from the copy's lanes.
          Guarded<S> out(data.size());
          std::memcpy(out.data(), before.data(), before.size());
          store_tile_lanes<L>(xb.data() + q0 * L, static_cast<int>(s1 - s0), count, out_off.data(), q0,
                              out.data() + st[0] + s0 * st[1], st, w);
          ASSERT_TRUE(dx.guards_intact() && dx2.guards_intact() && out.guards_intact()) << where;
          for (int64_t ch = 0; ch < c; ++ch) {
            for (int64_t q = 0; q < plane; ++q) {
              const int64_t e = at(1, ch, q / w, q % w);
              const bool inside = ch >= s0 && ch < s1 && q >= q0 && q < q1;
              const S* old = reinterpret_cast<const S*>(before.data());
              const S want = inside ? store<S>(xb[q * L + (ch - s0)]) : old[e];
              const S want2 = inside ? store<S>(planes[(ch - s0) * (plane + 1) + q]) : old[e];
              ASSERT_TRUE(same_bits(dx[e], want)) << where << " dx lanes c=" << ch << " q=" << q;
              ASSERT_TRUE(same_bits(dx2[e], want2)) << where << " dx planes c=" << ch << " q=" << q;
              ASSERT_TRUE(same_bits(out[e], want)) << where << " tile c=" << ch << " q=" << q;
            }
          }
        }
      }
    }
  }
}

template <int L, class S>
void check_copies(Rng& rng) {
  for (int64_t extra : {1, 2, 3, 5}) check_copies<L, S>(rng, L + extra);
  // Whole pixels of two or three channels (channels-last: packed pixels).
  for (int64_t c : {2, 3}) check_copies<L, S>(rng, c);
}

// widen_halves on every float16 bit pattern (NaN payloads included) and
// narrow_to_halves on floats around every binade of float16, its
// subnormals, the overflow threshold, infinities and NaNs of both signs,
// against the scalar conversions; every length around the vector sizes,
// with guards after the runs.
void check_half_runs(Rng& rng) {
  std::vector<Half> every(1 << 16);
  for (std::size_t b = 0; b < every.size(); ++b) every[b] = Half{static_cast<uint16_t>(b)};
  std::vector<float> wide(every.size());
  widen_halves(every.data(), static_cast<int64_t>(every.size()), wide.data());
  for (std::size_t b = 0; b < every.size(); ++b) {
    ASSERT_TRUE(same_bits(wide[b], load(every[b]))) << "half bits " << b;
  }
  auto random_float = [&rng]() {
    uint32_t u;
    switch (rng.below(8)) {
      case 0: {  // any bits: NaN payloads, infinities, huge and tiny values
        u = static_cast<uint32_t>(rng.next());
        break;
      }
      case 1: {  // near float16's overflow threshold 65520
        const float v = 65520.0f + static_cast<float>(rng.uniform(-32, 32));
        std::memcpy(&u, &v, sizeof u);
        break;
      }
      default: {  // float16's range, subnormals included: exponents 2^-26 .. 2^16
        const float v = std::ldexp(static_cast<float>(rng.uniform(1, 2)), static_cast<int>(rng.below(43)) - 26);
        std::memcpy(&u, &v, sizeof u);
        u |= static_cast<uint32_t>(rng.below(2)) << 31;
        u ^= static_cast<uint32_t>(rng.below(2));  // an odd last bit: ties are rarer than halfway cases
        break;
      }
    }
    float v;
    std::memcpy(&v, &u, sizeof v);
    return v;
  };
  for (int64_t n : kLengths) {
    for (int round = 0; round < 20; ++round) {
      std::vector<float> from(static_cast<std::size_t>(n));
      for (float& v : from) v = random_float();
      Guarded<Half> narrow(static_cast<std::size_t>(n));
      narrow_to_halves(from.data(), n, narrow.data());
      ASSERT_TRUE(narrow.guards_intact()) << "n=" << n;
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_TRUE(same_bits(narrow[i], store<Half>(from[i]))) << "n=" << n << " i=" << i << " value " << from[i];
      }
      Guarded<float> back(static_cast<std::size_t>(n));
      widen_halves(narrow.data(), n, back.data());
      ASSERT_TRUE(back.guards_intact()) << "n=" << n;
      for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(same_bits(back[i], load(narrow[i]))) << "n=" << n << " i=" << i;
    }
  }
}

template <class S>
void check_dtype(uint64_t seed) {
  Rng rng(seed);
  check_interleave<kNarrowLanes, S>(rng);
  check_interleave<kLanes, S>(rng);
  check_store_pairs<S>(rng);
  check_copies<kNarrowLanes, S>(rng);
  check_copies<kLanes, S>(rng);
}

void TestLayoutFloat() { check_dtype<float>(11); }
void TestLayoutDouble() { check_dtype<double>(12); }
void TestLayoutHalf() {
  check_dtype<Half>(13);
  Rng rng(15);
  check_half_runs(rng);
}
void TestLayoutBFloat16() { check_dtype<BFloat16>(14); }

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace gridsampler::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gridsampler::cpu {
HWY_BEFORE_TEST(LayoutMoves);
HWY_EXPORT_AND_TEST_P(LayoutMoves, TestLayoutFloat);
HWY_EXPORT_AND_TEST_P(LayoutMoves, TestLayoutDouble);
HWY_EXPORT_AND_TEST_P(LayoutMoves, TestLayoutHalf);
HWY_EXPORT_AND_TEST_P(LayoutMoves, TestLayoutBFloat16);
}  // namespace gridsampler::cpu
#endif
