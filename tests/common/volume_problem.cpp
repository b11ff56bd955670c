#include "common/volume_problem.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <sstream>

namespace gstest {

std::string to_string(const VolDims& d) {
  std::ostringstream os;
  os << "N" << d.n << "_C" << d.c << "_in" << d.in_d << "x" << d.in_h << "x" << d.in_w << "_out" << d.out_d << "x"
     << d.out_h << "x" << d.out_w;
  return os.str();
}

VolProblem VolProblem::random(const VolDims& d, gridsampler::DType dtype, const gridsampler::Options& options,
                              uint64_t seed, double grid_range) {
  std::mt19937_64 rng(seed);
  VolProblem p;
  p.dims = d;
  p.options = options;
  p.input = VolTensor(dtype, {d.n, d.c, d.in_d, d.in_h, d.in_w});
  p.grid = VolTensor(dtype, {d.n, d.out_d, d.out_h, d.out_w, 3});
  p.grad = VolTensor(dtype, {d.n, d.c, d.out_d, d.out_h, d.out_w});
  p.input.fill_uniform(rng, -1, 1);
  p.grid.fill_uniform(rng, -grid_range, grid_range);
  p.grad.fill_uniform(rng, -1, 1);
  return p;
}

VolProblem VolProblem::relayout(VolLayout layout) const {
  VolProblem p = *this;
  p.input = input.relayout(layout);
  p.grid = grid.relayout(layout);
  p.grad = grad.relayout(layout);
  return p;
}

VolOutputs run_volume(const VolProblem& p, VolLayout layout, gridsampler::OutputMask mask, ForwardFn3d fwd,
                      BackwardFn3d bwd) {
  const gridsampler::DType dt = p.input.dtype();
  VolOutputs o{VolTensor(dt, p.grad.shape(), layout), VolTensor(dt, p.input.shape(), layout),
               VolTensor(dt, p.grid.shape(), layout)};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  o.out.fill(nan);
  o.dx.fill(nan);
  o.dgrid.fill(nan);
  gridsampler::Status s = fwd(p.input.view(), p.grid.view(), o.out.mutable_view(), p.options);
  EXPECT_TRUE(s.ok()) << s.message();
  s = bwd(p.grad.view(), p.input.view(), p.grid.view(), o.dx.mutable_view(), o.dgrid.mutable_view(), p.options,
          mask);
  EXPECT_TRUE(s.ok()) << s.message();
  return o;
}

}  // namespace gstest
