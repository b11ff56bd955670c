// Python bindings of the gridsampler C++ API (nanobind).
//
// The extension only computes: it takes every tensor — inputs and the
// outputs it writes — as a DLPack-capable CPU array (NumPy, PyTorch, JAX, ...)
// without copying, with any strides (nanobind reports them in elements, as
// the library wants them). Allocating the outputs, in the caller's framework,
// is the job of the Python layer (gridsampler/__init__.py, gridsampler/torch.py).
//
// Images (4-D arrays) go to grid_sampler_2d and its backward, volumes (5-D)
// to grid_sampler_3d and its backward (forward_3d, backward_3d).
//
// Errors carry the library's message ("grid: last dimension must be 2, got
// 3"); their Python type says what kind of problem it is:
//   TypeError     an array of a dtype the library does not compute, or arrays
//                 of different dtypes (both found here, while the arrays are
//                 turned into views, since Python reports type problems so);
//   ValueError    anything else the library rejects: StatusCode
//                 kInvalidArgument, or kNullPointer;
//   RuntimeError  StatusCode kInternal (a bug or an allocation failure), or a
//                 code this module does not know.
// The type is chosen from the StatusCode alone, never from the message text.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>

#include "gridsampler/gridsampler.hpp"

namespace nb = nanobind;
namespace gs = gridsampler;

