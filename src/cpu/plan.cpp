// The planner: how a call's work is split (from the problem's shape; see
// plan.hpp), which driver and builder run it, and its scratch layout.
#include "cpu/plan.hpp"

#include <algorithm>
#include <cstdint>

#include "core/dtype.hpp"
#include "core/memory.hpp"
#include "core/threads.hpp"
#include "core/zero_fill.hpp"
#include "cpu/dispatch.hpp"
#include "cpu/stencil.hpp"
#include "cpu/tuning.hpp"

namespace gridsampler::cpu {
namespace {

using detail::Problem;

// Sizes of hostile but valid problems (a 2^62-pixel plane read through zero
// strides, 2^40 channels) can exceed 64 bits: the planner's arithmetic
// saturates, so such a plan asks for an impossible workspace instead of a
// wrapped-around small one.
constexpr uint64_t kSaturated = UINT64_MAX;
uint64_t mul(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? kSaturated : r;
}
uint64_t add(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? kSaturated : r;
}
uint64_t align_up(uint64_t v) { return v >= kSaturated - 63 ? kSaturated : (v + 63) / 64 * 64; }

// Bytes of one value in the compute type (float, or double for float64).
uint64_t compute_size(DType dtype) { return dtype == DType::kFloat64 ? sizeof(double) : sizeof(float); }

// Channels in blocks of kLanes, interleaved, when there are enough of them to
// fill most lanes, in blocks of kNarrowLanes for 2 to 7 channels (one cache
// line per tap then serves every channel, where planes would take one each).
int lanes_for(int64_t channels) { return channels >= kLanes / 2 ? kLanes : kNarrowLanes; }

// The forward's blocks. Exactly 8 channels leave half of a kLanes block
// empty; as two narrow blocks they fill their lanes, and small stencils (up
// to 4 taps: nearest, bilinear images) then work several pixels per vector.
// That pays where the input is planar (its copy is a transposition either
// way), not from channel-minor input (a straight copy into one block, split
// into two otherwise). Each output value is computed by its own lane, so the
// bits are the same for either width.
int forward_lanes_for(const Problem& p) {
  const bool small_stencil = p.options.interpolation == Interpolation::kNearest ||
                             (p.options.interpolation == Interpolation::kBilinear && !p.volume);
  if (p.c == kLanes / 2 && small_stencil && p.input_strides[1] != 1) return kNarrowLanes;
  return lanes_for(p.c);
}

// The backward's blocks. Exactly 8 channels by nearest go as two narrow
// blocks in one task rather than one half-empty kLanes block: nearest's
// backward only scatters grad, so what costs is the passes over the
// accumulators (zeroing them, writing dx out), which halve, while each tap
// takes two 16-byte adds instead of one 64-byte add. Each channel's grad is
// added at one tap per pixel, in pixel order, in either width.
int backward_lanes_for(const Problem& p) {
  if (p.c == kLanes / 2 && p.options.interpolation == Interpolation::kNearest) return kNarrowLanes;
  return lanes_for(p.c);
}

// Planar kernels read the input through flat taps (the builders' vector
// form, and vector gathers) when its planes are dense rows and the flat
// indices fit the gathers' index type; otherwise through strided taps.
// Whether an input-shaped tensor's planes are dense rows (flat index
// y * Win + x), as the flat taps and a direct dx need.
bool dense_rows(const Problem& p, const Shape4& strides) {
  return strides[3] == 1 && (strides[2] == p.in_w || in_rows(p) == 1);
}

// Flat indices below this fit the gathers' index type: int32 for float,
// exact in double for double.
int64_t gather_index_limit(DType dtype) { return dtype == DType::kFloat64 ? int64_t{1} << 53 : int64_t{1} << 31; }

// The flat indices from a plane's start up to this bound can be a
// stencil's taps: a row (and, in volumes, a layer) past the plane's last
// pixel, where the taps after an edge pixel point.
int64_t tap_extent(const Problem& p) { return in_plane(p) + (p.volume ? p.in_h * p.in_w : 0) + p.in_w; }

bool flat_taps(const Problem& p) {
  const int64_t plane = in_plane(p);
  const bool dense = dense_rows(p, p.input_strides);
  return dense && plane > 0 && plane < gather_index_limit(p.dtype) - p.in_w;
}

// Whether an image samples few taps of each input plane: at most plane /
// `share` output pixels, and their taps, each counted `weight` times, within
// the plane.
bool few_taps(const Problem& p, uint64_t share, uint64_t weight) {
  const auto taps = static_cast<uint64_t>(image_taps(p.options.interpolation)) * weight;
  const auto pixels = static_cast<uint64_t>(out_pixels(p)), plane = static_cast<uint64_t>(in_plane(p));
  return !p.volume && pixels <= plane / share && mul(taps, pixels) <= plane;
}

// Whether an image forward reads each input pixel about once or less: at
// most a quarter as many output pixels as the plane has (downsampling by 2
// or more), and taps x output pixels within the plane. Where a CPU's
// gathers are cheap (planar_downsampling_pays()), such a forward samples
// the planes directly: the channel-minor copy would cost more than it saves.
bool reads_pixels_once(const Problem& p) { return few_taps(p, 4, 1); }

// Whether an image backward touches so little of each input plane that
// planes beat channel-minor blocks: output pixels at most an eighth of the
// plane, and taps x output pixels within it (a quarter of it for kLanes
// blocks, whose stencils serve 16 channels at once). Blocks would zero, fill
// and write out [pixel][lane] buffers the size of the plane (the dx
// accumulators and the input values) for a few taps; planes accumulate into
// dx itself and read the input where it lies, so they need no scratch.
// Narrow blocks (2 to 7 channels) go planar from a quarter of the plane
// (downsampling by 2, reads_pixels_once): on the Xeon, 2x resizes of 2 and
// 3 channels ran 1.10x-1.51x faster; uniformly random grids at that ratio
// ran 0.77x, but a downsampling reads its input in order (docs/performance.md,
// "Planar downsampling backward"). Unlike the forward's planar downsampling
// this is not a choice per CPU: planes and blocks can round dx and dgrid
// differently, and a call's bits depend on its shape alone.
bool scatters_sparsely(const Problem& p, int lanes) {
  if (few_taps(p, 8, lanes == kLanes ? 4 : 1)) return true;
  return lanes == kNarrowLanes && reads_pixels_once(p);
}

// Fused tiles (fused-inl.h) apply to dense channel planes (volumes), one
// or, in a forward, up to kMaxFusedForwardChannels, sampled bilinearly
// (trilinearly), by nearest or, one plane of a float image, bicubically
// (fused_bicubic-inl.h), in the compute type, where the builders' vector
// taps are exact: axes of at most 2^24 pixels for float, 2^53 for double,
// and flat indices up to plane + Hin * Win + Win within the gathers' index
// type (flat_taps has checked plane + Win). Planar backwards of volumes and
// of double images take them for up to kMaxFusedBackwardChannels (each
// stencil serves every channel): on the Xeon 1.08x-1.37x faster than the
// builders and planar microkernels, whose tile of 8 taps (volumes) or
// whose 8-lane gathers (double) cost more; planar float images keep those
// (0.85x-1.03x fused: crops, random points, resizes; docs/performance.md,
// "Fused tiles of several channels backward").
bool fused_applies(const Problem& p, int lanes, bool flat, bool forward) {
  const bool compute_type = p.dtype == DType::kFloat32 || p.dtype == DType::kFloat64;
  const int64_t exact = p.dtype == DType::kFloat64 ? int64_t{1} << 53 : int64_t{1} << 24;
  const bool axes = p.in_w <= exact && p.in_h <= exact && p.in_d <= exact;
  const bool indices = !p.volume || tap_extent(p) < gather_index_limit(p.dtype);
  const Interpolation mode = p.options.interpolation;
  const bool cubic = mode == Interpolation::kBicubic && !p.volume && p.dtype == DType::kFloat32;
  const bool fusable = mode == Interpolation::kBilinear || cubic || mode == Interpolation::kNearest;
  const bool planes_backward = p.volume || p.dtype == DType::kFloat64;
  const int64_t most = forward ? kMaxFusedForwardChannels : planes_backward ? kMaxFusedBackwardChannels : 1;
  return p.c <= most && lanes == 1 && flat && compute_type && fusable && axes && indices;
}

// Whether a forward of 2 to kMaxFusedForwardChannels dense channel planes
// (that fused tiles apply to) samples them through fused tiles, each
// vector's stencil computed once for all channels, instead of channel-minor
// blocks. Measured on an Intel Xeon, where gathers are cheap
// (planar_downsampling_pays(); performance.md, "Fused tiles of several
// channels"): two channels always (their 4-lane block is half empty:
// 1.3x-2.2x); three or four where the output has at most half as many
// pixels as a plane (downsampling: the block's copy is read about once per
// pixel, 1.2x-1.8x), and three in volumes (1.2x) or by nearest (one tap:
// 1.1x-1.4x). Other forwards of three or four channels at full size or more
// stay in blocks (a CIFAR-sized STN ran 0.73x fused; four channels 0.62x,
// by nearest 0.80x).
bool fused_planes_pay(const Problem& p) {
  if (!planar_downsampling_pays() || p.c < 2 || p.c > kMaxFusedForwardChannels) return false;
  const bool nearest = p.options.interpolation == Interpolation::kNearest;
  return p.c == 2 || out_pixels(p) <= in_plane(p) / 2 || (p.c == 3 && (p.volume || nearest));
}

// Whether a one-channel forward through fused tiles runs its images'
// pixels as one sequence (ForwardPlan::batched). For images of fewer than
// kFusedRun output pixels, whose runs would otherwise be a call per image
// ending in a partial vector (a 7x7 correlation window takes 4 vectors of
// 16 lanes for its 49 pixels, batched about 3); bilinear (trilinear) or
// nearest, with window reads off (a vector's lanes may read two images'
// planes); every image's plane after the one before it, or one plane for
// all (stride 0), within the gathers' index type.
bool batches_images(const Problem& p, const ForwardPlan& plan) {
  if (plan.fused == nullptr || plan.window_reads || p.c != 1 || p.n < 2) return false;
  if (p.options.interpolation == Interpolation::kBicubic || out_pixels(p) >= kFusedRun) return false;
  const int64_t plane = in_plane(p), stride = p.input_strides[0];
  if (stride != 0 && stride < plane) return false;
  const uint64_t reach = add(mul(static_cast<uint64_t>(p.n - 1), static_cast<uint64_t>(stride)),
                             static_cast<uint64_t>(tap_extent(p)));
  return reach < static_cast<uint64_t>(gather_index_limit(p.dtype));
}

// The table entry of a problem's padding and align_corners.
template <class Fn>
Fn fused_entry(const Problem& p, Fn const (&images)[3][2], Fn const (&volumes)[3][2]) {
  return (p.volume ? volumes : images)[static_cast<int>(p.options.padding)][p.options.align_corners ? 1 : 0];
}

Path path_of(int lanes) {
  return lanes == kLanes ? Path::kLanes : lanes == kNarrowLanes ? Path::kNarrowLanes : Path::kPlanar;
}

// The call's threads (core/threads.hpp: at most max_threads()).
int call_threads(const Problem& p) { return detail::call_threads(p.options.num_threads); }

// The team that runs a parallel region of `tasks` iterations: the call's
// threads, never more than there are tasks, since an idle thread would still
// get its per-thread scratch (or forward copy), which the plan sizes by the
// team.
int team_for(const Problem& p, uint64_t tasks) {
  return static_cast<int>(std::clamp<uint64_t>(tasks, 1, static_cast<uint64_t>(call_threads(p))));
}

// The backward of an empty problem (N, C or Hout * Wout is 0): dx is a sum
// over no output pixels, dgrid a sum over no channels; whichever of them is
// wanted and not empty is zero. Nothing else is read or computed.
void backward_empty(const BackwardPlan& plan, const TensorView&, const TensorView&, const TensorView&,
                    const MutableTensorView& dx, const MutableTensorView& dgrid, void*) {
  if (plan.problem.mask.input) detail::zero_view(dx);
  if (plan.problem.mask.grid) detail::zero_view(dgrid);
}

// How much the pixel chunks of a backward may cost: no more than the
// outputs the call writes (dx and dgrid, counted whatever the mask: chunks
// change dx's bits, which must not depend on it), and at most kMaxChunkBytes.
// Volumes may take 1 MiB more: a single 128^3 float volume is one (n, block)
// task whose two chunks need two 8 MiB accumulator volumes with their zero
// slots (16 MiB + 8 bytes), and without them it runs on one thread.
uint64_t chunk_bytes_limit(const Problem& p) {
  const uint64_t components = p.volume ? 3 : 2;
  const uint64_t values = add(mul(mul(p.n, std::max<int64_t>(p.c, 1)), in_plane(p)),
                              mul(mul(p.n, out_pixels(p)), components));
  return std::min(kMaxChunkBytes + (p.volume ? uint64_t{1} << 20 : 0), mul(values, dtype_size(p.dtype)));
}

}  // namespace

ForwardPlan plan_forward(const Problem& p, ForwardCopies copies) {
  ForwardPlan plan;
  plan.problem = p;
  // Interleaved for 2 channels or more, reading a channel-minor copy of a
  // block's plane, as long as the copies stay reasonable.
  const uint64_t elem = compute_size(p.dtype);
  const auto slot = static_cast<uint64_t>(in_plane(p)) + 1;
  const int lanes = forward_lanes_for(p);
  const int64_t pixels = out_pixels(p);
  const int64_t plane = in_plane(p);
  const bool planar_pays = copies == ForwardCopies::kChosen && lanes == kNarrowLanes && flat_taps(p) &&
                           reads_pixels_once(p) && planar_downsampling_pays();
  const bool fused_planes =
      copies == ForwardCopies::kChosen && fused_applies(p, 1, flat_taps(p), true) && fused_planes_pay(p);
  // An image forward with at most an eighth as many output pixels as a
  // plane, whose taps read each input pixel a quarter of a time or less on
  // average (tiny outputs: windows, points, crops; bilinear downsampling by
  // 4 or more per side), samples the planes where they lie, on every CPU:
  // a channel-minor copy would read and write the whole plane for a few
  // taps. At half a read per pixel the copies won (docs/performance.md,
  // "Sparse forwards").
  const bool sparse = copies == ForwardCopies::kChosen && few_taps(p, 8, 4);
  const bool interleave = copies != ForwardCopies::kNone && !planar_pays && !fused_planes && !sparse && !p.empty() &&
                          p.c >= 2 && slot <= kMaxInterleavedBytes / (lanes * elem);
  if (interleave) {
    const int64_t blocks = (p.c + lanes - 1) / lanes;
    const auto tasks = static_cast<int64_t>(std::min<uint64_t>(mul(p.n, blocks), INT64_MAX));
    const uint64_t copy = slot * lanes * elem;  // one block's, at most kMaxInterleavedBytes
    // One copy shared by the team where private copies would cost more
    // than they save: when there are fewer (n, block) tasks than threads
    // (private copies could feed every thread only by copying one block on
    // several), or when one copy per thread would outgrow
    // kMaxPrivateCopiesBytes or, for several threads, the output the call
    // writes (once they take kMinSharedForMemoryBytes).
    const int asked = call_threads(p);
    const uint64_t private_copies = mul(static_cast<uint64_t>(asked), copy);
    const uint64_t output = mul(mul(mul(p.n, p.c), pixels), dtype_size(p.dtype));
    const bool shared = copies == ForwardCopies::kShared ||
                        (copies == ForwardCopies::kChosen &&
                         (tasks < asked || private_copies > kMaxPrivateCopiesBytes ||
                          (asked > 1 && private_copies > output && private_copies >= kMinSharedForMemoryBytes)));
    if (shared) {
      // The team copies a block (a stretch of the plane each), then samples
      // its tiles, block after block.
      const int threads = team_for(p, static_cast<uint64_t>((pixels + kTile - 1) / kTile));
      plan.threads = threads;
      plan.lanes = lanes;
      plan.blocks = blocks;
      plan.shared_copy = true;
      plan.copy_stretch = std::max<int64_t>((plane + 4 * threads - 1) / (4 * threads), kMinCopyStretch);
      plan.copy_elems = static_cast<int64_t>(slot * lanes);
      plan.copy_bytes = static_cast<std::size_t>(copy);
    } else {
      // A copy per thread. Enough pixel ranges to feed the threads, none
      // much smaller than the plane it copies (each output value depends on
      // its pixel alone, so this split changes no bits).
      const int64_t want = (2 * static_cast<int64_t>(call_threads(p)) + tasks - 1) / tasks;
      const int64_t ranges =
          std::clamp<int64_t>(std::min(want, pixels / std::max<int64_t>(plane / 2, kTile)), 1, pixels);
      const int threads = team_for(p, static_cast<uint64_t>(tasks * ranges));
      if (static_cast<uint64_t>(threads) <= kMaxForwardCopyBytes / copy) {
        plan.threads = threads;
        plan.lanes = lanes;
        plan.blocks = blocks;
        plan.ranges = ranges;
        plan.range_pixels = ((pixels + ranges - 1) / ranges + kTile - 1) / kTile * kTile;
        plan.copy_elems = static_cast<int64_t>(slot * lanes);
        plan.copy_bytes = static_cast<std::size_t>(threads * copy);
      }
    }
  }
  // Planar: tasks (n, tile).
  if (plan.lanes == 1) plan.threads = team_for(p, static_cast<uint64_t>(p.n * ((pixels + kTile - 1) / kTile)));
  plan.flat_taps = plan.lanes == 1 && flat_taps(p);
  const KernelTable table = kernels(p.dtype);
  const auto mode = static_cast<int>(p.options.interpolation);
  plan.fn = (p.volume ? table.forward_3d : table.forward)[mode][static_cast<int>(path_of(plan.lanes))];
  plan.build = builder(table, p.options, plan.lanes > 1 || plan.flat_taps ? TapForm::kFlat : TapForm::kStrided,
                       p.volume);
  if (fused_applies(p, plan.lanes, plan.flat_taps, true)) {
    switch (p.options.interpolation) {
      case Interpolation::kNearest:
        plan.fused = fused_entry(p, table.fused_forward_nearest, table.fused_forward_nearest_3d);
        break;
      case Interpolation::kBicubic:  // (images only)
        plan.fused = fused_entry(p, table.fused_forward_bicubic, table.fused_forward_bicubic);
        break;
      default:
        plan.fused = fused_entry(p, table.fused_forward, table.fused_forward_3d);
    }
    plan.window_reads = window_reads_pay();
    plan.batched = batches_images(p, plan);
    if (plan.batched) plan.threads = team_for(p, (static_cast<uint64_t>(p.n * pixels) + kFusedRun - 1) / kFusedRun);
  }
  return plan;
}

void run_forward(const ForwardPlan& plan, const TensorView& input, const TensorView& grid,
                 const MutableTensorView& output) {
  if (plan.copy_bytes == 0) {
    plan.fn(plan, input, grid, output, nullptr);
    return;
  }
  {
    const detail::CachedBuffer copies(plan.copy_bytes);
    if (copies.data() != nullptr) {
      plan.fn(plan, input, grid, output, copies.data());
      return;
    }
  }  // (freed before the fallback runs)
  const ForwardPlan planar = plan_forward(plan.problem, ForwardCopies::kNone);
  planar.fn(planar, input, grid, output, nullptr);
}

BackwardPlan plan_backward(const Problem& p, RowWindows windows) {
  BackwardPlan plan;
  plan.problem = p;
  if (p.empty()) {
    plan.fn = &backward_empty;
    return plan;  // no workspace
  }
  const uint64_t elem = compute_size(p.dtype);
  const int64_t pixels = out_pixels(p);
  const int64_t plane = in_plane(p);
  const int64_t slot = plane + 1;  // a plane and its zero slot
  const int64_t c = std::max<int64_t>(p.c, 1);
  // Interleaved as long as the two [pixel][lane] buffers stay reasonable
  // and the taps cover enough of them; otherwise planar blocks of as many
  // accumulator planes as fit kAccumulatorBytes.
  const int lanes = backward_lanes_for(p);
  // By the shape alone, as every choice that can change bits: channels-last
  // and strided inputs take the planes that dense ones do, through strided
  // taps, and give their bits.
  const bool sparse = scatters_sparsely(p, lanes);
  if (c >= 2 && !sparse && mul(mul(2 * lanes, elem), slot) <= kMaxInterleavedBytes) plan.lanes = lanes;
  if (plan.lanes > 1) {
    // A task takes a group of sub-blocks of `lanes` channels, so that the
    // stencils of a tile serve them all: as many as fit kGroupBytes, but not
    // so many that there are fewer than kMinTasks (n, group) tasks when there
    // could be more. Narrow blocks in place of a kLanes one
    // (backward_lanes_for) keep its task: both in one group.
    const int64_t lane_blocks = (c + lanes - 1) / lanes;
    const auto fit = static_cast<int64_t>(kGroupBytes / mul(mul(slot, lanes), elem));
    const int64_t spread = std::max<int64_t>(mul(p.n, lane_blocks) / kMinTasks, 1);
    const int64_t group =
        lanes < lanes_for(c) ? lane_blocks : std::clamp<int64_t>(std::min(fit, spread), 1, lane_blocks);
    plan.channel_block = group * lanes;
    plan.accumulator_elems = group * slot * lanes;
  } else {
    // Each block rebuilds the stencils, so never split fewer than
    // kLanes / 2 channels, even when their planes exceed kAccumulatorBytes.
    const auto fit = static_cast<int64_t>(kAccumulatorBytes / mul(slot, elem));
    plan.channel_block = std::clamp<int64_t>(std::max<int64_t>(fit, kLanes / 2), 1, c);
    // Only used (and only sized below) when dx is wanted: then dx itself, at
    // least C planes, fits in 2^63 bytes, and so does this.
    plan.accumulator_elems = static_cast<int64_t>(std::min<uint64_t>(mul(plan.channel_block, slot), INT64_MAX));
  }
  plan.channel_blocks = (c + plan.channel_block - 1) / plan.channel_block;
  // Too few (n, block) tasks to feed the threads: split the output pixels.
  const auto tasks = static_cast<int64_t>(std::min<uint64_t>(mul(p.n, plan.channel_blocks), INT64_MAX));
  int64_t chunks = 1;
  if (tasks < kMinTasks) {
    // A task sets up (zeroes, copies, writes out) its accumulators: keep each
    // chunk's work above that cost.
    const int64_t min_chunk = std::max(kMinChunkPixels, slot / 2);
    chunks = std::min((kMinTasks + tasks - 1) / tasks, std::max<int64_t>(pixels / min_chunk, 1));
  }
  // Chunks cost memory that grows with the problem: their dx accumulators
  // and, interleaved with weight derivatives (not nearest), the input copy
  // per (n, block) that they share, i.e. (chunks + 1) times dx, where
  // unchunked tasks need a task's worth per thread. Chunk only while that
  // stays within chunk_bytes_limit(), or, for a single task (which
  // unchunked leaves every thread but one idle), in two chunks within
  // kMaxSingleTaskChunkBytes. (Counted as if both outputs were wanted:
  // chunks change dx's bits, which must not depend on the mask.)
  const uint64_t values_copy = plan.lanes > 1 && p.options.interpolation != Interpolation::kNearest ? 1 : 0;
  const uint64_t chunk_copies = static_cast<uint64_t>(chunks) + values_copy;
  if (mul(mul(mul(tasks, chunk_copies), plan.accumulator_elems), elem) > chunk_bytes_limit(p)) {
    const uint64_t two_chunks = mul(mul(2 + values_copy, plan.accumulator_elems), elem);
    chunks = tasks == 1 && chunks >= 2 && two_chunks <= kMaxSingleTaskChunkBytes ? 2 : 1;
  }
  plan.pixel_chunks = chunks;
  // A team no larger than the (n, block, chunk) tasks, so that every thread's
  // scratch serves a task. (The dgrid sums after several channel blocks, a
  // few additions per output pixel, then run on as many threads as the
  // tasks did.)
  plan.threads = team_for(p, mul(tasks, chunks));
  const bool compute_type = p.dtype == DType::kFloat32 || p.dtype == DType::kFloat64;
  plan.flat_taps = plan.lanes == 1 && flat_taps(p);
  const bool fused = fused_applies(p, plan.lanes, plan.flat_taps, false);
  // Fused tiles add into rows of consecutive pixels; planar microkernels
  // into pixels a stride apart (channels-last: C).
  const bool dx_rows = p.dx_strides[2] == p.dx_strides[3] * p.in_w || in_rows(p) == 1;
  const bool whole_planes = plan.lanes == 1 && p.mask.input && chunks == 1 && dx_rows;
  plan.direct_dx = whole_planes && compute_type && (p.dx_strides[3] == 1 || !fused);
  plan.acc_step = plan.direct_dx ? p.dx_strides[3] : 1;
  // A channels-last dx in 16 bits: the block's accumulators in its order too
  // ([pixel][channel]), so that they are written out by rows of channels,
  // not a plane at a time to every C-th element. (Fused tiles take the
  // compute type only.)
  if (whole_planes && !compute_type && p.dx_strides[1] == 1 && p.dx_strides[3] == p.c && p.c > 1) {
    plan.acc_step = plan.channel_block;
  }
  const int64_t chunk = (pixels + chunks - 1) / chunks;
  plan.chunk_pixels = std::max<int64_t>((chunk + kTile - 1) / kTile * kTile, kTile);
  plan.span = ((plane + chunks - 1) / chunks + kLanes - 1) / kLanes * kLanes;

  uint64_t bytes = 0;
  auto take = [&](uint64_t size) {
    const uint64_t at = bytes;
    bytes = align_up(add(bytes, size));
    return static_cast<std::size_t>(at);
  };
  if (p.mask.input && chunks > 1) {
    plan.dx_partials = take(mul(mul(mul(tasks, chunks), plan.accumulator_elems), elem));
  }
  if (p.mask.grid && plan.channel_blocks > 1) {
    const uint64_t components = p.volume ? 3 : 2;
    plan.dgrid_partials = take(mul(mul(mul(p.n, plan.channel_blocks + 1), pixels), components * elem));
  }
  // Input values in [pixel][lane] order, once per (n, block), shared by its
  // chunks (bounded with the chunks' partials, by kMaxChunkBytes).
  plan.need_values = p.mask.grid && p.options.interpolation != Interpolation::kNearest;
  plan.shared_values = plan.lanes > 1 && plan.need_values && chunks > 1;
  // Row windows cost time (their estimate of each tile's reach, rings to
  // keep, rows moved in and out in pieces: 0.88x-0.89x on the workloads
  // they take, docs/performance.md) and save memory: taken where a task's
  // whole-plane buffers would hold kMinWindowBytes or more.
  const bool large = mul(mul(slot, plan.channel_block), elem) >= kMinWindowBytes;
  plan.row_windows = plan.lanes > 1 && (p.mask.input || plan.need_values) &&
                     (windows == RowWindows::kWherever || (windows == RowWindows::kChosen && large));
  if (plan.shared_values) plan.values = take(mul(mul(tasks, plan.accumulator_elems), elem));
  // Per thread: one task's accumulators (unless chunks accumulate in the
  // workspace) and, interleaved, the block's input values (unless shared)
  // and a grad tile; with row windows, room for both whatever the chunks
  // (a window's ring uses the start of each, a band of rows, and a task
  // whose grid reaches too far for one the whole). (Interleaved buffers are
  // bounded by kMaxInterleavedBytes.)
  uint64_t elems = 0;
  if (p.mask.input && (chunks == 1 || plan.row_windows) && !plan.direct_dx) {
    elems = add(elems, plan.accumulator_elems);
  }
  if (plan.lanes > 1) {
    plan.scratch_values = static_cast<int64_t>(elems);
    if (plan.need_values && (!plan.shared_values || plan.row_windows)) elems = add(elems, plan.accumulator_elems);
    plan.scratch_grad = static_cast<int64_t>(elems);
    elems = add(elems, kTile * plan.lanes);
  }
  if (elems > 0) {
    const uint64_t per_thread = align_up(mul(elems, elem));
    plan.scratch_elems = static_cast<int64_t>(std::min<uint64_t>(per_thread / elem, INT64_MAX));
    plan.scratch = take(mul(plan.threads, per_thread));
  }
  // Slack to align any pointer to 64. A saturated size stays saturated.
  plan.workspace_bytes = static_cast<std::size_t>(bytes > 0 ? add(bytes, 64) : 0);

  const KernelTable table = kernels(p.dtype);
  plan.fn = (p.volume ? table.backward_3d : table.backward)[static_cast<int>(p.options.interpolation)]
                                                            [static_cast<int>(path_of(plan.lanes))];
  plan.build = builder(table, p.options, plan.lanes > 1 || plan.flat_taps ? TapForm::kFlat : TapForm::kStrided,
                       p.volume);
  if (fused) {
    switch (p.options.interpolation) {
      case Interpolation::kBicubic:  // (images only)
        plan.fused = fused_entry(p, table.fused_backward_bicubic, table.fused_backward_bicubic);
        break;
      case Interpolation::kNearest:
        plan.fused = fused_entry(p, table.fused_backward_nearest, table.fused_backward_nearest_3d);
        break;
      default:
        plan.fused = fused_entry(p, table.fused_backward, table.fused_backward_3d);
    }
    plan.window_reads = window_reads_pay();
  }
  return plan;
}

}  // namespace gridsampler::cpu
