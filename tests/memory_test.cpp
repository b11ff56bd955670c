// Memory kept between calls: each calling thread's cached buffer stays within
// its bound, release_cached_memory() frees every thread's buffer (one in use
// when its call ends), results do not depend on it; and the planner bounds
// what pixel chunks cost.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "core/memory.hpp"
#include "core/validate.hpp"
#include "cpu/plan.hpp"
#include "cpu/tuning.hpp"
#include "gridsampler/gridsampler.hpp"

namespace {

namespace gs = gridsampler;
using gs::detail::kDefaultCachedBytes;

std::vector<float> uniform(std::size_t count, double lo, double hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<float> v(count);
  for (float& x : v) x = static_cast<float>(dist(rng));
  return v;
}

// A float32 backward problem and its outputs, contiguous.
struct Backward {
  gs::Shape4 in_shape, grid_shape, out_shape;
  std::vector<float> input, grid, grad, dx, dgrid;
  gs::Options options;

  Backward(int64_t n, int64_t c, int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w)
      : in_shape{n, c, in_h, in_w}, grid_shape{n, out_h, out_w, 2}, out_shape{n, c, out_h, out_w} {
    input = uniform(static_cast<std::size_t>(n * c * in_h * in_w), -1, 1, 1);
    grid = uniform(static_cast<std::size_t>(n * out_h * out_w * 2), -1.1, 1.1, 2);
    grad = uniform(static_cast<std::size_t>(n * c * out_h * out_w), -1, 1, 3);
    dx.assign(input.size(), 0.0f);
    dgrid.assign(grid.size(), 0.0f);
  }
  gs::TensorView grad_view() const { return gs::TensorView::contiguous(grad.data(), gs::DType::kFloat32, out_shape); }
  gs::TensorView input_view() const { return gs::TensorView::contiguous(input.data(), gs::DType::kFloat32, in_shape); }
  gs::TensorView grid_view() const { return gs::TensorView::contiguous(grid.data(), gs::DType::kFloat32, grid_shape); }

