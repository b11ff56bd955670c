#include "core/validate.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "core/coords.hpp"

namespace gridsampler::detail {
namespace {

Status invalid(const std::string& message) { return {StatusCode::kInvalidArgument, message}; }

template <std::size_t Rank>
using ShapeR = std::array<int64_t, Rank>;

template <std::size_t Rank>
std::string shape_str(const ShapeR<Rank>& s) {
  std::ostringstream os;
  os << '(';
  for (std::size_t d = 0; d < Rank; ++d) os << (d ? ", " : "") << s[d];
  os << ')';
  return os.str();
}

bool known_dtype(DType d) {
  return d == DType::kFloat16 || d == DType::kBFloat16 || d == DType::kFloat32 ||
         d == DType::kFloat64;
}

// Byte range [lo, hi) a non-empty view touches, relative to its data pointer.
struct Span {
  int64_t lo = 0, hi = 0;
};

// Checks one tensor on its own: dtype, dimensions, element count and byte
// span within int64_t, data present. Sets *span and *numel.
template <std::size_t Rank>
Status check_tensor(const char* name, DType dtype, const ShapeR<Rank>& shape, const ShapeR<Rank>& strides,
                    const void* data, Span* span, int64_t* numel) {
  if (!known_dtype(dtype)) {
    return invalid(std::string(name) + ": unknown dtype value " +
                   std::to_string(static_cast<int32_t>(dtype)));
  }
  int64_t count = 1;
  bool overflow = false;
  for (std::size_t d = 0; d < Rank; ++d) {
    if (shape[d] < 0) {
      return invalid(std::string(name) + ": dimension " + std::to_string(d) + " is negative (" +
                     std::to_string(shape[d]) + ")");
    }
    if (shape[d] > coords::kMaxExtent) {
      return invalid(std::string(name) + ": dimension " + std::to_string(d) + " is " +
                     std::to_string(shape[d]) + ", more than the supported 2^40");
    }
    overflow = overflow || __builtin_mul_overflow(count, shape[d], &count);
  }
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) {
    *numel = 0;
    *span = {};
    return Status::Ok();
  }
  if (overflow) return invalid(std::string(name) + ": element count overflows 64 bits");
  const int64_t elem = static_cast<int64_t>(dtype_size(dtype));
  int64_t lo = 0, hi = 0;  // element offsets of the lowest and highest element
  if (!stride_reach(shape, strides, 0, &lo, &hi)) {
    return invalid(std::string(name) + ": strides address more than 2^63 bytes");
  }
  int64_t lo_bytes = 0, hi_bytes = 0;
  if (__builtin_mul_overflow(lo, elem, &lo_bytes) || __builtin_add_overflow(hi, 1, &hi) ||
      __builtin_mul_overflow(hi, elem, &hi_bytes)) {
    return invalid(std::string(name) + ": strides address more than 2^63 bytes");
  }
  if (data == nullptr) {
    return {StatusCode::kNullPointer, std::string(name) + ": data is null but the tensor has " +
                                          std::to_string(count) + " elements"};
  }
  // Kernels load whole elements: a pointer off the element size is misaligned
  // access (undefined behaviour), refused rather than handled slowly.
  if (reinterpret_cast<uintptr_t>(data) % static_cast<uintptr_t>(elem) != 0) {
    return invalid(std::string(name) + ": data is not aligned to its element size (" +
                   std::to_string(elem) + " bytes)");
  }
  *numel = count;
  *span = {lo_bytes, hi_bytes};
  return Status::Ok();
}

// An output must not store two elements at one address: with the dimensions
// of size > 1 sorted by |stride|, each stride must step past everything the
// smaller ones reach.
template <std::size_t Rank>
bool self_overlaps(const ShapeR<Rank>& shape, const ShapeR<Rank>& strides) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (|stride|, size)
  for (std::size_t d = 0; d < Rank; ++d) {
    if (shape[d] > 1) dims.emplace_back(std::llabs(strides[d]), shape[d]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;  // max offset reachable with the dims so far
  for (const auto& [stride, size] : dims) {
    if (stride <= reach) return true;
    reach += stride * (size - 1);  // cannot overflow: check_tensor bounded it
  }
  return false;
}

struct Checked {
  const char* name;
  const void* data;
  Span span;
  int64_t numel;
};

bool overlap(const Checked& a, const Checked& b) {
  if (a.numel == 0 || b.numel == 0) return false;
  const auto base_a = reinterpret_cast<uintptr_t>(a.data);
  const auto base_b = reinterpret_cast<uintptr_t>(b.data);
  const uintptr_t a_lo = base_a + static_cast<uintptr_t>(a.span.lo);
  const uintptr_t a_hi = base_a + static_cast<uintptr_t>(a.span.hi);
  const uintptr_t b_lo = base_b + static_cast<uintptr_t>(b.span.lo);
  const uintptr_t b_hi = base_b + static_cast<uintptr_t>(b.span.hi);
  return a_lo < b_hi && b_lo < a_hi;
}

Status check_options(const Options& options) {
  const auto mode = static_cast<int64_t>(options.interpolation);
  if (mode < 0 || mode > 2) {
    return invalid("interpolation_mode: unknown value " + std::to_string(mode) +
                   " (expected 0 bilinear, 1 nearest or 2 bicubic)");
  }
  const auto pad = static_cast<int64_t>(options.padding);
  if (pad < 0 || pad > 2) {
    return invalid("padding_mode: unknown value " + std::to_string(pad) +
                   " (expected 0 zeros, 1 border or 2 reflection)");
  }
  if (options.num_threads < 0) {
    return invalid("num_threads: must be 0 (all) or positive, got " +
                   std::to_string(options.num_threads));
  }
  if (options.num_threads > max_threads()) {
    return invalid("num_threads: at most " + std::to_string(max_threads()) + " on this machine, got " +
                   std::to_string(options.num_threads));
  }
  return Status::Ok();
}

// Input and grid: the rules shared by forward and backward, for images
// (Rank 4: grid (N, Hout, Wout, 2)) and volumes (Rank 5: grid (N, Dout, Hout,
// Wout, 3)).
template <std::size_t Rank>
Status check_input_grid(const BasicTensorView<const void*, Rank>& input,
                        const BasicTensorView<const void*, Rank>& grid, const TensorNames& names,
                        Problem* p, std::vector<Checked>* inputs) {
  constexpr bool kVolume = Rank == 5;
  const std::string in_name = names.input, grid_name = names.grid;
  Checked in{names.input, input.data, {}, 0};
  if (Status s = check_tensor(names.input, input.dtype, input.shape, input.strides, input.data,
                              &in.span, &in.numel);
      !s.ok())
    return s;
  Checked gr{names.grid, grid.data, {}, 0};
  if (Status s = check_tensor(names.grid, grid.dtype, grid.shape, grid.strides, grid.data, &gr.span,
                              &gr.numel);
      !s.ok())
    return s;
  if (grid.dtype != input.dtype) {
    return invalid(grid_name + ": dtype " + std::string(to_string(grid.dtype)) + " differs from " + in_name + "'s " +
                   std::string(to_string(input.dtype)));
  }
  // The spatial sizes: (Din,) Hin, Win of the input and (Dout,) Hout, Wout
  // of the grid.
  const auto in_size = [&](std::size_t i) { return input.shape[2 + i]; };
  const auto out_size = [&](std::size_t i) { return grid.shape[1 + i]; };
  constexpr std::size_t kAxes = Rank - 2;
  if (std::find(input.shape.begin() + 2, input.shape.end(), 0) != input.shape.end()) {
    if constexpr (kVolume) {
      return invalid(in_name + ": depth, height and width must be positive, got D=" +
                     std::to_string(in_size(0)) + ", H=" + std::to_string(in_size(1)) +
                     ", W=" + std::to_string(in_size(2)));
    } else {
      return invalid(in_name + ": height and width must be positive, got H=" +
                     std::to_string(in_size(0)) + ", W=" + std::to_string(in_size(1)));
    }
  }
  if (grid.shape[Rank - 1] != static_cast<int64_t>(kAxes)) {
    return invalid(grid_name + ": last dimension must be " + std::to_string(kAxes) + ", got " +
                   std::to_string(grid.shape[Rank - 1]));
  }
  if (grid.shape[0] != input.shape[0]) {
    return invalid(grid_name + ": batch size " + std::to_string(grid.shape[0]) +
                   " does not match " + in_name + "'s " + std::to_string(input.shape[0]));
  }
  // Kernels index planes (volumes) by (z * H + y) * W + x: their sizes must
  // fit comfortably.
  int64_t in_plane = 1, out_plane = 1;
  bool in_over = false, out_over = false;
  for (std::size_t i = 0; i < kAxes; ++i) {
    in_over = in_over || __builtin_mul_overflow(in_plane, in_size(i), &in_plane);
    out_over = out_over || __builtin_mul_overflow(out_plane, out_size(i), &out_plane);
  }
  if (in_over || in_plane > (int64_t{1} << 62)) {
    return invalid(in_name + (kVolume ? ": D * H * W overflows 2^62" : ": H * W overflows 2^62"));
  }
  if (out_over || out_plane > (int64_t{1} << 62)) {
    return invalid(grid_name +
                   (kVolume ? ": Dout * Hout * Wout overflows 2^62" : ": Hout * Wout overflows 2^62"));
  }
  p->n = input.shape[0];
  p->c = input.shape[1];
  p->in_h = input.shape[Rank - 2];
  p->in_w = input.shape[Rank - 1];
  p->out_h = grid.shape[Rank - 3];
  p->out_w = grid.shape[Rank - 2];
  if constexpr (kVolume) {
    p->volume = true;
    p->in_d = input.shape[2];
    p->out_d = grid.shape[1];
    p->input_strides_5d = input.strides;
    p->input_strides = {};
  } else {
    p->volume = false;
    p->in_d = p->out_d = 1;
    p->input_strides = input.strides;
    p->input_strides_5d = {};
  }
  p->dtype = input.dtype;
  inputs->push_back(in);
  inputs->push_back(gr);
  return Status::Ok();
}

// The output shape (N, C, (Dout,) Hout, Wout) of a checked problem, and how
// messages explain it.
template <std::size_t Rank>
ShapeR<Rank> sampled_shape(const Problem& p) {
  if constexpr (Rank == 5) {
    return {p.n, p.c, p.out_d, p.out_h, p.out_w};
  } else {
    return {p.n, p.c, p.out_h, p.out_w};
  }
}

template <std::size_t Rank>
std::string sampled_shape_origin(const TensorNames& names) {
  return std::string("(N, C) of ") + names.input +
         (Rank == 5 ? " and (Dout, Hout, Wout) of " : " and (Hout, Wout) of ") + names.grid;
}

// An output: dtype, exact shape, no self-overlap, no overlap with anything
// already checked.
template <std::size_t Rank>
Status check_output(const char* name, const BasicTensorView<void*, Rank>& t, const ShapeR<Rank>& expected,
                    const std::string& expected_from, DType dtype, const char* input_name,
                    std::vector<Checked>* seen) {
  Checked out{name, t.data, {}, 0};
  if (Status s = check_tensor(name, t.dtype, t.shape, t.strides, t.data, &out.span, &out.numel);
      !s.ok())
    return s;
  if (t.dtype != dtype) {
    return invalid(std::string(name) + ": dtype " + std::string(to_string(t.dtype)) +
                   " differs from " + input_name + "'s " + std::string(to_string(dtype)));
  }
  if (t.shape != expected) {
    return invalid(std::string(name) + ": shape " + shape_str(t.shape) + " must be " +
                   shape_str(expected) + ", " + expected_from);
  }
  if (out.numel > 0 && self_overlaps(t.shape, t.strides)) {
    return invalid(std::string(name) + ": strides make two elements share memory");
  }
  for (const Checked& other : *seen) {
    if (overlap(out, other)) {
      return invalid(std::string(name) + ": memory overlaps " + other.name);
    }
  }
  seen->push_back(out);
  return Status::Ok();
}

// Another input tensor of the call: its own rules, the input's dtype and the
// expected shape.
template <std::size_t Rank>
Status check_input_like(const char* name, const BasicTensorView<const void*, Rank>& t,
                        const ShapeR<Rank>& expected,
                        const std::string& expected_from, DType dtype, const char* input_name,
                        std::vector<Checked>* seen) {
  Checked c{name, t.data, {}, 0};
  if (Status s = check_tensor(name, t.dtype, t.shape, t.strides, t.data, &c.span, &c.numel); !s.ok())
    return s;
  if (t.dtype != dtype) {
    return invalid(std::string(name) + ": dtype " + std::string(to_string(t.dtype)) + " differs from " +
                   input_name + "'s " + std::string(to_string(dtype)));
  }
  if (t.shape != expected) {
    return invalid(std::string(name) + ": shape " + shape_str(t.shape) + " must be " + shape_str(expected) +
                   ", " + expected_from);
  }
  seen->push_back(c);
  return Status::Ok();
}

template <std::size_t Rank>
Status check_grad(const BasicTensorView<const void*, Rank>& grad, const TensorNames& names, Problem* p,
                  std::vector<Checked>* seen) {
  return check_input_like(names.grad, grad, sampled_shape<Rank>(*p), sampled_shape_origin<Rank>(names),
                          p->dtype, names.input, seen);
}

template <std::size_t Rank>
Status validate_forward_any(const BasicTensorView<const void*, Rank>& input,
                            const BasicTensorView<const void*, Rank>& grid,
                            const BasicTensorView<void*, Rank>& output, const Options& options, Problem* p,
                            const TensorNames& names) {
  if (Status s = check_options(options); !s.ok()) return s;
  std::vector<Checked> seen;
  if (Status s = check_input_grid(input, grid, names, p, &seen); !s.ok()) return s;
  if (Status s = check_output(names.output, output, sampled_shape<Rank>(*p), sampled_shape_origin<Rank>(names),
                              p->dtype, names.input, &seen);
      !s.ok())
    return s;
  p->options = options;
  p->mask = {};
  return Status::Ok();
}

template <std::size_t Rank>
Status validate_backward_any(const BasicTensorView<const void*, Rank>& grad,
                             const BasicTensorView<const void*, Rank>& input,
                             const BasicTensorView<const void*, Rank>& grid,
                             const BasicTensorView<void*, Rank>& dx, const BasicTensorView<void*, Rank>& dgrid,
                             const Options& options, OutputMask mask, Problem* p, const TensorNames& names) {
  if (Status s = check_options(options); !s.ok()) return s;
  std::vector<Checked> seen;
  if (Status s = check_input_grid(input, grid, names, p, &seen); !s.ok()) return s;
  if (Status s = check_grad(grad, names, p, &seen); !s.ok()) return s;
  if (mask.input) {
    if (Status s = check_output(names.dx, dx, input.shape, std::string("the shape of ") + names.input,
                                p->dtype, names.input, &seen);
        !s.ok())
      return s;
  }
  if (mask.grid) {
    if (Status s = check_output(names.dgrid, dgrid, grid.shape, std::string("the shape of ") + names.grid,
                                p->dtype, names.input, &seen);
        !s.ok())
      return s;
  }
  p->options = options;
  p->mask = mask;
  if constexpr (Rank == 5) {
    p->dx_strides_5d = dx.strides;
    p->dx_strides = {};
  } else {
    p->dx_strides = dx.strides;
    p->dx_strides_5d = {};
  }
  return Status::Ok();
}

}  // namespace

Status validate_forward(const TensorView& input, const TensorView& grid,
                        const MutableTensorView& output, const Options& options, Problem* p,
                        const TensorNames& names) {
  return validate_forward_any(input, grid, output, options, p, names);
}

Status validate_backward(const TensorView& grad, const TensorView& input, const TensorView& grid,
                         const MutableTensorView& dx, const MutableTensorView& dgrid,
                         const Options& options, OutputMask mask, Problem* p,
                         const TensorNames& names) {
  return validate_backward_any(grad, input, grid, dx, dgrid, options, mask, p, names);
}

Status validate_forward_3d(const VolumeView& input, const VolumeView& grid,
                           const MutableVolumeView& output, const Options& options, Problem* p,
                           const TensorNames& names) {
  return validate_forward_any(input, grid, output, options, p, names);
}

Status validate_backward_3d(const VolumeView& grad, const VolumeView& input, const VolumeView& grid,
                            const MutableVolumeView& dx, const MutableVolumeView& dgrid,
                            const Options& options, OutputMask mask, Problem* p,
                            const TensorNames& names) {
  return validate_backward_any(grad, input, grid, dx, dgrid, options, mask, p, names);
}

Status validate_double_backward(const TensorView& gg_dx, const TensorView& gg_dgrid,
                                const TensorView& grad, const TensorView& input, const TensorView& grid,
                                const MutableTensorView& d_grad, const MutableTensorView& d_input,
                                const MutableTensorView& d_grid, const Options& options,
                                DoubleBackwardMask mask, Problem* p) {
  if (Status s = check_options(options); !s.ok()) return s;
  const TensorNames names;
  std::vector<Checked> seen;
  if (Status s = check_input_grid(input, grid, names, p, &seen); !s.ok()) return s;
  if (Status s = check_grad(grad, names, p, &seen); !s.ok()) return s;
  if (gg_dx.data != nullptr) {
    if (Status s = check_input_like("gg_dx", gg_dx, input.shape, "the shape of input", p->dtype, "input", &seen);
        !s.ok())
      return s;
  }
  if (gg_dgrid.data != nullptr) {
    if (Status s = check_input_like("gg_dgrid", gg_dgrid, grid.shape, "the shape of grid", p->dtype, "input", &seen);
        !s.ok())
      return s;
  }
  const Shape4 grad_shape = sampled_shape<4>(*p);
  if (mask.grad) {
    if (Status s = check_output("d_grad", d_grad, grad_shape, "the shape of grad", p->dtype, "input", &seen);
        !s.ok())
      return s;
  }
  if (mask.input) {
    if (Status s = check_output("d_input", d_input, input.shape, "the shape of input", p->dtype, "input", &seen);
        !s.ok())
      return s;
  }
  if (mask.grid) {
    if (Status s = check_output("d_grid", d_grid, grid.shape, "the shape of grid", p->dtype, "input", &seen);
        !s.ok())
      return s;
  }
  p->options = options;
  p->mask = {mask.input, mask.grid};
  p->dx_strides = d_input.strides;
  return Status::Ok();
}

}  // namespace gridsampler::detail
