// The public entry points: validate, pick the kernel once, run it.
#include <exception>
#include <memory>
#include <new>

#include "core/validate.hpp"
#include "cpu/kernels.hpp"
#include "gridsampler/gridsampler.hpp"

namespace gridsampler {

Status grid_sampler_2d(TensorView input, TensorView grid, MutableTensorView output,
                       const Options& options) {
  detail::Problem p;
  if (Status s = detail::validate_forward(input, grid, output, options, &p); !s.ok()) return s;
  if (p.empty()) return Status::Ok();
  cpu::forward_kernel(p)(p, input, grid, output);
  return Status::Ok();
}

Status grid_sampler_2d_backward(TensorView grad, TensorView input, TensorView grid,
                                MutableTensorView dx, MutableTensorView dgrid,
                                const Options& options, OutputMask mask) {
  detail::Problem p;
  if (Status s = detail::validate_backward(grad, input, grid, dx, dgrid, options, mask, &p);
      !s.ok())
    return s;
  const std::size_t bytes = cpu::backward_workspace_bytes(p);
  std::unique_ptr<float[]> workspace;
  if (bytes > 0) {
    workspace.reset(new (std::nothrow) float[bytes / sizeof(float)]);
    if (!workspace) {
      return {StatusCode::kInternal, "workspace: cannot allocate " + std::to_string(bytes) + " bytes"};
    }
  }
  cpu::backward_kernel(p)(p, grad, input, grid, dx, dgrid, workspace.get());
  return Status::Ok();
}

}  // namespace gridsampler
