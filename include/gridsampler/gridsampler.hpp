// gridsampler: 2-D and 3-D grid sampling (PyTorch's grid_sample) and their
// gradients (GridSampler2DGrad, GridSampler3DGrad) on the CPU.
//
// Contract of every call in this header:
//   * Tensors are strided views, 4-D for images and 5-D for volumes; shapes
//     and strides count elements, not bytes. Any strides are accepted (NCHW-contiguous, channels-last, sliced,
//     transposed, negative); results do not depend on the layout.
//   * All tensors of one call share one dtype. float16 and bfloat16 are
//     computed and accumulated in float32 and rounded once, to nearest even.
//   * The library reads only the inputs and writes only the outputs it was
//     asked for. On any error nothing is written and the returned Status
//     names the tensor and the rule it broke.
//   * Empty problems (N, C or an output dimension = 0) succeed; dx is then
//     zeros.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#if defined(_WIN32)
#define GRIDSAMPLER_API
#else
#define GRIDSAMPLER_API __attribute__((visibility("default")))
#endif

namespace gridsampler {

enum class DType : int32_t { kFloat16 = 0, kBFloat16 = 1, kFloat32 = 2, kFloat64 = 3 };

// The integer values are those of PyTorch and of the aclnn interface.
enum class Interpolation : int64_t { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum class Padding : int64_t { kZeros = 0, kBorder = 1, kReflection = 2 };

enum class StatusCode : int32_t {
  kOk = 0,
  kInvalidArgument = 1,  // a shape, stride, dtype or attribute breaks a rule
  kNullPointer = 2,      // a required data pointer is null
  kInternal = 3,         // a bug or an allocation failure inside the library
};

class GRIDSAMPLER_API Status {
 public:
  Status() = default;  // ok
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  // Empty when ok(); otherwise "<tensor>: <rule>", e.g.
  // "grid: last dimension must be 2, got 3".
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

using Shape4 = std::array<int64_t, 4>;
using Shape5 = std::array<int64_t, 5>;

// Strides (in elements) of a densely packed row-major tensor of `shape`.
GRIDSAMPLER_API Shape4 contiguous_strides(const Shape4& shape);
// Strides of a logical (N, C, H, W) tensor stored as N, H, W, C in memory.
GRIDSAMPLER_API Shape4 channels_last_strides(const Shape4& shape);
// The same for volumes: row-major (N, C, D, H, W), and N, D, H, W, C in
// memory (NDHWC, PyTorch's channels_last_3d). Own names rather than
// overloads, so that a braced shape keeps choosing the 4-D function.
GRIDSAMPLER_API Shape5 contiguous_strides_5d(const Shape5& shape);
GRIDSAMPLER_API Shape5 channels_last_strides_5d(const Shape5& shape);

// A strided view of memory the caller owns, of rank 4 (images) or 5
// (volumes). `Ptr` is `const void*` for inputs and `void*` for outputs; an
// output view converts to an input view.
template <class Ptr, std::size_t Rank = 4>
struct BasicTensorView {
  static_assert(Rank == 4 || Rank == 5, "gridsampler views are 4-D or 5-D");
  using Shape = std::array<int64_t, Rank>;
  Ptr data = nullptr;
  DType dtype = DType::kFloat32;
  Shape shape{};
  Shape strides{};

