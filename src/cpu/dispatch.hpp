// The kernels compiled for each SIMD target, and the run-time choice among
// them. Highway compiles every kernel file once per target (AVX-512, AVX2
// and the baseline); the best target this CPU supports is used, unless
// GRIDSAMPLER_SIMD_TARGET names another (for benchmarks, and for valgrind,
// which lacks AVX-512).
#pragma once

#include <cstdint>

#include "cpu/double_backward.hpp"
#include "cpu/plan.hpp"
#include "gridsampler/gridsampler.hpp"

namespace gridsampler::cpu {

// Channel layouts of a driver: planes, or interleaved blocks of
// kNarrowLanes or kLanes channels.
enum class Path : int { kPlanar = 0, kNarrowLanes = 1, kLanes = 2 };
// Tap forms a builder makes: flat indices only (interleaved kernels), or
// strided input offsets and validity too (planar kernels).
enum class TapForm : int { kFlat = 0, kStrided = 1 };

// The kernels of one dtype for one SIMD target. Drivers are indexed by mode
// (which fixes the stencil size) and path; builders by mode, padding,
// align_corners and tap form: they are the only code specialised on padding
// and align_corners.
// Volumes have their own drivers (Tile<T, K, 3>) and builders, indexed alike.
struct KernelTable {
  ForwardFn forward[3][3] = {};
  BackwardFn backward[3][3] = {};
  BuildTileFn build[3][3][2][2] = {};
  ForwardFn forward_3d[3][3] = {};
  BackwardFn backward_3d[3][3] = {};
  BuildTileFn build_3d[3][3][2][2] = {};
  // Fused one-channel bilinear (trilinear) tiles of images (volumes) by
  // padding and align_corners (float and double; null elsewhere).
  FusedForwardFn fused_forward[3][2] = {};
  FusedBackwardFn fused_backward[3][2] = {};
  FusedForwardFn fused_forward_3d[3][2] = {};
  FusedBackwardFn fused_backward_3d[3][2] = {};
  // ... and nearest ones.
  FusedForwardFn fused_forward_nearest[3][2] = {};
  FusedBackwardFn fused_backward_nearest[3][2] = {};
  FusedForwardFn fused_forward_nearest_3d[3][2] = {};
  FusedBackwardFn fused_backward_nearest_3d[3][2] = {};
  // ... and bicubic ones of images (float only: fused_bicubic-inl.h).
  FusedForwardFn fused_forward_bicubic[3][2] = {};
  FusedBackwardFn fused_backward_bicubic[3][2] = {};
  // The double backward's channel loop by grid components (images,
  // volumes), SecondOrderTerms and whether d_input is scattered.
  SecondOrderFn second_order[2][3][2] = {};
};

// The table of `dtype` for the SIMD target in use.
KernelTable kernels(DType dtype);

inline BuildTileFn builder(const KernelTable& table, const Options& o, TapForm form, bool volume = false) {
  const auto& build = volume ? table.build_3d : table.build;
  return build[static_cast<int>(o.interpolation)][static_cast<int>(o.padding)][o.align_corners ? 1 : 0]
              [static_cast<int>(form)];
}

// The SIMD targets compiled in and supported by this CPU (Highway's target
// bits), the one in use, and a way for tests to restrict the choice (0 =
// undo). Plans made after force_targets() use the new choice.
int64_t available_targets();
int64_t current_target();
// Whether the target in use has vectors (not Highway's one-lane fallback,
// where the builders make every tap with the scalar stencil).
bool vector_target();
void force_targets(int64_t targets);
const char* target_name(int64_t target);
// Two choices that were measured to go opposite ways on AMD's and Intel's
// CPUs (a Zen 4 and an Emerald Rapids Xeon, both AVX-512; Intel's gathers
// are the cheaper), read from CPUID's vendor once. Neither changes a bit;
// each has an environment override (0 or 1).
// - window_reads_pay(): the fused tiles' window reads (fused-inl.h) beat
//   gathers, on AMD only (the Zen 4: 1.1x-1.4x on windowed one-channel
//   forwards; the Xeon: the same forwards 1.02x-1.29x faster without them;
//   docs/performance.md, "Window reads on Intel"). GRIDSAMPLER_WINDOW_READS.
// - planar_downsampling_pays(): a forward of 2 to 7 channels that reads each
//   input pixel about once or less is faster sampling the planes than
//   copying them channel-minor first, on Intel only (the Xeon: 2x and 4x
//   downsampling 1.08x-1.21x faster; the Zen 4 lost on every planar forward;
//   docs/performance.md, "Channels-last moves, planar downsampling,
//   multiply-adds in every forward"); so are, on the same CPUs, the fused
//   tiles of 2 to 4 channels where plan.cpp's fused_planes_pay() says
//   ("Fused tiles of several channels"). GRIDSAMPLER_PLANAR_DOWNSAMPLING.
bool window_reads_pay();
bool planar_downsampling_pays();

}  // namespace gridsampler::cpu
