// A random forward/backward problem in any dtype and layout, and runners for
// the public API and the reference.
#pragma once

#include <string>

#include "common/tensor.hpp"
#include "gridsampler/gridsampler.hpp"

namespace gstest {

struct Dims {
  int64_t n, c, in_h, in_w, out_h, out_w;
};
std::string to_string(const Dims& d);

struct Problem {
  Dims dims{};
  gridsampler::Options options;
  Tensor input, grid, grad;

  // Random data: input and grad uniform in [-1, 1], grid uniform in
  // [-grid_range, grid_range].
  static Problem random(const Dims& dims, DType dtype, const gridsampler::Options& options,
                        uint64_t seed, double grid_range = 1.1);
  Problem relayout(Layout layout) const;  // inputs in another layout
};

struct Outputs {
  Tensor out, dx, dgrid;
};

// Runs forward and backward through the public API (reference=false) or the
// reference, with outputs of `layout` pre-filled with NaN. Fails the current
// test on a non-ok status.
Outputs run(const Problem& p, bool reference, Layout layout = Layout::kContiguous,
            gridsampler::OutputMask mask = {});

std::string describe(const gridsampler::Options& o);

// Tolerance for comparing a result in `dtype` with a float64 reference:
// k * eps(dtype) * max(1, max |reference|).
double tolerance(DType dtype, double max_ref, double k);

}  // namespace gstest
