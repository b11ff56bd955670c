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

}  // namespace
}  // namespace gstest
