#include "bench.hpp"

#include <sys/resource.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <array>
#include <cstddef>
#include <chrono>
#include <cstdio>
#include <exception>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/threads.hpp"
#include "host/tensor.hpp"

namespace gridsampler::bench {
namespace {

template <std::size_t Rank>
using Tensor = tool::HostTensor<Rank>;
template <std::size_t Rank>
using ShapeR = std::array<int64_t, Rank>;

// A zero-filled tensor of `shape` and `strides`, or the allocation's error.
template <std::size_t Rank>
Status allocate(DType dtype, const ShapeR<Rank>& shape, const ShapeR<Rank>& strides, Tensor<Rank>* t) {
  try {
    *t = Tensor<Rank>(dtype, shape, strides);
  } catch (const std::exception&) {  // std::bad_alloc, or a size beyond size_t
    uint64_t bytes = dtype_size(dtype);
    for (int64_t d : shape) {
      if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) {
        return {StatusCode::kInternal, "bench: cannot allocate more than 2^64 bytes"};
      }
    }
    return {StatusCode::kInternal, "bench: cannot allocate " + std::to_string(bytes) + " bytes"};
  }
  return Status::Ok();
}

// Sets every element, in memory order, uniform in [lo, hi].
template <class T>
void fill_uniform(T* t, double lo, double hi, std::mt19937_64* rng) {
  std::uniform_real_distribution<double> dist(lo, hi);
  t->fill_storage([&] { return dist(*rng); });
}

// "(N, C, H, W)". Built by appending: GCC 12 warns (-Wrestrict, falsely) on
// "(" + std::string.
template <std::size_t Rank>
std::string shape_string(const ShapeR<Rank>& s) {
  std::string out = "(";
  for (std::size_t i = 0; i < s.size(); ++i) out.append(i ? ", " : "").append(std::to_string(s[i]));
  return out.append(")");
}

// Copies `from` (if given) into `to`, whose shape the bench's shape decides.
template <class T>
Status copy_given(const char* name, const T* from, T* to) {
  if (from == nullptr) return Status::Ok();
  if (from->shape() != to->shape()) {
    return {StatusCode::kInvalidArgument, std::string(name) + ": shape " + shape_string(from->shape()) +
                                              " does not match the bench shape, which needs " +
                                              shape_string(to->shape())};
  }
  to->assign_from(*from);
  return Status::Ok();
}

// The process's peak resident memory so far, in KiB. With `reset`, free
// heap memory is first returned to the system (glibc) and the peak lowered
// to the current resident size (Linux: /proc/self/clear_refs), so that
// neither a transient peak of the set-up nor memory it freed can hide the
// calls' own.
//
// Linux: VmHWM from /proc/self/status, the peak that clear_refs lowers.
// getrusage's ru_maxrss is at least that and also the peak of the memory the
// process replaced at exec, which for a child that Python starts (vfork,
// then exec) is the Python parent's own peak: a bench run from a script
// holding large arrays would report no extra memory at all.
double peak_rss_kib(bool reset) {
#if defined(__GLIBC__)
  // Freed heap memory the allocator still holds would hide as much of the
  // calls' new memory: hand it back first.
  if (reset) malloc_trim(0);
#endif
#if defined(__linux__)
  if (reset) {
    if (std::FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
      std::fputs("5", f);
      std::fclose(f);
    }
  }
  if (std::FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    double kib = -1;
    while (std::fgets(line, sizeof line, f) != nullptr) {
      if (std::sscanf(line, "VmHWM: %lf kB", &kib) == 1) break;
    }
    std::fclose(f);
    if (kib >= 0) return kib;
  }
#else
  (void)reset;
#endif
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss);
}

}  // namespace

