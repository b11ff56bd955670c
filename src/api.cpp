// The public entry points: validate, pick the kernel once, run it.
#include <cstdlib>
#include <memory>
#include <new>

#include "core/memory.hpp"
#include "core/validate.hpp"
#include "cpu/plan.hpp"
#include "gridsampler/gridsampler.hpp"

namespace gridsampler {
namespace {

// The backward's workspace comes from the calling thread's cached buffer
// (up to kCachedWorkspaceBytes), larger ones are allocated per call.
constexpr std::size_t kCachedWorkspaceBytes = std::size_t{256} << 20;

}  // namespace

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
  void* workspace = nullptr;
  std::unique_ptr<unsigned char, decltype(&std::free)> owned(nullptr, &std::free);
  if (plan.workspace_bytes > 0) {
    workspace = plan.workspace_bytes <= kCachedWorkspaceBytes ? detail::cached_buffer(plan.workspace_bytes) : nullptr;
    if (workspace == nullptr) {
      owned.reset(static_cast<unsigned char*>(detail::allocate_workspace(plan.workspace_bytes)));
      workspace = owned.get();
    }
    if (workspace == nullptr) {
      return {StatusCode::kInternal,
              "workspace: cannot allocate " + std::to_string(plan.workspace_bytes) + " bytes"};
    }
  }
  cpu::run_backward(plan, grad, input, grid, dx, dgrid, workspace);
  return Status::Ok();
}

}  // namespace gridsampler