  static BasicTensorView contiguous(Ptr data, DType dtype, const Shape& shape) {
    if constexpr (Rank == 4) {
      return {data, dtype, shape, contiguous_strides(shape)};
    } else {
      return {data, dtype, shape, contiguous_strides_5d(shape)};
    }
  }
  static BasicTensorView channels_last(Ptr data, DType dtype, const Shape& shape) {
    if constexpr (Rank == 4) {
      return {data, dtype, shape, channels_last_strides(shape)};
    } else {
      return {data, dtype, shape, channels_last_strides_5d(shape)};
    }
  }
  operator BasicTensorView<const void*, Rank>() const {  // NOLINT(google-explicit-constructor)
    return {data, dtype, shape, strides};
  }
};
using TensorView = BasicTensorView<const void*>;
using MutableTensorView = BasicTensorView<void*>;
using VolumeView = BasicTensorView<const void*, 5>;
using MutableVolumeView = BasicTensorView<void*, 5>;

struct Options {
  Interpolation interpolation = Interpolation::kBilinear;
  Padding padding = Padding::kZeros;
  bool align_corners = false;
  // Threads to use, at most max_threads() (more is an invalid argument); 0
  // means OpenMP's default (OMP_NUM_THREADS, omp_set_num_threads), capped at
  // max_threads(). A call never runs more threads than it has tasks. Results
  // are bit-for-bit the same for any value.
  int num_threads = 0;
};

// The most threads one call may use: 4 per hardware thread the process may
// run on (omp_get_num_procs()), at least 64, and never more than OpenMP's
// thread limit (omp_get_thread_limit(), OMP_THREAD_LIMIT). Fixed at the first
// call. It keeps any thread count from taking the process down: OpenMP
// aborts or crashes on teams of ~10^5 threads, and per-thread workspaces
// grow with the team.
GRIDSAMPLER_API int max_threads();

// Which gradients grid_sampler_2d_backward and grid_sampler_3d_backward
// compute. An output that is not
// wanted is neither validated, read nor written (its view may be empty).
struct OutputMask {
  bool input = true;  // dx
  bool grid = true;   // dgrid
};

// output[n, c, h, w] = sample of input[n, c] at grid[n, h, w, :].
//   input (N, C, Hin, Win), Hin, Win > 0; grid (N, Hout, Wout, 2) holding
//   (x, y) in [-1, 1]; output (N, C, Hout, Wout).
GRIDSAMPLER_API Status grid_sampler_2d(TensorView input, TensorView grid, MutableTensorView output,
                                       const Options& options = {});

// GridSampler2DGrad: gradients of grid_sampler_2d with respect to input
// (dx, shape of input) and grid (dgrid, shape of grid), given the gradient
// `grad` (N, C, Hout, Wout) of its output. dx is overwritten, not added to.
GRIDSAMPLER_API Status grid_sampler_2d_backward(TensorView grad, TensorView input, TensorView grid,
                                                MutableTensorView dx, MutableTensorView dgrid,
                                                const Options& options = {},
                                                OutputMask mask = {});

// Volumes: PyTorch's 5-D grid_sample. output[n, c, d, h, w] = sample of
// input[n, c] at grid[n, d, h, w, :].
//   input (N, C, Din, Hin, Win), Din, Hin, Win > 0; grid (N, Dout, Hout,
//   Wout, 3) holding (x, y, z) in [-1, 1], x indexing W, y H and z D;
//   output (N, C, Dout, Hout, Wout).
// Each component is unnormalised, padded and differentiated as in 2-D along
// its own axis. bilinear is trilinear (8 taps), bicubic tricubic (64 taps,
// padded per tap), nearest rounds each component half to even.
GRIDSAMPLER_API Status grid_sampler_3d(VolumeView input, VolumeView grid, MutableVolumeView output,
                                       const Options& options = {});

// GridSampler3DGrad: gradients of grid_sampler_3d with respect to input (dx,
// shape of input) and grid (dgrid, shape of grid), given the gradient `grad`
// (N, C, Dout, Hout, Wout) of its output. Same rules as the 2-D backward.
GRIDSAMPLER_API Status grid_sampler_3d_backward(VolumeView grad, VolumeView input, VolumeView grid,
                                                MutableVolumeView dx, MutableVolumeView dgrid,
                                                const Options& options = {}, OutputMask mask = {});

// Which gradients grid_sampler_2d_double_backward and
// grid_sampler_3d_double_backward compute; the same rule
// as OutputMask for what is not wanted.
struct DoubleBackwardMask {
  bool grad = true;   // d_grad
  bool input = true;  // d_input
  bool grid = true;   // d_grid
};

// The double backward: differentiates grid_sampler_2d_backward itself. With
// (dx, dgrid) = grid_sampler_2d_backward(grad, input, grid) and incoming
// gradients gg_dx (shape of input) and gg_dgrid (shape of grid), computes the
// gradients of <gg_dx, dx> + <gg_dgrid, dgrid> with respect to grad (d_grad,
// shape of grad), input (d_input, shape of input) and grid (d_grid, shape of
// grid): what autograd needs to take a gradient of a gradient.
//   * gg_dx or gg_dgrid may be absent: a view with null data counts as zeros
//     (its shape is then not checked). Without gg_dgrid the call is a
//     forward of gg_dx (d_grad) and a backward's dgrid with gg_dx as the
//     input (d_grid); d_input is zero.
//   * nearest: d_grad is the nearest sample of gg_dx; d_input and d_grid are
//     zero (the weights are piecewise constant).
//   * The coordinate policy of the first order holds: where dgrid has a zero
//     factor (clipped at a border, non-finite coordinate), d_input and d_grid
//     get none of that component's terms either.
// Outputs are overwritten. Same precision rules and thread-count
// independence as the other calls.
GRIDSAMPLER_API Status grid_sampler_2d_double_backward(TensorView gg_dx, TensorView gg_dgrid, TensorView grad,
                                                       TensorView input, TensorView grid,
                                                       MutableTensorView d_grad, MutableTensorView d_input,
                                                       MutableTensorView d_grid, const Options& options = {},
                                                       DoubleBackwardMask mask = {});

// The double backward of volumes: differentiates grid_sampler_3d_backward,
// with the contract of grid_sampler_2d_double_backward over 5-D views
// (gg_dx and d_input shaped like input, gg_dgrid and d_grid like grid, d_grad
// like grad). Trilinear weights have only mixed second derivatives; tricubic
// has all six.
GRIDSAMPLER_API Status grid_sampler_3d_double_backward(VolumeView gg_dx, VolumeView gg_dgrid, VolumeView grad,
                                                       VolumeView input, VolumeView grid,
                                                       MutableVolumeView d_grad, MutableVolumeView d_input,
                                                       MutableVolumeView d_grid, const Options& options = {},
                                                       DoubleBackwardMask mask = {});

// Memory kept between calls. A thread that calls the library keeps one
// buffer (the backward's workspace, the forward's channel-minor copies) for
// its next call, so that calls do not page-fault fresh memory: at most
// cached_memory_limit() bytes per calling thread (128 MiB unless set); a call
// that needs more frees it on return. A thread's buffer is freed when the
// thread exits.
//
// release_cached_memory() frees the buffers of every thread, and returns
// freed heap memory to the system where the C library allows (glibc). It
// may be called from any thread at any time: a buffer in use by a running
// call is freed when that call returns instead. Results do not depend on it.
GRIDSAMPLER_API void release_cached_memory();
// Bytes currently held in those buffers, by all threads together.
GRIDSAMPLER_API std::size_t cached_memory_bytes();
// The bound on each calling thread's buffer, for every thread from now on;
// idle buffers above it are freed at once, one in use when its call returns.
// 0 keeps nothing (every call allocates, and frees on return). Results do not
// depend on it.
GRIDSAMPLER_API void set_cached_memory_limit(std::size_t bytes);
GRIDSAMPLER_API std::size_t cached_memory_limit();

// Names used by the command line, the Python bindings and messages.
GRIDSAMPLER_API std::string_view to_string(DType dtype);  // "float16", ...
GRIDSAMPLER_API std::string_view to_string(Interpolation mode);  // "bilinear", ...
GRIDSAMPLER_API std::string_view to_string(Padding padding);     // "zeros", ...
GRIDSAMPLER_API std::optional<Interpolation> parse_interpolation(std::string_view name);
GRIDSAMPLER_API std::optional<Padding> parse_padding(std::string_view name);
// Accepts "f16"/"float16", "bf16"/"bfloat16", "f32"/"float32", "f64"/"float64".
GRIDSAMPLER_API std::optional<DType> parse_dtype(std::string_view name);
GRIDSAMPLER_API std::size_t dtype_size(DType dtype);  // bytes per element

}  // namespace gridsampler
