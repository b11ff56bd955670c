// `gridsampler bench`: times forward or backward of images (Rank 4) or
// volumes (Rank 5) on random data, or on the input, grid and grad given as
// tensors (read from .npy files by the CLI), and prints one JSON line
// (median_ms, min_ms, threads, gbps, peak_extra_mib, ...).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

#include "gridsampler/gridsampler.hpp"
#include "rank_calls.hpp"

namespace gridsampler::bench {

template <std::size_t Rank>
struct BenchOptions {
  static_assert(Rank == 4 || Rank == 5, "images or volumes");
  // Images: N, C, Hin, Win, Hout, Wout; volumes: N, C, Din, Hin, Win, Dout,
  // Hout, Wout.
  using Shape = std::array<int64_t, 2 * Rank - 2>;
  Shape shape{};
  bool backward = true;
  Options options;             // mode, padding, align_corners, num_threads (0 = all)
  DType dtype = DType::kFloat32;
  bool channels_last = false;  // input, grad, output and dx in NHWC (NDHWC) memory
  int reps = 20;
  uint64_t seed = 1;
  // Data to time instead of random values (any dtype, C order; not owned):
  // each must have the shape `shape` gives it, and is copied into the timed
  // tensor with one rounding to `dtype` and in `channels_last` layout. So a
  // benchmark can time a workload's real grid (an affine warp, a
  // registration's displacement field, ...), whose memory access pattern
  // decides the speed.
  const tool::HostTensor<Rank>* input = nullptr;
  const tool::HostTensor<Rank>* grid = nullptr;
  const tool::HostTensor<Rank>* grad = nullptr;  // backward only
};

// Runs the benchmark; on error returns a non-ok status and prints nothing.
template <std::size_t Rank>
Status run_bench(const BenchOptions<Rank>& options, std::ostream& out);

extern template Status run_bench<4>(const BenchOptions<4>&, std::ostream&);
extern template Status run_bench<5>(const BenchOptions<5>&, std::ostream&);

}  // namespace gridsampler::bench
