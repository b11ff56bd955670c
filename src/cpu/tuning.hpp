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
constexpr std::size_t kGroupBytes = 2 << 20;          // an interleaved task's accumulators (and values)
constexpr std::size_t kAccumulatorBytes = 256 << 10;  // a planar task's dx accumulators (L2-sized)
constexpr int64_t kMinTasks = 16;          // below this, split pixels (fixed, not per machine)
constexpr int64_t kMinChunkPixels = 1024;  // ... but never into chunks smaller than this

}  // namespace gridsampler::cpu