  void run() {
    const gs::Status s = gs::grid_sampler_2d_backward(
        grad_view(), input_view(), grid_view(),
        gs::MutableTensorView::contiguous(dx.data(), gs::DType::kFloat32, in_shape),
        gs::MutableTensorView::contiguous(dgrid.data(), gs::DType::kFloat32, grid_shape), options);
    ASSERT_TRUE(s.ok()) << s.message();
  }
  std::size_t workspace_bytes() {
    gs::detail::Problem p;
    const gs::Status s = gs::detail::validate_backward(
        grad_view(), input_view(), grid_view(),
        gs::MutableTensorView::contiguous(dx.data(), gs::DType::kFloat32, in_shape),
        gs::MutableTensorView::contiguous(dgrid.data(), gs::DType::kFloat32, grid_shape), options, {}, &p);
    EXPECT_TRUE(s.ok()) << s.message();
    return gs::cpu::plan_backward(p).workspace_bytes;
  }
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Memory, BackwardKeepsItsWorkspaceUntilReleased) {
  gs::release_cached_memory();
  EXPECT_EQ(gs::cached_memory_bytes(), 0u);
  Backward b(2, 16, 64, 64, 32, 32);  // interleaved: per-thread accumulators and values
  const std::size_t workspace = b.workspace_bytes();
  ASSERT_GT(workspace, 0u);
  ASSERT_EQ(gs::cached_memory_limit(), kDefaultCachedBytes);
  ASSERT_LE(workspace, kDefaultCachedBytes);
  b.run();
  const std::vector<float> dx = b.dx, dgrid = b.dgrid;
  EXPECT_GE(gs::cached_memory_bytes(), workspace);
  EXPECT_LE(gs::cached_memory_bytes(), kDefaultCachedBytes);

  gs::release_cached_memory();
  EXPECT_EQ(gs::cached_memory_bytes(), 0u);
  std::fill(b.dx.begin(), b.dx.end(), 0.0f);
  std::fill(b.dgrid.begin(), b.dgrid.end(), 0.0f);
  b.run();  // in a fresh buffer
  EXPECT_TRUE(same_bits(b.dx, dx));
  EXPECT_TRUE(same_bits(b.dgrid, dgrid));
  EXPECT_GE(gs::cached_memory_bytes(), workspace);
  b.run();  // in the cached one
  EXPECT_TRUE(same_bits(b.dx, dx));
  EXPECT_TRUE(same_bits(b.dgrid, dgrid));
  gs::release_cached_memory();
  EXPECT_EQ(gs::cached_memory_bytes(), 0u);
}

// Sets a bound for one test's scope, and puts the default back.
struct ScopedLimit {
  explicit ScopedLimit(std::size_t bytes) { gs::set_cached_memory_limit(bytes); }
  ~ScopedLimit() { gs::set_cached_memory_limit(kDefaultCachedBytes); }
};

// The bound applies from the moment it is set: a kept buffer above a new,
// lower bound goes at once; a call whose workspace exceeds the bound frees
// it on return; 0 keeps nothing; a higher bound keeps it again. The results
// are the same bits throughout.
TEST(Memory, LimitBoundsWhatIsKept) {
  gs::release_cached_memory();
  Backward b(2, 16, 64, 64, 32, 32);
  const std::size_t workspace = b.workspace_bytes();
  b.run();
  const std::vector<float> dx = b.dx, dgrid = b.dgrid;
  ASSERT_GE(gs::cached_memory_bytes(), workspace);
  {
    const ScopedLimit below(workspace - 1);
    EXPECT_EQ(gs::cached_memory_limit(), workspace - 1);
    EXPECT_EQ(gs::cached_memory_bytes(), 0u);  // freed by the new bound
    b.run();
    EXPECT_EQ(gs::cached_memory_bytes(), 0u);  // freed on return
    EXPECT_TRUE(same_bits(b.dx, dx));
    EXPECT_TRUE(same_bits(b.dgrid, dgrid));
    gs::set_cached_memory_limit(0);
    b.run();
    EXPECT_EQ(gs::cached_memory_bytes(), 0u);
    gs::set_cached_memory_limit(workspace);
    b.run();
    EXPECT_GE(gs::cached_memory_bytes(), workspace);  // exactly at the bound: kept
    EXPECT_TRUE(same_bits(b.dx, dx));
    EXPECT_TRUE(same_bits(b.dgrid, dgrid));
  }
  EXPECT_EQ(gs::cached_memory_limit(), kDefaultCachedBytes);
  EXPECT_GE(gs::cached_memory_bytes(), workspace);  // a higher bound keeps it
  gs::release_cached_memory();
}

// The forward's channel-minor copies of a large plane exceed the bound: the
// call gets them and frees them on return.
TEST(Memory, BufferOverTheBoundIsNotKept) {
  // (An output large enough to be sampled through a channel-minor copy:
  // tiny ones sample the planes.)
  const int64_t c = 16, side = 768, out = 288;
  gs::detail::Problem p;
  p.n = 1;
  p.c = c;
  p.in_h = p.in_w = side;
  p.out_h = p.out_w = out;
  p.options.num_threads = 1;
  const ScopedLimit limit(std::size_t{16} << 20);
  ASSERT_GT(gs::cpu::plan_forward(p).copy_bytes, gs::cached_memory_limit());

  const std::vector<float> input = uniform(static_cast<std::size_t>(c * side * side), -1, 1, 4);
  const std::vector<float> grid = uniform(static_cast<std::size_t>(out * out * 2), -1, 1, 5);
  std::vector<float> output(static_cast<std::size_t>(c * out * out), 0.0f);
  gs::release_cached_memory();
  gs::Options options;
  options.num_threads = 1;
  const gs::Status s = gs::grid_sampler_2d(
      gs::TensorView::contiguous(input.data(), gs::DType::kFloat32, {1, c, side, side}),
      gs::TensorView::contiguous(grid.data(), gs::DType::kFloat32, {1, out, out, 2}),
      gs::MutableTensorView::contiguous(output.data(), gs::DType::kFloat32, {1, c, out, out}), options);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(gs::cached_memory_bytes(), 0u);
  // It did sample: the output is not still all zeros.
  EXPECT_NE(std::count(output.begin(), output.end(), 0.0f), static_cast<std::ptrdiff_t>(output.size()));
}

// Another thread's buffer is freed by a release from this one, and when the
// thread exits.
TEST(Memory, ReleaseReachesOtherThreads) {
  gs::release_cached_memory();
  std::mutex m;
  std::condition_variable cv;
  int stage = 0;  // 1: worker ran once; 2: released, run again; 3: worker ran again; 4: exit
  auto wait_for = [&](int s) {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return stage >= s; });
  };
  auto advance = [&](int s) {
    {
      std::lock_guard<std::mutex> lock(m);
      stage = s;
    }
    cv.notify_all();
  };
  Backward b(2, 16, 64, 64, 32, 32);
  std::vector<float> first_dx, first_dgrid;
  std::thread worker([&] {
    b.run();
    first_dx = b.dx;
    first_dgrid = b.dgrid;
    advance(1);
    wait_for(2);
    b.run();
    advance(3);
    wait_for(4);
  });
  wait_for(1);
  EXPECT_GT(gs::cached_memory_bytes(), 0u);  // the worker's, still alive
  gs::release_cached_memory();
  EXPECT_EQ(gs::cached_memory_bytes(), 0u);
  advance(2);
  wait_for(3);
  EXPECT_GT(gs::cached_memory_bytes(), 0u);
  advance(4);
  worker.join();
  EXPECT_EQ(gs::cached_memory_bytes(), 0u);  // freed at the thread's exit
  EXPECT_TRUE(same_bits(b.dx, first_dx));
  EXPECT_TRUE(same_bits(b.dgrid, first_dgrid));
}

