#include "common/problem.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "reference/reference.hpp"

namespace gstest {

std::string to_string(const Dims& d) {
  std::ostringstream os;
  os << "N" << d.n << "_C" << d.c << "_in" << d.in_h << "x" << d.in_w << "_out" << d.out_h << "x"
     << d.out_w;
  return os.str();
}

std::string describe(const gridsampler::Options& o) {
  std::ostringstream os;
  os << gridsampler::to_string(o.interpolation) << "/" << gridsampler::to_string(o.padding)
     << "/align=" << o.align_corners;
  return os.str();
}

Problem Problem::random(const Dims& d, DType dtype, const gridsampler::Options& options,
                        uint64_t seed, double grid_range) {
  std::mt19937_64 rng(seed);
  Problem p;
  p.dims = d;
  p.options = options;
  p.input = Tensor(dtype, {d.n, d.c, d.in_h, d.in_w});
  p.grid = Tensor(dtype, {d.n, d.out_h, d.out_w, 2});
  p.grad = Tensor(dtype, {d.n, d.c, d.out_h, d.out_w});
  p.input.fill_uniform(rng, -1, 1);
  p.grid.fill_uniform(rng, -grid_range, grid_range);
  p.grad.fill_uniform(rng, -1, 1);
  return p;
}

Problem Problem::relayout(Layout layout) const {
  Problem p;
  p.dims = dims;
  p.options = options;
  p.input = input.relayout(layout);
  p.grid = grid.relayout(layout);
  p.grad = grad.relayout(layout);
  return p;
}

Outputs run(const Problem& p, bool reference, Layout layout, gridsampler::OutputMask mask) {
  const DType dt = p.input.dtype();
  Outputs o{Tensor(dt, p.grad.shape(), layout), Tensor(dt, p.input.shape(), layout),
            Tensor(dt, p.grid.shape(), layout)};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  o.out.fill(nan);
  o.dx.fill(nan);
  o.dgrid.fill(nan);
  auto fwd = reference ? &gridsampler::reference::grid_sampler_2d : &gridsampler::grid_sampler_2d;
  auto bwd = reference ? &gridsampler::reference::grid_sampler_2d_backward
                       : &gridsampler::grid_sampler_2d_backward;
  gridsampler::Status s = fwd(p.input.view(), p.grid.view(), o.out.mutable_view(), p.options);
  EXPECT_TRUE(s.ok()) << s.message();
  s = bwd(p.grad.view(), p.input.view(), p.grid.view(), o.dx.mutable_view(),
          o.dgrid.mutable_view(), p.options, mask);
  EXPECT_TRUE(s.ok()) << s.message();
  return o;
}

double tolerance(DType dtype, double max_ref, double k) {
  double eps = 0;
  switch (dtype) {
    case DType::kFloat16: eps = std::ldexp(1.0, -11); break;
    case DType::kBFloat16: eps = std::ldexp(1.0, -8); break;
    case DType::kFloat32: eps = std::ldexp(1.0, -24); break;
    case DType::kFloat64: eps = std::ldexp(1.0, -53); break;
  }
  return k * eps * std::max(1.0, max_ref);
}

}  // namespace gstest
