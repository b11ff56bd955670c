// Google Benchmark suite: the backward (and forward) on the case table whose
// PyTorch timings docs/performance.md lists, and on shapes from models that call
// grid_sample every step.
// Counters: bytes of all inputs and outputs per second, output pixels/s.
//   build/bench/gridsampler_bench --benchmark_filter=... [--benchmark_min_time=0.2]
#include <benchmark/benchmark.h>

#include <omp.h>

#include <random>
#include <string>

#include "core/dtype.hpp"
#include "gridsampler/gridsampler.hpp"
#include "host/tensor.hpp"

namespace {

namespace gs = gridsampler;

struct Case {
  int64_t n, c, in_h, in_w, out_h, out_w;
  gs::Interpolation mode;
  gs::Padding padding;
  bool align;
};

template <class S>
void run_case(benchmark::State& state, const Case& k, bool backward, bool channels_last) {
  const gs::DType dt = gs::dtype_of<S>();
  const gs::Shape4 in_shape{k.n, k.c, k.in_h, k.in_w}, grid_shape{k.n, k.out_h, k.out_w, 2},
      out_shape{k.n, k.c, k.out_h, k.out_w};
  auto strides = [&](const gs::Shape4& s) {
    return channels_last ? gs::channels_last_strides(s) : gs::contiguous_strides(s);
  };
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> unit(-1, 1), wide(-1.1, 1.1);
  gs::host::Tensor input(dt, in_shape, strides(in_shape)), grid(dt, grid_shape), grad(dt, out_shape, strides(out_shape)),
      out(dt, out_shape, strides(out_shape)), dx(dt, in_shape, strides(in_shape)), dgrid(dt, grid_shape);
  input.fill_storage([&] { return unit(rng); });
  grid.fill_storage([&] { return wide(rng); });
  grad.fill_storage([&] { return unit(rng); });
  gs::Options opt{k.mode, k.padding, k.align, static_cast<int>(state.range(0))};
  for (auto _ : state) {
    gs::Status s;
    if (backward) {
      s = gs::grid_sampler_2d_backward(grad.view(), input.view(), grid.view(), dx.mutable_view(), dgrid.mutable_view(),
                                       opt);
    } else {
      s = gs::grid_sampler_2d(input.view(), grid.view(), out.mutable_view(), opt);
    }
    if (!s.ok()) state.SkipWithError(s.message().c_str());
    benchmark::DoNotOptimize(dx.storage().data());
  }
  const double bytes = sizeof(S) * double(backward ? grad.numel() + 2 * input.numel() + 2 * grid.numel()
                                                   : input.numel() + grid.numel() + out.numel());
  state.counters["bytes"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["pixels"] = benchmark::Counter(double(k.n * k.out_h * k.out_w),
                                                benchmark::Counter::kIsIterationInvariantRate);
}

using I = gs::Interpolation;
using P = gs::Padding;

void register_all() {
  const int max_threads = omp_get_max_threads();
  struct Named {
    const char* name;
    Case k;
  };
  const Named cases[] = {
      // The case table of bench/compare_torch.py (PyTorch timings: docs/performance.md).
      {"table/8x64x64x64_bilinear_zeros", {8, 64, 64, 64, 64, 64, I::kBilinear, P::kZeros, false}},
      {"table/4x32x128x128_bilinear_border_align", {4, 32, 128, 128, 128, 128, I::kBilinear, P::kBorder, true}},
      {"table/1x3x512x512_bilinear_zeros", {1, 3, 512, 512, 512, 512, I::kBilinear, P::kZeros, false}},
      {"table/2x256x32x32_bilinear_reflection", {2, 256, 32, 32, 32, 32, I::kBilinear, P::kReflection, false}},
      {"table/4x16x64x64_bicubic_zeros", {4, 16, 64, 64, 64, 64, I::kBicubic, P::kZeros, false}},
      {"table/4x16x64x64_bicubic_reflection_align", {4, 16, 64, 64, 64, 64, I::kBicubic, P::kReflection, true}},
      {"table/8x64x64x64_nearest_zeros", {8, 64, 64, 64, 64, 64, I::kNearest, P::kZeros, false}},
      // Spatial transformer network on MNIST (Jaderberg et al. 2015): batch 64 of 28x28 digits.
      {"model/stn_mnist_64x1x28x28", {64, 1, 28, 28, 28, 28, I::kBilinear, P::kZeros, false}},
      // Optical-flow feature warping at 1/4 resolution (PWC-Net / RAFT style): 96x128 features.
      {"model/flow_warp_4x64x96x128", {4, 64, 96, 128, 96, 128, I::kBilinear, P::kZeros, true}},
      // Deformable registration of 2-D slices (VoxelMorph-style): one 256x256 image, border padding.
      {"model/registration_1x1x256x256", {1, 1, 256, 256, 256, 256, I::kBilinear, P::kBorder, true}},
      // Tri-plane features for NeRF-style rendering: 3 planes of 32 channels, 16384 points each.
      {"model/triplane_3x32x128x128_16k_points", {3, 32, 128, 128, 1, 16384, I::kBilinear, P::kBorder, true}},
  };
  for (const Named& c : cases) {
    for (bool backward : {true, false}) {
      for (bool cl : {false, true}) {
        const std::string name = std::string(backward ? "backward/" : "forward/") + c.name + (cl ? "/nhwc" : "/nchw");
        auto* b = benchmark::RegisterBenchmark(name.c_str(), [c, backward, cl](benchmark::State& s) {
          run_case<float>(s, c.k, backward, cl);
        });
        b->ArgName("threads")->Arg(1);
        if (max_threads > 1) b->Arg(max_threads);
        b->UseRealTime()->Unit(benchmark::kMillisecond);
      }
    }
  }
  // Other dtypes on the first case.
  const Case first{8, 64, 64, 64, 64, 64, I::kBilinear, P::kZeros, false};
  benchmark::RegisterBenchmark("backward/dtype/f64", [first](benchmark::State& s) { run_case<double>(s, first, true, false); })
      ->Arg(max_threads)->UseRealTime()->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("backward/dtype/f16", [first](benchmark::State& s) { run_case<gs::Half>(s, first, true, false); })
      ->Arg(max_threads)->UseRealTime()->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("backward/dtype/bf16", [first](benchmark::State& s) { run_case<gs::BFloat16>(s, first, true, false); })
      ->Arg(max_threads)->UseRealTime()->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