namespace {

using InArray = nb::ndarray<nb::ro, nb::device::cpu>;
using OutArray = nb::ndarray<nb::device::cpu>;

std::string dlpack_dtype_name(const nb::dlpack::dtype& dt) {
  using nb::dlpack::dtype_code;
  std::string kind;
  switch (static_cast<dtype_code>(dt.code)) {
    case dtype_code::Int: kind = "int"; break;
    case dtype_code::UInt: kind = "uint"; break;
    case dtype_code::Float: kind = "float"; break;
    case dtype_code::Bfloat: kind = "bfloat"; break;
    case dtype_code::Complex: kind = "complex"; break;
    case dtype_code::Bool: return "bool";
    default:
      return "dlpack type (code " + std::to_string(dt.code) + ", " + std::to_string(dt.bits) +
             " bits)";
  }
  std::string name = kind + std::to_string(dt.bits);
  if (dt.lanes != 1) name += "x" + std::to_string(dt.lanes);
  return name;
}

// uint16_as_bfloat16: NumPy has no bfloat16 that DLPack or the buffer
// protocol can carry (ml_dtypes' is a custom dtype), so the Python layer passes
// such arrays as uint16 views and sets this flag.
gs::DType to_dtype(const char* name, const nb::dlpack::dtype& dt, bool uint16_as_bfloat16) {
  using nb::dlpack::dtype_code;
  if (uint16_as_bfloat16 && dt.lanes == 1 && dt.bits == 16 &&
      dt.code == static_cast<uint8_t>(dtype_code::UInt)) {
    return gs::DType::kBFloat16;
  }
  if (dt.lanes == 1) {
    if (dt.code == static_cast<uint8_t>(dtype_code::Float)) {
      if (dt.bits == 16) return gs::DType::kFloat16;
      if (dt.bits == 32) return gs::DType::kFloat32;
      if (dt.bits == 64) return gs::DType::kFloat64;
    } else if (dt.code == static_cast<uint8_t>(dtype_code::Bfloat) && dt.bits == 16) {
      return gs::DType::kBFloat16;
    }
  }
  throw nb::type_error((std::string(name) + ": dtype " + dlpack_dtype_name(dt) +
                        " is not supported (expected float16, bfloat16, float32 or float64)")
                           .c_str());
}

// A view of rank `View::Shape`'s size (4: images, 5: volumes) of `a`;
// strides are in elements, as the library wants them.
template <class View, class Array>
View to_view(const char* name, const Array& a, bool uint16_as_bfloat16) {
  constexpr std::size_t rank = std::tuple_size<typename View::Shape>::value;
  if (a.ndim() != rank) {
    throw nb::value_error((std::string(name) + ": expected " + std::to_string(rank) +
                           " dimensions, got " + std::to_string(a.ndim()))
                              .c_str());
  }
  View v;
  v.data = a.data();
  v.dtype = to_dtype(name, a.dtype(), uint16_as_bfloat16);
  for (std::size_t d = 0; d < rank; ++d) {
    v.shape[d] = static_cast<int64_t>(a.shape(d));
    v.strides[d] = a.stride(d);
  }
  return v;
}

gs::Interpolation to_mode(std::string_view name) {
  if (auto m = gs::parse_interpolation(name)) return *m;
  throw nb::value_error(("mode: unknown value '" + std::string(name) +
                         "' (expected 'bilinear', 'nearest' or 'bicubic')")
                            .c_str());
}

gs::Padding to_padding(std::string_view name) {
  if (auto p = gs::parse_padding(name)) return *p;
  throw nb::value_error(("padding_mode: unknown value '" + std::string(name) +
                         "' (expected 'zeros', 'border' or 'reflection')")
                            .c_str());
}

gs::Options to_options(std::string_view mode, std::string_view padding, bool align_corners,
                       int num_threads) {
  gs::Options o;  // set by name: the struct may grow fields with defaults
  o.interpolation = to_mode(mode);
  o.padding = to_padding(padding);
  o.align_corners = align_corners;
  o.num_threads = num_threads;
  return o;
}

// Every array of a call shares the dtype of `input` (the library's rule,
// checked here first so that a mismatch is a TypeError); the message is the
// library's for the same rule.
void check_same_dtype(const char* name, gs::DType dtype, gs::DType input_dtype) {
  if (dtype == input_dtype) return;
  throw nb::type_error((std::string(name) + ": dtype " + std::string(gs::to_string(dtype)) +
                        " differs from input's " + std::string(gs::to_string(input_dtype)))
                           .c_str());
}

void raise_if_error(const gs::Status& s) {
  switch (s.code()) {
    case gs::StatusCode::kOk: return;
    case gs::StatusCode::kInvalidArgument:
    case gs::StatusCode::kNullPointer: throw nb::value_error(s.message().c_str());
    case gs::StatusCode::kInternal: break;
  }
  throw std::runtime_error(s.message());  // nanobind raises RuntimeError
}

// The library's entry points and view types for images (Rank 4) and volumes
// (Rank 5): one binding body serves both.
template <std::size_t Rank>
struct Sampler;

template <>
struct Sampler<4> {
  using In = gs::TensorView;
  using Out = gs::MutableTensorView;
  static gs::Status forward(In in, In grid, Out out, const gs::Options& o) {
    return gs::grid_sampler_2d(in, grid, out, o);
  }
  static gs::Status backward(In g, In in, In grid, Out dx, Out dgrid, const gs::Options& o,
                             gs::OutputMask mask) {
    return gs::grid_sampler_2d_backward(g, in, grid, dx, dgrid, o, mask);
  }
  static gs::Status double_backward(In gg_dx, In gg_dgrid, In g, In in, In grid, Out d_grad, Out d_input,
                                    Out d_grid, const gs::Options& o, gs::DoubleBackwardMask mask) {
    return gs::grid_sampler_2d_double_backward(gg_dx, gg_dgrid, g, in, grid, d_grad, d_input, d_grid, o, mask);
  }
};

template <>
struct Sampler<5> {
  using In = gs::VolumeView;
  using Out = gs::MutableVolumeView;
  static gs::Status forward(In in, In grid, Out out, const gs::Options& o) {
    return gs::grid_sampler_3d(in, grid, out, o);
  }
  static gs::Status backward(In g, In in, In grid, Out dx, Out dgrid, const gs::Options& o,
                             gs::OutputMask mask) {
    return gs::grid_sampler_3d_backward(g, in, grid, dx, dgrid, o, mask);
  }
  static gs::Status double_backward(In gg_dx, In gg_dgrid, In g, In in, In grid, Out d_grad, Out d_input,
                                    Out d_grid, const gs::Options& o, gs::DoubleBackwardMask mask) {
    return gs::grid_sampler_3d_double_backward(gg_dx, gg_dgrid, g, in, grid, d_grad, d_input, d_grid, o, mask);
  }
};

template <std::size_t Rank>
void forward(const InArray& input, const InArray& grid, const OutArray& output,
             std::string_view mode, std::string_view padding, bool align_corners, int num_threads,
             bool bf16) {
  using S = Sampler<Rank>;
  const gs::Options options = to_options(mode, padding, align_corners, num_threads);
  const auto in = to_view<typename S::In>("input", input, bf16);
  const auto gr = to_view<typename S::In>("grid", grid, bf16);
  const auto out = to_view<typename S::Out>("output", output, bf16);
  check_same_dtype("grid", gr.dtype, in.dtype);
  check_same_dtype("output", out.dtype, in.dtype);
  gs::Status s;
  {
    nb::gil_scoped_release release;
    s = S::forward(in, gr, out, options);
  }
  raise_if_error(s);
}

template <std::size_t Rank>
void backward(const InArray& grad, const InArray& input, const InArray& grid,
              const std::optional<OutArray>& dx, const std::optional<OutArray>& dgrid,
              std::string_view mode, std::string_view padding, bool align_corners, int num_threads,
              bool bf16) {
  using S = Sampler<Rank>;
  const gs::Options options = to_options(mode, padding, align_corners, num_threads);
  const auto g = to_view<typename S::In>("grad", grad, bf16);
  const auto in = to_view<typename S::In>("input", input, bf16);
  const auto gr = to_view<typename S::In>("grid", grid, bf16);
  gs::OutputMask mask;
  mask.input = dx.has_value();
  mask.grid = dgrid.has_value();
  typename S::Out dx_view, dgrid_view;  // empty when not wanted
  if (mask.input) dx_view = to_view<typename S::Out>("dx", *dx, bf16);
  if (mask.grid) dgrid_view = to_view<typename S::Out>("dgrid", *dgrid, bf16);
  check_same_dtype("grid", gr.dtype, in.dtype);
  check_same_dtype("grad", g.dtype, in.dtype);
  if (mask.input) check_same_dtype("dx", dx_view.dtype, in.dtype);
  if (mask.grid) check_same_dtype("dgrid", dgrid_view.dtype, in.dtype);
  gs::Status s;
  {
    nb::gil_scoped_release release;
    s = S::backward(g, in, gr, dx_view, dgrid_view, options, mask);
  }
  raise_if_error(s);
}

template <std::size_t Rank>
void double_backward(const std::optional<InArray>& gg_dx, const std::optional<InArray>& gg_dgrid,
                     const InArray& grad, const InArray& input, const InArray& grid,
                     const std::optional<OutArray>& d_grad, const std::optional<OutArray>& d_input,
                     const std::optional<OutArray>& d_grid, std::string_view mode, std::string_view padding,
                     bool align_corners, int num_threads, bool bf16) {
  using S = Sampler<Rank>;
  const gs::Options options = to_options(mode, padding, align_corners, num_threads);
  const auto g = to_view<typename S::In>("grad", grad, bf16);
  const auto in = to_view<typename S::In>("input", input, bf16);
  const auto gr = to_view<typename S::In>("grid", grid, bf16);
  typename S::In ggx{nullptr, in.dtype, {}, {}}, ggg{nullptr, in.dtype, {}, {}};  // absent: zeros
  if (gg_dx) ggx = to_view<typename S::In>("gg_dx", *gg_dx, bf16);
  if (gg_dgrid) ggg = to_view<typename S::In>("gg_dgrid", *gg_dgrid, bf16);
  gs::DoubleBackwardMask mask;
  mask.grad = d_grad.has_value();
  mask.input = d_input.has_value();
  mask.grid = d_grid.has_value();
  typename S::Out dg, di, dgr;  // empty when not wanted
  if (mask.grad) dg = to_view<typename S::Out>("d_grad", *d_grad, bf16);
  if (mask.input) di = to_view<typename S::Out>("d_input", *d_input, bf16);
  if (mask.grid) dgr = to_view<typename S::Out>("d_grid", *d_grid, bf16);
  check_same_dtype("grid", gr.dtype, in.dtype);
  check_same_dtype("grad", g.dtype, in.dtype);
  if (gg_dx) check_same_dtype("gg_dx", ggx.dtype, in.dtype);
  if (gg_dgrid) check_same_dtype("gg_dgrid", ggg.dtype, in.dtype);
  if (mask.grad) check_same_dtype("d_grad", dg.dtype, in.dtype);
  if (mask.input) check_same_dtype("d_input", di.dtype, in.dtype);
  if (mask.grid) check_same_dtype("d_grid", dgr.dtype, in.dtype);
  gs::Status s;
  {
    nb::gil_scoped_release release;
    s = S::double_backward(ggx, ggg, g, in, gr, dg, di, dgr, options, mask);
  }
  raise_if_error(s);
}

}  // namespace