// A buffer in use survives a release (the call owns it) and is freed when
// its scope ends; a nested buffer on the same thread is a separate one.
// (Through the internal calls: this program also links the aclnn library,
// whose own copy of the core may answer the public ones.)
TEST(Memory, BufferInUseIsFreedWhenItsCallEnds) {
  gs::detail::release_cached_buffers();
  constexpr std::size_t kBytes = std::size_t{1} << 20;
  {
    const gs::detail::CachedBuffer outer(kBytes);
    ASSERT_NE(outer.data(), nullptr);
    EXPECT_GE(gs::detail::cached_buffer_bytes(), kBytes);
    gs::detail::release_cached_buffers();
    EXPECT_GE(gs::detail::cached_buffer_bytes(), kBytes);
    std::memset(outer.data(), 1, kBytes);  // still ours
    {
      const gs::detail::CachedBuffer inner(kBytes);
      ASSERT_NE(inner.data(), nullptr);
      EXPECT_NE(inner.data(), outer.data());
      std::memset(inner.data(), 2, kBytes);
      EXPECT_EQ(static_cast<const unsigned char*>(outer.data())[kBytes - 1], 1);
    }
  }
  EXPECT_EQ(gs::detail::cached_buffer_bytes(), 0u);
  {
    const gs::detail::CachedBuffer none(0);
    EXPECT_EQ(none.data(), nullptr);
  }
  EXPECT_EQ(gs::detail::cached_buffer_bytes(), 0u);
}

gs::cpu::BackwardPlan backward_plan(int64_t n, int64_t c, int64_t in_side, int64_t out_side,
                                    gs::Interpolation mode = gs::Interpolation::kBilinear) {
  gs::detail::Problem p;
  p.n = n;
  p.c = c;
  p.in_h = p.in_w = in_side;
  p.out_h = p.out_w = out_side;
  p.options.interpolation = mode;
  p.options.num_threads = 2;
  return gs::cpu::plan_backward(p);
}

// Pixel chunks (per-chunk dx accumulators and a shared input copy) only
// where they take at most kMaxChunkBytes and no more than the outputs
// (dx and dgrid): small problems with large outputs still get them, to feed
// the threads; the others run one task per (n, block) instead.
TEST(Memory, PixelChunksAreBounded) {
  const gs::cpu::BackwardPlan large = backward_plan(4, 32, 256, 256);
  EXPECT_EQ(large.pixel_chunks, 1);
  EXPECT_EQ(large.dx_partials, 0u);
  EXPECT_FALSE(large.shared_values);
  EXPECT_EQ(backward_plan(3, 32, 128, 256).pixel_chunks, 1);
  // Chunks would cost more than the outputs: 4 and 2 tasks stay whole.
  EXPECT_EQ(backward_plan(4, 16, 64, 64, gs::Interpolation::kBicubic).pixel_chunks, 1);
  EXPECT_EQ(backward_plan(2, 3, 384, 384).pixel_chunks, 1);
  EXPECT_EQ(backward_plan(1, 20, 40, 64).pixel_chunks, 1);

  for (const gs::cpu::BackwardPlan& plan : {backward_plan(8, 1, 256, 256), backward_plan(2, 3, 32, 256),
                                            backward_plan(1, 1, 768, 768)}) {
    EXPECT_GT(plan.pixel_chunks, 1) << plan.problem.n << "," << plan.problem.c << "," << plan.problem.in_h;
    const gs::detail::Problem& p = plan.problem;
    const uint64_t tasks = static_cast<uint64_t>(p.n * plan.channel_blocks);
    const uint64_t copies = static_cast<uint64_t>(plan.pixel_chunks) + (plan.shared_values ? 1 : 0);
    const uint64_t chunk_bytes = tasks * copies * static_cast<uint64_t>(plan.accumulator_elems) * sizeof(float);
    const uint64_t outputs = static_cast<uint64_t>(p.n * (p.c * p.in_h * p.in_w + 2 * p.out_h * p.out_w)) * sizeof(float);
    EXPECT_LE(chunk_bytes, std::min(gs::cpu::kMaxChunkBytes, outputs));
  }
}

