// float16 and bfloat16 against the float64 reference run on the same
// 16-bit-rounded inputs (PyTorch 1.13 has no CPU 16-bit grid sampler to
// compare with). Computed in float32 and rounded once, a 16-bit result is
// within a few units of its dtype's rounding of the exact value.
#include <gtest/gtest.h>

#include "common/problem.hpp"

namespace gstest {
namespace {

using gridsampler::Interpolation;
using gridsampler::Options;
using gridsampler::Padding;

TEST(LowPrecision, MatchesFloat64ReferenceOnRoundedInputs) {
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    for (Interpolation mode :
         {Interpolation::kBilinear, Interpolation::kNearest, Interpolation::kBicubic}) {
      for (Padding pad : {Padding::kZeros, Padding::kBorder, Padding::kReflection}) {
        for (bool align : {false, true}) {
          const Options opt{mode, pad, align};
          const Problem p16 = Problem::random({2, 8, 9, 10, 6, 7}, dt, opt, 17, 1.2);
          // The same (already rounded) values, widened exactly to float64.
          Problem p64;
          p64.dims = p16.dims;
          p64.options = opt;
          p64.input = Tensor(DType::kFloat64, p16.input.shape());
          p64.grid = Tensor(DType::kFloat64, p16.grid.shape());
          p64.grad = Tensor(DType::kFloat64, p16.grad.shape());
          auto widen = [](const Tensor& from, Tensor* to) {
            const auto v = from.values();
            const auto s = from.shape();
            size_t i = 0;
            for (int64_t a = 0; a < s[0]; ++a)
              for (int64_t b = 0; b < s[1]; ++b)
                for (int64_t c = 0; c < s[2]; ++c)
                  for (int64_t d = 0; d < s[3]; ++d) to->set(a, b, c, d, v[i++]);
          };
          widen(p16.input, &p64.input);
          widen(p16.grid, &p64.grid);
          widen(p16.grad, &p64.grad);
          const Outputs got = run(p16, /*reference=*/false);
          const Outputs want = run(p64, /*reference=*/true);
          const std::string what = describe(opt) + " " + std::string(gridsampler::to_string(dt));
          for (auto [g, w, name] : {std::tuple{&got.out, &want.out, "forward"},
                                    std::tuple{&got.dx, &want.dx, "dx"},
                                    std::tuple{&got.dgrid, &want.dgrid, "dgrid"}}) {
            const Diff d = compare(g->values(), w->values());
            EXPECT_LE(d.max_abs, tolerance(dt, d.max_ref, 4.0))
                << what << " " << name << ": worst index " << d.index << " of max |ref| "
                << d.max_ref;
          }
        }
      }
    }
  }
}

// A float16 NaN leaves the kernels as the canonical quiet NaN (0x7e00, sign
// kept), whatever its payload was and whichever conversion path (vector or
// scalar, full or partial channel block) wrote it.
TEST(LowPrecision, Float16NanOutputsAreCanonical) {
  const uint16_t payloads[] = {0x7d01, 0xfe37, 0x7c01, 0xffff};
  Problem p = Problem::random({1, 20, 5, 6, 4, 9}, DType::kFloat16,
                              {Interpolation::kNearest, Padding::kZeros, false}, 3, 0.9);
  auto fill_nans = [&](Tensor* t) {
    auto* bits = static_cast<uint16_t*>(t->mutable_view().data);
    for (int64_t i = 0; i < t->numel(); ++i) bits[i] = payloads[i % 4];
  };
  fill_nans(&p.input);
  fill_nans(&p.grad);
  const Outputs got = run(p, /*reference=*/false);
  auto check = [](const Tensor& t, const char* what, bool all_nan) {
    const auto* bits = reinterpret_cast<const uint16_t*>(t.storage().data());
    int nans = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      const uint16_t b = bits[i];
      if ((b & 0x7fffu) == 0) continue;  // a zero: dx where no tap landed
      EXPECT_EQ(b & 0x7fffu, 0x7e00u) << what << " element " << i << " bits " << std::hex << b;
      ++nans;
    }
    if (all_nan) {
      EXPECT_EQ(nans, t.numel()) << what;
    }
    EXPECT_GT(nans, 0) << what;
  };
  check(got.out, "forward", true);
  check(got.dx, "dx", false);
}

}  // namespace
}  // namespace gstest
