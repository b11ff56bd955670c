// The public entry points: validate, pick the kernel once, run it.
#include <cstdlib>
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
  cpu::run_forward(cpu::plan_forward(p), input, grid, output);
  return Status::Ok();
}

Status grid_sampler_2d_backward(TensorView grad, TensorView input, TensorView grid,
                                MutableTensorView dx, MutableTensorView dgrid,
                                const Options& options, OutputMask mask) {
  detail::Problem p;
  if (Status s = detail::validate_backward(grad, input, grid, dx, dgrid, options, mask, &p);
      !s.ok())
    return s;
  const cpu::BackwardPlan plan = cpu::plan_backward(p);
  std::unique_ptr<unsigned char, decltype(&std::free)> workspace(nullptr, &std::free);
  if (plan.workspace_bytes > 0) {
    workspace.reset(static_cast<unsigned char*>(std::aligned_alloc(64, plan.workspace_bytes)));
    if (!workspace) {
      return {StatusCode::kInternal,
              "workspace: cannot allocate " + std::to_string(plan.workspace_bytes) + " bytes"};
    }
  }
  cpu::run_backward(plan, grad, input, grid, dx, dgrid, workspace.get());
  return Status::Ok();
}

}  // namespace gridsampler
