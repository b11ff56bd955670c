// Sizes that shape the CPU kernels' work, shared by the planner
// (kernels.cpp) and the kernels of every SIMD target (kernels-inl.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include <omp.h>

#include "core/validate.hpp"

namespace gridsampler::cpu {

constexpr int kTile = 64;                             // output pixels per tile
constexpr int kLanes = 16;                            // channels per interleaved block
constexpr int kNarrowLanes = 4;                       // ... for 2 to 7 channels
// An interleaved task's accumulators (and, as much again, its input values):
// 1 MiB keeps both in a 2 MiB L2. (With 2 MiB, float64 8,64,64,64,64,64,
// whose groups are half as large with 1 MiB, took 11% longer at 1 thread:
// medians of 11 interleaved runs.)
constexpr std::size_t kGroupBytes = 1 << 20;
constexpr std::size_t kAccumulatorBytes = 256 << 10;  // a planar task's dx accumulators (L2-sized)
constexpr int64_t kMinTasks = 16;          // below this, split pixels (fixed, not per machine)
constexpr int64_t kMinChunkPixels = 1024;  // ... but never into chunks smaller than this

}  // namespace gridsampler::cpu
