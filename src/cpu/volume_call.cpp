#include "cpu/volume_call.hpp"

#include <string>

#include "core/zero_fill.hpp"
#include "cpu/volume_views.hpp"

namespace gridsampler::cpu {
namespace {

// Input-shaped tensors merge depth into rows at dimension 2, grid-shaped
// ones at dimension 1.
constexpr int kImageDim = 2, kGridDim = 1;

Status no_memory(const char* what) {
  return {StatusCode::kInternal, std::string("workspace: cannot allocate a packed copy of ") + what};
}

// The problem as the image drivers see it.
detail::Problem as_merged(detail::Problem p, const VolumeView& input, const Shape4& dx_strides) {
  p.volume = true;
  p.input_strides = merged_strides(input.shape, input.strides, kImageDim);
  p.dx_strides = dx_strides;
  return p;
}

}  // namespace

Status check_views_3d(const detail::Problem& problem, const VolumeView& input, const VolumeView& grid,
                      const MutableVolumeView& output) {
  if (problem.empty()) return Status::Ok();
  if (!mergeable_or_packable(input, kImageDim)) return no_memory("input");
  if (!mergeable_or_packable(grid, kGridDim)) return no_memory("grid");
  if (!mergeable_or_packable(output, kImageDim)) return no_memory("output");
  return Status::Ok();
}

Status check_views_3d(const detail::Problem& problem, const VolumeView& grad, const VolumeView& input,
                      const VolumeView& grid, const MutableVolumeView& dx, const MutableVolumeView& dgrid) {
  if (problem.empty()) return Status::Ok();
  if (!mergeable_or_packable(grad, kImageDim)) return no_memory("grad");
  if (!mergeable_or_packable(input, kImageDim)) return no_memory("input");
  if (!mergeable_or_packable(grid, kGridDim)) return no_memory("grid");
  if (problem.mask.input && !mergeable_or_packable(dx, kImageDim)) return no_memory("dx");
  if (problem.mask.grid && !mergeable_or_packable(dgrid, kGridDim)) return no_memory("dgrid");
  return Status::Ok();
}

ForwardPlan plan_forward_3d(detail::Problem problem, const VolumeView& input, ForwardCopies copies) {
  if (problem.empty()) {
    ForwardPlan plan;
    plan.problem = problem;
    return plan;
  }
  return plan_forward(as_merged(problem, input, {}), copies);
}

BackwardPlan plan_backward_3d(detail::Problem problem, const VolumeView& input, const MutableVolumeView& dx,
                              RowWindows windows) {
  if (problem.empty()) {
    BackwardPlan plan;
    plan.problem = problem;
    return plan;
  }
  const Shape4 dx_strides = problem.mask.input ? merged_strides(dx.shape, dx.strides, kImageDim) : Shape4{};
  return plan_backward(as_merged(problem, input, dx_strides), windows);
}

Status run_forward_3d(const ForwardPlan& plan, const VolumeView& input, const VolumeView& grid,
                      const MutableVolumeView& output) {
  if (plan.problem.empty()) return Status::Ok();
  VolumeViews views;
  TensorView in4, grid4;
  MutableTensorView out4;
  if (!views.input(input, kImageDim, &in4)) return no_memory("input");
  if (!views.input(grid, kGridDim, &grid4)) return no_memory("grid");
  if (!views.output(output, kImageDim, &out4)) return no_memory("output");
  run_forward(plan, in4, grid4, out4);
  views.finish();
  return Status::Ok();
}

Status run_backward_3d(const BackwardPlan& plan, const VolumeView& grad, const VolumeView& input,
                       const VolumeView& grid, const MutableVolumeView& dx, const MutableVolumeView& dgrid,
                       void* workspace) {
  const OutputMask mask = plan.problem.mask;
  if (plan.problem.empty()) {
    // dx is a sum over no output voxels, dgrid one over no channels.
    if (mask.input) detail::zero_view(dx);
    if (mask.grid) detail::zero_view(dgrid);
    return Status::Ok();
  }
  VolumeViews views;
  TensorView grad4, in4, grid4;
  MutableTensorView dx4, dgrid4;
  if (!views.input(grad, kImageDim, &grad4)) return no_memory("grad");
  if (!views.input(input, kImageDim, &in4)) return no_memory("input");
  if (!views.input(grid, kGridDim, &grid4)) return no_memory("grid");
  if (mask.input && !views.output(dx, kImageDim, &dx4)) return no_memory("dx");
  if (mask.grid && !views.output(dgrid, kGridDim, &dgrid4)) return no_memory("dgrid");
  run_backward(plan, grad4, in4, grid4, dx4, dgrid4, workspace);
  views.finish();
  return Status::Ok();
}

}  // namespace gridsampler::cpu
