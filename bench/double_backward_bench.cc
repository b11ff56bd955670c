// Google Benchmark: the double backward (grid_sampler_2d_double_backward) on
// the calls that second-order training steps make
// (python/benchmarks/second_order_step.py) and on a few shapes around them.
// Float32, uniformly random grids, random incoming gradients.
//   build/bench/double_backward_bench [--benchmark_filter=...] [--benchmark_repetitions=5]
// The argument is the thread count.
#include <benchmark/benchmark.h>

#include <random>
#include <string>

#include "gridsampler/gridsampler.hpp"
#include "host/tensor.hpp"

namespace {

namespace gs = gridsampler;

struct Case {
  const char* name;
  int64_t n, c, in_h, in_w, out_h, out_w;
  gs::Interpolation mode;
  gs::Padding padding;
  bool align;
  double range;     // grid values in [-range, range]
  bool gg_dx;       // gg_dx given (gg_dgrid always is)
  bool want_grad;   // d_grad wanted
};

// eikonal: its call in the eikonal step (planes 3,32,128,128, 65,536
// points, a loss on dgrid only, grad a fixed head); bicubic_grid_penalty:
// the bicubic grid-penalty step's call; the others take both incoming
// gradients and every output.
const Case kCases[] = {
    {"eikonal", 3, 32, 128, 128, 1, 65536, gs::Interpolation::kBilinear, gs::Padding::kBorder, true, 1.0, false, false},
    {"bicubic_grid_penalty", 4, 16, 64, 64, 64, 64, gs::Interpolation::kBicubic, gs::Padding::kZeros, false, 1.1,
     false, false},
    {"bicubic_32ch", 4, 32, 64, 64, 64, 64, gs::Interpolation::kBicubic, gs::Padding::kZeros, false, 1.1, false, false},
    {"bilinear_8ch_both", 8, 8, 64, 64, 64, 64, gs::Interpolation::kBilinear, gs::Padding::kReflection, false, 1.1,
     true, true},
    {"bicubic_3ch_both", 8, 3, 64, 64, 64, 64, gs::Interpolation::kBicubic, gs::Padding::kBorder, true, 1.1, true,
     true},
};

void run_case(benchmark::State& state, const Case& k) {
  const gs::DType dt = gs::DType::kFloat32;
  const gs::Shape4 in_shape{k.n, k.c, k.in_h, k.in_w}, grid_shape{k.n, k.out_h, k.out_w, 2},
      out_shape{k.n, k.c, k.out_h, k.out_w};
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> unit(-1, 1), wide(-k.range, k.range);
  gs::host::Tensor input(dt, in_shape), grid(dt, grid_shape), grad(dt, out_shape), gg_dx(dt, in_shape),
      gg_dgrid(dt, grid_shape), d_grad(dt, out_shape), d_input(dt, in_shape), d_grid(dt, grid_shape);
  input.fill_storage([&] { return unit(rng); });
  grid.fill_storage([&] { return wide(rng); });
  grad.fill_storage([&] { return unit(rng); });
  gg_dx.fill_storage([&] { return unit(rng); });
  gg_dgrid.fill_storage([&] { return unit(rng); });
  const gs::Options opt{k.mode, k.padding, k.align, static_cast<int>(state.range(0))};
  const gs::DoubleBackwardMask mask{k.want_grad, true, true};
  const gs::TensorView none{nullptr, dt, {}, {}};
  for (auto _ : state) {
    const gs::Status s = gs::grid_sampler_2d_double_backward(
        k.gg_dx ? gg_dx.view() : none, gg_dgrid.view(), grad.view(), input.view(), grid.view(),
        d_grad.mutable_view(), d_input.mutable_view(), d_grid.mutable_view(), opt, mask);
    if (!s.ok()) state.SkipWithError(s.message().c_str());
    benchmark::DoNotOptimize(d_grid.storage().data());
  }
  state.counters["pixels"] = benchmark::Counter(double(k.n * k.out_h * k.out_w),
                                                benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
  for (const Case& k : kCases) {
    benchmark::RegisterBenchmark((std::string("double_backward/") + k.name).c_str(),
                                 [&k](benchmark::State& s) { run_case(s, k); })
        ->Arg(1)
        ->Arg(2)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
