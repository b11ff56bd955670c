// Validation shared by every entry point: after it succeeds, a kernel may
// assume consistent shapes, one dtype, non-null data for non-empty tensors,
// outputs that overlap nothing, and offsets that fit in int64_t.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "gridsampler/gridsampler.hpp"

namespace gridsampler::detail {

// The sizes of one validated call.
// Volumes (grid_sampler_3d) set `volume`, the depths and the 5-D strides
// (in_h, in_w, out_h, out_w are then the volume's H and W, and the 4-D
// strides stay zero); an image has depth 1 and leaves the 5-D strides zero.
struct Problem {
  int64_t n = 0, c = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t in_d = 1, out_d = 1;
  bool volume = false;
  Shape4 input_strides{};  // element strides of the input (planners choose kernels by its layout)
  Shape4 dx_strides{};     // ... and of dx (backward)
  Shape5 input_strides_5d{};  // volumes: the input's strides
  Shape5 dx_strides_5d{};     // volumes: dx's strides
  DType dtype = DType::kFloat32;
  Options options;
  OutputMask mask;
  bool empty() const { return n == 0 || c == 0 || out_d == 0 || out_h == 0 || out_w == 0; }
};

// How error messages name the tensors: the C++ API's names by default; the
// aclnn interface passes its own (gradOutput, inputGrad, gridGrad, out).
struct TensorNames {
  const char* grad = "grad";
  const char* input = "input";
  const char* grid = "grid";
  const char* dx = "dx";
  const char* dgrid = "dgrid";
  const char* output = "output";
};

// Element offsets of the lowest (*lo) and highest (*hi) element of a view of
// `shape` and `strides` (any rank) whose first element sits at offset
// `origin`. False when an offset, or a stride's reach, does not fit in
// int64_t (a stride of INT64_MIN included). Every dimension must be positive.
template <std::size_t Rank>
bool stride_reach(const std::array<int64_t, Rank>& shape, const std::array<int64_t, Rank>& strides,
                  int64_t origin, int64_t* lo, int64_t* hi) {
  *lo = *hi = origin;
  for (std::size_t d = 0; d < Rank; ++d) {
    int64_t reach = 0;
    const bool bad = strides[d] == INT64_MIN ||
                     __builtin_mul_overflow(shape[d] - 1, std::llabs(strides[d]), &reach) ||
                     (strides[d] < 0 ? __builtin_sub_overflow(*lo, reach, lo)
                                     : __builtin_add_overflow(*hi, reach, hi));
    if (bad) return false;
  }
  return true;
}

Status validate_forward(const TensorView& input, const TensorView& grid,
                        const MutableTensorView& output, const Options& options, Problem* problem,
                        const TensorNames& names = {});

Status validate_backward(const TensorView& grad, const TensorView& input, const TensorView& grid,
                         const MutableTensorView& dx, const MutableTensorView& dgrid,
                         const Options& options, OutputMask mask, Problem* problem,
                         const TensorNames& names = {});

// Volumes: the same rules over 5-D views (grid's last dimension 3).
Status validate_forward_3d(const VolumeView& input, const VolumeView& grid,
                           const MutableVolumeView& output, const Options& options, Problem* problem,
                           const TensorNames& names = {});

Status validate_backward_3d(const VolumeView& grad, const VolumeView& input, const VolumeView& grid,
                            const MutableVolumeView& dx, const MutableVolumeView& dgrid,
                            const Options& options, OutputMask mask, Problem* problem,
                            const TensorNames& names = {});

// gg_dx and gg_dgrid are absent when their data is null (their shapes are
// then not checked); the outputs are checked as `mask` asks. Sets
// problem->dx_strides to d_input's strides.
Status validate_double_backward(const TensorView& gg_dx, const TensorView& gg_dgrid,
                                const TensorView& grad, const TensorView& input, const TensorView& grid,
                                const MutableTensorView& d_grad, const MutableTensorView& d_input,
                                const MutableTensorView& d_grid, const Options& options,
                                DoubleBackwardMask mask, Problem* problem);

}  // namespace gridsampler::detail
