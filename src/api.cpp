// The public entry points: validate, pick the kernel once, run it.
#include <cstddef>
#include <string>

#include "core/memory.hpp"
#include "core/validate.hpp"
#include "core/zero_fill.hpp"
#include "cpu/double_backward.hpp"
#include "cpu/plan.hpp"
#include "cpu/volume_call.hpp"
#include "gridsampler/gridsampler.hpp"

namespace gridsampler {
namespace {

// The first-order calls of either rank, for the double backward below.
Status sample(TensorView in, TensorView grid, MutableTensorView out, const Options& o) {
  return grid_sampler_2d(in, grid, out, o);
}
Status sample(VolumeView in, VolumeView grid, MutableVolumeView out, const Options& o) {
  return grid_sampler_3d(in, grid, out, o);
}
Status grid_gradient(TensorView grad, TensorView in, TensorView grid, MutableTensorView dgrid, const Options& o) {
  return grid_sampler_2d_backward(grad, in, grid, MutableTensorView{nullptr, in.dtype, {}, {}}, dgrid, o,
                                  OutputMask{false, true});
}
Status grid_gradient(VolumeView grad, VolumeView in, VolumeView grid, MutableVolumeView dgrid, const Options& o) {
  return grid_sampler_3d_backward(grad, in, grid, MutableVolumeView{nullptr, in.dtype, {}, {}}, dgrid, o,
                                  OutputMask{false, true});
}

// The double backward without gg_dgrid (a loss on dx alone, as in an R1
// penalty) is two first-order calls. dx is linear in grad with the
// forward's weights, so d<gg_dx, dx>/d grad = grid_sample(gg_dx, grid); its
// derivative in grid is the backward's dgrid with gg_dx in the input's place;
// dx does not depend on the input, so d_input is zero. Both kernels are
// faster than the fused pass, which also carries what gg_dgrid needs, and
// they apply the same coordinate policy (zero factors, nearest's zero
// derivatives). Arguments are validated, so only an allocation can fail:
// the backward, which allocates before it writes, runs first, so that its
// failure leaves every output untouched (a volume forward's packed copy of
// a non-mergeable gg_dx can still fail after it).
template <class View, class MutView>
Status double_backward_from_gg_dx(const View& gg_dx, const View& grad, const View& grid, const MutView& d_grad,
                                  const MutView& d_input, const MutView& d_grid, const Options& options,
                                  DoubleBackwardMask mask) {
  const bool has_gg_dx = gg_dx.data != nullptr;
  if (mask.grid) {
    if (!has_gg_dx) {
      detail::zero_view(d_grid);
    } else if (Status s = grid_gradient(grad, gg_dx, grid, d_grid, options); !s.ok()) {
      return s;
    }
  }
  if (mask.grad) {
    if (!has_gg_dx) {
      detail::zero_view(d_grad);
    } else if (Status s = sample(gg_dx, grid, d_grad, options); !s.ok()) {
      return s;
    }
  }
  if (mask.input) detail::zero_view(d_input);
  return Status::Ok();
}

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
  // The calling thread's cached buffer (core/memory.hpp): kept for the next
  // call up to cached_buffer_limit(), freed when the call returns past that.
  detail::CachedBuffer workspace(plan.workspace_bytes);
  if (plan.workspace_bytes > 0 && workspace.data() == nullptr) {
    return {StatusCode::kInternal,
            "workspace: cannot allocate " + std::to_string(plan.workspace_bytes) + " bytes"};
  }
  cpu::run_backward(plan, grad, input, grid, dx, dgrid, workspace.data());
  return Status::Ok();
}

// Volumes: planned and run in the two steps the aclnn interface takes too
// (cpu/volume_call.hpp).
Status grid_sampler_3d(VolumeView input, VolumeView grid, MutableVolumeView output, const Options& options) {
  detail::Problem p;
  if (Status s = detail::validate_forward_3d(input, grid, output, options, &p); !s.ok()) return s;
  return cpu::run_forward_3d(cpu::plan_forward_3d(p, input), input, grid, output);
}

Status grid_sampler_3d_backward(VolumeView grad, VolumeView input, VolumeView grid, MutableVolumeView dx,
                                MutableVolumeView dgrid, const Options& options, OutputMask mask) {
  detail::Problem p;
  if (Status s = detail::validate_backward_3d(grad, input, grid, dx, dgrid, options, mask, &p); !s.ok())
    return s;
  const cpu::BackwardPlan plan = cpu::plan_backward_3d(p, input, dx);
  detail::CachedBuffer workspace(plan.workspace_bytes);
  if (plan.workspace_bytes > 0 && workspace.data() == nullptr) {
    return {StatusCode::kInternal,
            "workspace: cannot allocate " + std::to_string(plan.workspace_bytes) + " bytes"};
  }
  return cpu::run_backward_3d(plan, grad, input, grid, dx, dgrid, workspace.data());
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
  if (gg_dgrid.data == nullptr) {
    return double_backward_from_gg_dx(gg_dx, grad, grid, d_grad, d_input, d_grid, options, mask);
  }
  const cpu::DoubleBackwardPlan plan =
      cpu::plan_double_backward(p, mask, gg_dx.data != nullptr);
  detail::CachedBuffer workspace(plan.workspace_bytes);
  if (plan.workspace_bytes > 0 && workspace.data() == nullptr) {
    return {StatusCode::kInternal,
            "workspace: cannot allocate " + std::to_string(plan.workspace_bytes) + " bytes"};
  }
  cpu::run_double_backward(plan, gg_dx, gg_dgrid, grad, input, grid, d_grad, d_input, d_grid,
                           workspace.data());
  return Status::Ok();
}

Status grid_sampler_3d_double_backward(VolumeView gg_dx, VolumeView gg_dgrid, VolumeView grad, VolumeView input,
                                       VolumeView grid, MutableVolumeView d_grad, MutableVolumeView d_input,
                                       MutableVolumeView d_grid, const Options& options, DoubleBackwardMask mask) {
  detail::Problem p;
  if (Status s = detail::validate_double_backward_3d(gg_dx, gg_dgrid, grad, input, grid, d_grad, d_input, d_grid,
                                                     options, mask, &p);
      !s.ok())
    return s;
  if (gg_dgrid.data == nullptr) {
    return double_backward_from_gg_dx(gg_dx, grad, grid, d_grad, d_input, d_grid, options, mask);
  }
  const cpu::DoubleBackwardPlan plan =
      cpu::plan_double_backward(p, mask, gg_dx.data != nullptr);
  detail::CachedBuffer workspace(plan.workspace_bytes);
  if (plan.workspace_bytes > 0 && workspace.data() == nullptr) {
    return {StatusCode::kInternal,
            "workspace: cannot allocate " + std::to_string(plan.workspace_bytes) + " bytes"};
  }
  cpu::run_double_backward(plan, gg_dx, gg_dgrid, grad, input, grid, d_grad, d_input, d_grid, workspace.data());
  return Status::Ok();
}

void release_cached_memory() { detail::release_cached_buffers(); }

std::size_t cached_memory_bytes() { return detail::cached_buffer_bytes(); }

void set_cached_memory_limit(std::size_t bytes) { detail::set_cached_buffer_limit(bytes); }

std::size_t cached_memory_limit() { return detail::cached_buffer_limit(); }

}  // namespace gridsampler
