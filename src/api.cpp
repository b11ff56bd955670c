// The public entry points: validate, pick the kernel once, run it.
#include <cstddef>
#include <string>

#include "core/memory.hpp"
#include "core/validate.hpp"
#include "cpu/double_backward.hpp"
#include "cpu/plan.hpp"
#include "cpu/volume_views.hpp"
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
  // The calling thread's cached buffer (core/memory.hpp): kept for the next
  // call up to kMaxCachedBytes, freed when the call returns past that.
  detail::CachedBuffer workspace(plan.workspace_bytes);
  if (plan.workspace_bytes > 0 && workspace.data() == nullptr) {
    return {StatusCode::kInternal,
            "workspace: cannot allocate " + std::to_string(plan.workspace_bytes) + " bytes"};
  }
  cpu::run_backward(plan, grad, input, grid, dx, dgrid, workspace.data());
  return Status::Ok();
}

namespace {

Status no_memory(const char* what) {
  return {StatusCode::kInternal, std::string("workspace: cannot allocate a packed copy of ") + what};
}

// The 4-D problem of a validated volume call: its strides are the merged
// (or packed) views' that the kernels will read.
void as_volume(detail::Problem* p, const TensorView& input, const Shape4& dx_strides) {
  p->volume = true;
  p->input_strides = input.strides;
  p->dx_strides = dx_strides;
}

}  // namespace

// Volumes run through the image drivers over 4-D views whose depth and
// height merge into rows (cpu/volume_views.hpp), with the 3-D stencils.
Status grid_sampler_3d(VolumeView input, VolumeView grid, MutableVolumeView output, const Options& options) {
  detail::Problem p;
  if (Status s = detail::validate_forward_3d(input, grid, output, options, &p); !s.ok()) return s;
  if (p.empty()) return Status::Ok();
  cpu::VolumeViews views;
  TensorView in4, grid4;
  MutableTensorView out4;
  if (!views.input(input, 2, &in4)) return no_memory("input");
  if (!views.input(grid, 1, &grid4)) return no_memory("grid");
  if (!views.output(output, 2, &out4)) return no_memory("output");
  as_volume(&p, in4, {});
  cpu::run_forward(cpu::plan_forward(p), in4, grid4, out4);
  views.finish();
  return Status::Ok();
}

Status grid_sampler_3d_backward(VolumeView grad, VolumeView input, VolumeView grid, MutableVolumeView dx,
                                MutableVolumeView dgrid, const Options& options, OutputMask mask) {
  detail::Problem p;
  if (Status s = detail::validate_backward_3d(grad, input, grid, dx, dgrid, options, mask, &p); !s.ok())
    return s;
  if (p.empty()) {
    // dx is a sum over no output voxels, dgrid one over no channels.
    if (mask.input) cpu::zero_volume(dx);
    if (mask.grid) cpu::zero_volume(dgrid);
    return Status::Ok();
  }
  cpu::VolumeViews views;
  TensorView grad4, in4, grid4;
  MutableTensorView dx4, dgrid4;
  if (!views.input(grad, 2, &grad4)) return no_memory("grad");
  if (!views.input(input, 2, &in4)) return no_memory("input");
  if (!views.input(grid, 1, &grid4)) return no_memory("grid");
  if (mask.input && !views.output(dx, 2, &dx4)) return no_memory("dx");
  if (mask.grid && !views.output(dgrid, 1, &dgrid4)) return no_memory("dgrid");
  as_volume(&p, in4, dx4.strides);
  const cpu::BackwardPlan plan = cpu::plan_backward(p);
  detail::CachedBuffer workspace(plan.workspace_bytes);
  if (plan.workspace_bytes > 0 && workspace.data() == nullptr) {
    return {StatusCode::kInternal,
            "workspace: cannot allocate " + std::to_string(plan.workspace_bytes) + " bytes"};
  }
  cpu::run_backward(plan, grad4, in4, grid4, dx4, dgrid4, workspace.data());
  views.finish();
  return Status::Ok();
}

Status grid_sampler_2d_double_backward(TensorView gg_dx, TensorView gg_dgrid, TensorView grad,
                                       TensorView input, TensorView grid, MutableTensorView d_grad,
                                       MutableTensorView d_input, MutableTensorView d_grid,
                                       const Options& options, DoubleBackwardMask mask) {
  detail::Problem p;
  if (Status s = detail::validate_double_backward(gg_dx, gg_dgrid, grad, input, grid, d_grad, d_input,
                                                  d_grid, options, mask, &p);
      !s.ok())
    return s;
  const cpu::DoubleBackwardPlan plan =
      cpu::plan_double_backward(p, mask, gg_dx.data != nullptr, gg_dgrid.data != nullptr);
  detail::CachedBuffer workspace(plan.workspace_bytes);
  if (plan.workspace_bytes > 0 && workspace.data() == nullptr) {
    return {StatusCode::kInternal,
            "workspace: cannot allocate " + std::to_string(plan.workspace_bytes) + " bytes"};
  }
  cpu::run_double_backward(plan, gg_dx, gg_dgrid, grad, input, grid, d_grad, d_input, d_grid,
                           workspace.data());
  return Status::Ok();
}

void release_cached_memory() { detail::release_cached_buffers(); }

std::size_t cached_memory_bytes() { return detail::cached_buffer_bytes(); }

}  // namespace gridsampler
