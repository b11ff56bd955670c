#include "bench.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "core/dtype.hpp"

namespace gridsampler::bench {
namespace {

// A dense buffer of `count` elements of one dtype, 64-byte aligned.
struct Buffer {
  std::unique_ptr<unsigned char, decltype(&std::free)> data{nullptr, &std::free};
  int64_t count = 0;
};

Status allocate(DType dtype, int64_t count, Buffer* b) {
  const std::size_t bytes = std::max<std::size_t>(static_cast<std::size_t>(count) * dtype_size(dtype), 64);
  b->data.reset(static_cast<unsigned char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
  b->count = count;
  if (!b->data) return {StatusCode::kInternal, "bench: cannot allocate " + std::to_string(bytes) + " bytes"};
  return Status::Ok();
}

void fill_uniform(DType dtype, Buffer* b, double lo, double hi, std::mt19937_64* rng) {
  std::uniform_real_distribution<double> dist(lo, hi);
  visit_dtype(dtype, [&](auto tag) {
    using S = decltype(tag);
    S* p = reinterpret_cast<S*>(b->data.get());
    for (int64_t i = 0; i < b->count; ++i) p[i] = store<S>(dist(*rng));
  });
}

}  // namespace

Status run_bench(const BenchOptions& o, std::ostream& out) {
  const auto [n, c, in_h, in_w, out_h, out_w] = o.shape;
  for (int64_t d : o.shape) {
    if (d < 0) return {StatusCode::kInvalidArgument, "--shape: dimensions must be >= 0"};
  }
  if (o.reps < 1) return {StatusCode::kInvalidArgument, "--reps: must be at least 1"};
  const Shape4 in_shape{n, c, in_h, in_w}, grid_shape{n, out_h, out_w, 2}, out_shape{n, c, out_h, out_w};
  auto strides = [&](const Shape4& s) { return o.channels_last ? channels_last_strides(s) : contiguous_strides(s); };
  Buffer input, grid, grad, out_or_dx, dgrid;
  const int64_t in_count = n * c * in_h * in_w, grid_count = n * out_h * out_w * 2, out_count = n * c * out_h * out_w;
  for (auto [buf, count] : {std::pair{&input, in_count}, std::pair{&grid, grid_count},
                            std::pair{&grad, o.backward ? out_count : 0},
                            std::pair{&out_or_dx, o.backward ? in_count : out_count},
                            std::pair{&dgrid, o.backward ? grid_count : 0}}) {
    if (Status s = allocate(o.dtype, count, buf); !s.ok()) return s;
  }
  std::mt19937_64 rng(o.seed);
  fill_uniform(o.dtype, &input, -1, 1, &rng);
  fill_uniform(o.dtype, &grid, -1.1, 1.1, &rng);
  fill_uniform(o.dtype, &grad, -1, 1, &rng);
  const TensorView in_v{input.data.get(), o.dtype, in_shape, strides(in_shape)};
  const TensorView grid_v{grid.data.get(), o.dtype, grid_shape, contiguous_strides(grid_shape)};
  const TensorView grad_v{grad.data.get(), o.dtype, out_shape, strides(out_shape)};
  auto call = [&]() -> Status {
    if (o.backward) {
      return grid_sampler_2d_backward(
          grad_v, in_v, grid_v, {out_or_dx.data.get(), o.dtype, in_shape, strides(in_shape)},
          {dgrid.data.get(), o.dtype, grid_shape, contiguous_strides(grid_shape)}, o.options);
    }
    return grid_sampler_2d(in_v, grid_v, {out_or_dx.data.get(), o.dtype, out_shape, strides(out_shape)},
                           o.options);
  };
  if (Status s = call(); !s.ok()) return s;  // warm-up, and validation
  std::vector<double> ms;
  for (int r = 0; r < o.reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    (void)call();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
  const double bytes = static_cast<double>(dtype_size(o.dtype)) *
                       (o.backward ? static_cast<double>(out_count + 2 * in_count + 2 * grid_count)
                                   : static_cast<double>(in_count + grid_count + out_count));
  const int threads = o.options.num_threads > 0 ? o.options.num_threads : omp_get_max_threads();
  out << "{\"op\": \"" << (o.backward ? "backward" : "forward") << "\", \"shape\": [" << n << ", " << c << ", "
      << in_h << ", " << in_w << ", " << out_h << ", " << out_w << "], \"mode\": \""
      << to_string(o.options.interpolation) << "\", \"padding\": \"" << to_string(o.options.padding)
      << "\", \"align_corners\": " << (o.options.align_corners ? "true" : "false") << ", \"dtype\": \""
      << to_string(o.dtype) << "\", \"layout\": \"" << (o.channels_last ? "nhwc" : "nchw")
      << "\", \"threads\": " << threads << ", \"reps\": " << o.reps << ", \"median_ms\": " << median
      << ", \"min_ms\": " << ms.front() << ", \"gbps\": " << bytes / (median * 1e6) << "}" << std::endl;
  return Status::Ok();
}

}  // namespace gridsampler::bench