template <std::size_t Rank>
Status run_bench(const BenchOptions<Rank>& o, std::ostream& out) {
  constexpr std::size_t kAxes = Rank - 2;  // spatial axes: (D,) H, W
  for (int64_t d : o.shape) {
    if (d < 0) return {StatusCode::kInvalidArgument, "--shape: dimensions must be >= 0"};
  }
  if (o.reps < 1) return {StatusCode::kInvalidArgument, "--reps: must be at least 1"};
  // input (N, C, in...), grid (N, out..., kAxes), output (N, C, out...).
  ShapeR<Rank> in_shape{}, grid_shape{}, out_shape{};
  in_shape[0] = grid_shape[0] = out_shape[0] = o.shape[0];
  in_shape[1] = out_shape[1] = o.shape[1];
  for (std::size_t i = 0; i < kAxes; ++i) {
    in_shape[2 + i] = o.shape[2 + i];
    out_shape[2 + i] = grid_shape[1 + i] = o.shape[2 + kAxes + i];
  }
  grid_shape[Rank - 1] = static_cast<int64_t>(kAxes);
  auto strides = [&](const ShapeR<Rank>& s) { return o.channels_last ? tool::channels_last(s) : tool::contiguous(s); };
  auto count = [](const ShapeR<Rank>& s) {  // saturating: a shape too large fails to allocate below
    int64_t n = 1;
    for (int64_t d : s) {
      if (__builtin_mul_overflow(n, d, &n)) return std::numeric_limits<int64_t>::max();
    }
    return n;
  };
  const int64_t in_count = count(in_shape), grid_count = count(grid_shape), out_count = count(out_shape);
  Tensor<Rank> input, grid, grad, out_or_dx, dgrid;
  if (Status s = allocate(o.dtype, in_shape, strides(in_shape), &input); !s.ok()) return s;
  if (Status s = allocate(o.dtype, grid_shape, tool::contiguous(grid_shape), &grid); !s.ok()) return s;
  if (o.backward) {
    if (Status s = allocate(o.dtype, out_shape, strides(out_shape), &grad); !s.ok()) return s;
  }
  // Random values for what no file gives (drawn in the same order as without
  // files, so the default data stays what it was).
  std::mt19937_64 rng(o.seed);
  if (o.input == nullptr) fill_uniform(&input, -1, 1, &rng);
  if (o.grid == nullptr) fill_uniform(&grid, -1.1, 1.1, &rng);
  if (o.grad == nullptr) fill_uniform(&grad, -1, 1, &rng);
  if (o.grad != nullptr && !o.backward) return {StatusCode::kInvalidArgument, "grad: only the backward takes one"};
  for (auto [name, from, to] : {std::tuple{"input", o.input, &input}, std::tuple{"grid", o.grid, &grid},
                                std::tuple{"grad", o.grad, &grad}}) {
    if (Status s = copy_given(name, from, to); !s.ok()) return s;
  }
  // The memory baseline: the inputs exist, the outputs do not yet, so that
  // the outputs count as the calls' memory, as they do for an operator that
  // allocates its results (PyTorch's).
  const double base_kib = peak_rss_kib(/*reset=*/true);
  const ShapeR<Rank> out_or_dx_shape = o.backward ? in_shape : out_shape;
  if (Status s = allocate(o.dtype, out_or_dx_shape, strides(out_or_dx_shape), &out_or_dx); !s.ok()) return s;
  if (o.backward) {
    if (Status s = allocate(o.dtype, grid_shape, tool::contiguous(grid_shape), &dgrid); !s.ok()) return s;
  }
  auto call = [&]() -> Status {
    if (o.backward) {
      return tool::sample_backward(grad.view(), input.view(), grid.view(), out_or_dx.mutable_view(),
                                   dgrid.mutable_view(), o.options, {});
    }
    return tool::sample(input.view(), grid.view(), out_or_dx.mutable_view(), o.options);
  };
  if (Status s = call(); !s.ok()) return s;  // warm-up, and validation
  std::vector<double> ms;
  for (int r = 0; r < o.reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    (void)call();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  const double peak_extra_mib = (peak_rss_kib(false) - base_kib) / 1024;
  std::sort(ms.begin(), ms.end());
  const double median = ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
  const double bytes = static_cast<double>(dtype_size(o.dtype)) *
                       (o.backward ? static_cast<double>(out_count + 2 * in_count + 2 * grid_count)
                                   : static_cast<double>(in_count + grid_count + out_count));
  // The threads the calls asked for (a plan runs no more than its tasks).
  const int threads = detail::call_threads(o.options.num_threads);
  std::string shape;
  for (std::size_t i = 0; i < o.shape.size(); ++i) shape.append(i ? ", " : "").append(std::to_string(o.shape[i]));
  const char* layout = Rank == 4 ? (o.channels_last ? "nhwc" : "nchw") : (o.channels_last ? "ndhwc" : "ncdhw");
  out << "{\"op\": \"" << (o.backward ? "backward" : "forward") << "\", \"shape\": [" << shape << "], \"mode\": \""
      << to_string(o.options.interpolation) << "\", \"padding\": \"" << to_string(o.options.padding)
      << "\", \"align_corners\": " << (o.options.align_corners ? "true" : "false") << ", \"dtype\": \""
      << to_string(o.dtype) << "\", \"layout\": \"" << layout << "\", \"threads\": " << threads
      << ", \"reps\": " << o.reps << ", \"median_ms\": " << median << ", \"min_ms\": " << ms.front()
      << ", \"gbps\": " << bytes / (median * 1e6) << ", \"peak_extra_mib\": " << peak_extra_mib << "}" << std::endl;
  return Status::Ok();
}

template Status run_bench<4>(const BenchOptions<4>&, std::ostream&);
template Status run_bench<5>(const BenchOptions<5>&, std::ostream&);

}  // namespace gridsampler::bench
