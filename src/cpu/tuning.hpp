// Sizes that shape the CPU kernels' work, read by the planner (plan.cpp) and
// by the kernels of every SIMD target. Why each has its value is measured in
// docs/performance.md.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gridsampler::cpu {

constexpr int kTile = 64;         // output pixels per tile (one builder call)
// Output pixels per planar forward task when fused tiles (fused-inl.h) run:
// runs of tiles, for fewer tasks and calls (not measured on its own).
constexpr int64_t kFusedRun = 16 * kTile;
// Channels of a planar forward that fused tiles sample together, each
// vector's stencil serving all of them, at most; more channels take
// channel-minor blocks.
constexpr int64_t kMaxFusedForwardChannels = 4;
// ... and of a backward (bilinear, trilinear or nearest; bicubic tiles take
// one): a tile keeps each channel's dx products until it scatters them.
constexpr int64_t kMaxFusedBackwardChannels = 4;
// A task's window of input lines that the one before it prefetches
// (prefetch-inl.h), at most: 8 KiB, a 32 x 32 float image.
constexpr int64_t kMaxPrefetchLines = 128;
constexpr int kLanes = 16;        // channels per interleaved block
constexpr int kNarrowLanes = 4;   // ... for 2 to 7 channels
// An interleaved backward task's accumulators (and, as much again, its input
// values): 1 MiB keeps both in a 2 MiB L2.
constexpr std::size_t kGroupBytes = 1 << 20;
constexpr std::size_t kAccumulatorBytes = 256 << 10;  // a planar task's dx accumulators (L2-sized)
constexpr int64_t kMinTasks = 16;          // below this, split pixels (fixed, not per machine)
constexpr int64_t kMinChunkPixels = 1024;  // ... but never into chunks smaller than this
// Interleaved copies of the input: at most this per block (both directions)
// and, for the forward's per-thread copies, in all (a bound for plans that
// ask for private copies: the planner's own choice shares them long before,
// see plan_forward).
constexpr uint64_t kMaxInterleavedBytes = uint64_t{64} << 20;
constexpr uint64_t kMaxForwardCopyBytes = uint64_t{256} << 20;
// The forward's private copies (one per thread), all together, at most this;
// past it one shared copy serves the team. Private copies need no barriers,
// and a small one stays in its thread's L2; large ones gain nothing on that
// and cost their memory once per thread.
constexpr uint64_t kMaxPrivateCopiesBytes = uint64_t{32} << 20;
// ... and private copies that would outgrow the output are shared too, for
// their memory, once they take this much together: below it the barriers
// of a shared copy cost more time than the copies cost memory (a few
// hundred KiB beside PyTorch's own megabytes of working memory).
constexpr uint64_t kMinSharedForMemoryBytes = uint64_t{2} << 20;
// Input pixels per thread's share of a shared forward copy, at least (a few
// microseconds of copying).
constexpr int64_t kMinCopyStretch = 4096;
// Input pixels that a backward task's row window (window-inl.h) brings in
// or writes out at a time, at least: fewer, larger copies.
constexpr int64_t kWindowBatch = 2048;
// Interleaved backward tasks whose whole-plane buffers (dx accumulators,
// input values) would take this much each keep row windows instead, where
// the grid allows: less memory, at some cost in time.
constexpr uint64_t kMinWindowBytes = uint64_t{8} << 20;
// Pixel chunks need dx accumulators per chunk and (interleaved) an input
// copy per (n, block): chunk only while those take at most this, and no
// more than the call's outputs (plan.cpp). Chunks feed threads that
// (n, block) tasks alone would leave idle, at a memory cost of (chunks + 1)
// times dx; past these sizes the memory matters more, and on 2 threads the
// chunks' extra zeroing and sums cost more than the tasks they add
// (docs/performance.md, "Memory: sparse scatters on planes, bounded chunks,
// chunk bands").
constexpr uint64_t kMaxChunkBytes = uint64_t{16} << 20;
// ... except for a problem that is one (n, block) task: unchunked it runs on
// one thread whatever the team, so it takes two chunks (one more set of dx
// accumulators than unchunked) while their buffers take at most this. On 2
// threads: 1,3,1024^2 backward 1.65x faster for 16 MiB more.
constexpr uint64_t kMaxSingleTaskChunkBytes = uint64_t{64} << 20;

}  // namespace gridsampler::cpu
