// `gridsampler bench`: times forward or backward on random data, or on the
// input, grid and grad given as tensors (read from .npy files by the CLI), and
// prints one JSON line (median_ms, min_ms, threads, gbps, peak_extra_mib, ...).
#pragma once

#include <array>
#include <cstdint>
#include <ostream>
#include <string>

#include "gridsampler/gridsampler.hpp"

namespace gridsampler::host {
class Tensor;
}  // namespace gridsampler::host

namespace gridsampler::bench {

struct BenchOptions {
  std::array<int64_t, 6> shape{8, 64, 64, 64, 64, 64};  // N, C, Hin, Win, Hout, Wout
  bool backward = true;
  Options options;             // mode, padding, align_corners, num_threads (0 = all)
  DType dtype = DType::kFloat32;
  bool channels_last = false;  // input, grad, output and dx in NHWC memory
  int reps = 20;
  uint64_t seed = 1;
  // Data to time instead of random values (any dtype, NCHW-ordered; not
  // owned): each must have the shape `shape` gives it, and is copied into the
  // timed tensor with one rounding to `dtype` and in `channels_last` layout.
  // So a benchmark can time a workload's real grid (an affine warp, a
  // correlation window, ...), whose memory access pattern decides the speed.
  const host::Tensor* input = nullptr;
  const host::Tensor* grid = nullptr;
  const host::Tensor* grad = nullptr;  // backward only
};

// Runs the benchmark; on error returns a non-ok status and prints nothing.
Status run_bench(const BenchOptions& options, std::ostream& out);

}  // namespace gridsampler::bench