NB_MODULE(_gridsampler, m) {
  m.doc() =
      "gridsampler C++ core: grid_sampler_2d/3d, GridSampler2DGrad and GridSampler3DGrad on the "
      "CPU";

  m.def("forward", &forward<4>, nb::arg("input"), nb::arg("grid"), nb::arg("output"),
        nb::arg("mode"), nb::arg("padding_mode"), nb::arg("align_corners"),
        nb::arg("num_threads") = 0, nb::arg("uint16_as_bfloat16") = false,
        "Writes grid_sample(input, grid) into `output` (N, C, Hout, Wout).");
  m.def("backward", &backward<4>, nb::arg("grad"), nb::arg("input"), nb::arg("grid"),
        nb::arg("dx").none(), nb::arg("dgrid").none(), nb::arg("mode"), nb::arg("padding_mode"),
        nb::arg("align_corners"), nb::arg("num_threads") = 0,
        nb::arg("uint16_as_bfloat16") = false,
        "Writes the gradients of grid_sample into `dx` (shape of input) and `dgrid` (shape of "
        "grid); None skips that output (output_mask).");
  m.def("forward_3d", &forward<5>, nb::arg("input"), nb::arg("grid"), nb::arg("output"),
        nb::arg("mode"), nb::arg("padding_mode"), nb::arg("align_corners"),
        nb::arg("num_threads") = 0, nb::arg("uint16_as_bfloat16") = false,
        "Volumes: writes grid_sample(input (N, C, Din, Hin, Win), grid (N, Dout, Hout, Wout, 3)) "
        "into `output` (N, C, Dout, Hout, Wout).");
  m.def("backward_3d", &backward<5>, nb::arg("grad"), nb::arg("input"), nb::arg("grid"),
        nb::arg("dx").none(), nb::arg("dgrid").none(), nb::arg("mode"), nb::arg("padding_mode"),
        nb::arg("align_corners"), nb::arg("num_threads") = 0,
        nb::arg("uint16_as_bfloat16") = false,
        "Volumes (GridSampler3DGrad): writes the gradients of the 5-D grid_sample into `dx` and "
        "`dgrid`; None skips that output (output_mask).");
  m.def("double_backward", &double_backward<4>, nb::arg("gg_dx").none(), nb::arg("gg_dgrid").none(),
        nb::arg("grad"), nb::arg("input"), nb::arg("grid"), nb::arg("d_grad").none(),
        nb::arg("d_input").none(), nb::arg("d_grid").none(), nb::arg("mode"), nb::arg("padding_mode"),
        nb::arg("align_corners"), nb::arg("num_threads") = 0, nb::arg("uint16_as_bfloat16") = false,
        "Writes the gradients of <gg_dx, dx> + <gg_dgrid, dgrid> (dx, dgrid = backward(grad, input, "
        "grid)) with respect to grad, input and grid into d_grad, d_input, d_grid; an absent gg_* "
        "counts as zeros, an absent output is not computed.");
  m.def("double_backward_3d", &double_backward<5>, nb::arg("gg_dx").none(), nb::arg("gg_dgrid").none(),
        nb::arg("grad"), nb::arg("input"), nb::arg("grid"), nb::arg("d_grad").none(),
        nb::arg("d_input").none(), nb::arg("d_grid").none(), nb::arg("mode"), nb::arg("padding_mode"),
        nb::arg("align_corners"), nb::arg("num_threads") = 0, nb::arg("uint16_as_bfloat16") = false,
        "Volumes: the double backward of the 5-D grid_sample (as double_backward).");
  m.def("max_threads", &gs::max_threads,
        "The most threads one call may use (num_threads above it is refused; OpenMP's default "
        "is capped at it): 4 per hardware thread, at least 64, within OMP_THREAD_LIMIT.");
  m.def("release_cached_memory", &gs::release_cached_memory,
        "Frees the buffers every thread keeps between calls (at most cached_memory_limit() "
        "bytes per calling thread); a buffer in use by a running call is freed when that call "
        "returns.");
  m.def("cached_memory_bytes", &gs::cached_memory_bytes,
        "Bytes held between calls in those buffers, by all threads together.");
  m.def("set_cached_memory_limit", &gs::set_cached_memory_limit, nb::arg("bytes"),
        "Bounds each calling thread's kept buffer from now on (0: keep nothing); idle buffers "
        "above the bound are freed at once.");
  m.def("cached_memory_limit", &gs::cached_memory_limit, "The bound on each calling thread's kept buffer.");
  m.def(
      "_readable", [](const InArray&) {}, nb::arg("array"),
      "Raises TypeError when `array` cannot be read in place (used for error messages).");
  m.def(
      "_raise_for_status",
      [](int code, const std::string& message) {
        raise_if_error(gs::Status(static_cast<gs::StatusCode>(code), message));
      },
      nb::arg("code"), nb::arg("message"),
      "Raises what a call raises when the library returns this StatusCode value and message "
      "(nothing for 0, ok); lets the tests reach codes no argument can provoke.");
}