// A single (n, block) task would leave every thread but one idle: it takes
// two chunks past kMaxChunkBytes, within kMaxSingleTaskChunkBytes; two such
// tasks do not. The chunks follow the shape, so any team gives the same bits.
TEST(Memory, SingleTaskTakesTwoChunks) {
  const gs::cpu::BackwardPlan rgb = backward_plan(1, 3, 1024, 1024);
  EXPECT_EQ(rgb.pixel_chunks, 2);
  EXPECT_TRUE(rgb.shared_values);
  const uint64_t rgb_bytes = 3 * static_cast<uint64_t>(rgb.accumulator_elems) * sizeof(float);
  EXPECT_GT(rgb_bytes, gs::cpu::kMaxChunkBytes);
  EXPECT_LE(rgb_bytes, gs::cpu::kMaxSingleTaskChunkBytes);
  EXPECT_EQ(rgb.threads, 2);
  EXPECT_EQ(backward_plan(2, 3, 1024, 1024).pixel_chunks, 1);  // two tasks feed two threads
  const gs::cpu::BackwardPlan grey = backward_plan(1, 1, 2048, 2048);  // planes: two partials
  EXPECT_EQ(grey.pixel_chunks, 2);
  EXPECT_GT(2 * static_cast<uint64_t>(grey.accumulator_elems) * sizeof(float), gs::cpu::kMaxChunkBytes);
  EXPECT_EQ(backward_plan(1, 3, 4096, 4096).pixel_chunks, 1);  // past the bound (and interleaving)

  Backward b(1, 3, 768, 768, 768, 768);
  ASSERT_GT(b.workspace_bytes(), gs::cpu::kMaxChunkBytes);
  std::vector<float> dx, dgrid;
  for (int threads : {1, 2, 3}) {
    b.options.num_threads = threads;
    std::fill(b.dx.begin(), b.dx.end(), 0.0f);
    std::fill(b.dgrid.begin(), b.dgrid.end(), 0.0f);
    b.run();
    if (threads == 1) {
      dx = b.dx;
      dgrid = b.dgrid;
      EXPECT_NE(std::count(dx.begin(), dx.end(), 0.0f), static_cast<std::ptrdiff_t>(dx.size()));
    } else {
      EXPECT_TRUE(same_bits(b.dx, dx)) << threads << " threads";
      EXPECT_TRUE(same_bits(b.dgrid, dgrid)) << threads << " threads";
    }
  }
}

// A backward whose taps touch little of each plane (downsampling by 3 or
// more per side; by 2 for 2 to 7 channels) runs on planes: dx accumulates in dx itself and the input
// values are read where they lie, so the call needs no scratch.
// Fuller coverage keeps the channel-minor blocks.
TEST(Memory, SparseScattersNeedNoScratch) {
  auto resize = [](int64_t c, int64_t side, int64_t out_side, gs::Interpolation mode) {
    gs::detail::Problem p;
    p.n = 2;
    p.c = c;
    p.in_h = p.in_w = side;
    p.out_h = p.out_w = out_side;
    p.input_strides = {c * side * side, side * side, side, 1};
    p.dx_strides = p.input_strides;
    p.options.interpolation = mode;
    p.options.num_threads = 2;
    return gs::cpu::plan_backward(p);
  };
  for (const auto& plan :
       {resize(3, 1024, 256, gs::Interpolation::kBicubic),  // 16 taps x 1/16
        resize(2, 512, 170, gs::Interpolation::kBilinear), resize(7, 512, 128, gs::Interpolation::kNearest),
        resize(32, 512, 128, gs::Interpolation::kBilinear)}) {  // 16-lane blocks: 4 x 4 taps x 1/16
    EXPECT_EQ(plan.lanes, 1) << plan.problem.c;
    EXPECT_TRUE(plan.direct_dx) << plan.problem.c;
    // No scratch; many channels in several blocks add up dgrid afterwards.
    const uint64_t dgrid_partials = plan.channel_blocks == 1 ? 0 : 2 * 5 * 128 * 128 * 2 * sizeof(float) + 64;
    EXPECT_EQ(plan.workspace_bytes, dgrid_partials) << plan.problem.c;
  }
  // A quarter of the plane: planes for narrow blocks, 16-lane blocks stay.
  EXPECT_EQ(resize(3, 512, 256, gs::Interpolation::kBilinear).lanes, 1);
  EXPECT_EQ(resize(16, 512, 256, gs::Interpolation::kBilinear).lanes, gs::cpu::kLanes);
  EXPECT_EQ(resize(3, 512, 170, gs::Interpolation::kBicubic).lanes, gs::cpu::kNarrowLanes);   // 16 taps x 1/9
  EXPECT_EQ(resize(16, 512, 128, gs::Interpolation::kBicubic).lanes, gs::cpu::kLanes);        // 4 x 16 taps x 1/16
}

}  // namespace
