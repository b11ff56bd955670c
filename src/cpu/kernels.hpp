// CPU kernels: one template per (dtype, interpolation, padding,
// align_corners), chosen once from a single table. Kernels assume a
// validated problem (core/validate.hpp).
#pragma once

#include <cstddef>

#include "core/validate.hpp"
#include "gridsampler/gridsampler.hpp"

namespace gridsampler::cpu {

using ForwardFn = void (*)(const detail::Problem&, const TensorView& input, const TensorView& grid,
                           const MutableTensorView& output);
// `workspace` holds backward_workspace_bytes(problem) bytes, 64-byte aligned.
using BackwardFn = void (*)(const detail::Problem&, const TensorView& grad, const TensorView& input,
                            const TensorView& grid, const MutableTensorView& dx,
                            const MutableTensorView& dgrid, void* workspace);

ForwardFn forward_kernel(const detail::Problem& problem);
BackwardFn backward_kernel(const detail::Problem& problem);

// Scratch the backward needs: float32 accumulators for dx when the dtype is
// 16-bit (so dx is rounded once), nothing otherwise.
std::size_t backward_workspace_bytes(const detail::Problem& problem);

}  // namespace gridsampler::cpu
