// One volume call (grid_sampler_3d[_backward]) in the two steps of the
// aclnn convention, shared by the C++ API and the aclnn interface: planning
// from the views' shapes and strides alone (nothing read, nothing
// allocated; the workspace size known), then running on the caller's
// workspace. Volumes run through the image drivers over 4-D views whose
// depth and height merge into rows (volume_views.hpp).
#pragma once

#include "core/validate.hpp"
#include "cpu/plan.hpp"
#include "gridsampler/gridsampler.hpp"

namespace gridsampler::cpu {

// Plans a validated volume problem: its 4-D strides become those of the views
// the drivers will read (merged, or packed). `dx` is read only when the mask
// wants it. An empty problem plans no work and no workspace.
ForwardPlan plan_forward_3d(detail::Problem problem, const VolumeView& input,
                            ForwardCopies copies = ForwardCopies::kChosen);
BackwardPlan plan_backward_3d(detail::Problem problem, const VolumeView& input, const MutableVolumeView& dx,
                              RowWindows windows = RowWindows::kChosen);

// Whether every view of a volume call can go through the image drivers
// (mergeable_or_packable, volume_views.hpp): the aclnn interface asks when
// planning, so that a call whose packed copy could never be allocated is
// refused in its first phase rather than when it runs. kInternal, naming the
// tensor, otherwise.
Status check_views_3d(const detail::Problem& problem, const VolumeView& input, const VolumeView& grid,
                      const MutableVolumeView& output);
Status check_views_3d(const detail::Problem& problem, const VolumeView& grad, const VolumeView& input,
                      const VolumeView& grid, const MutableVolumeView& dx, const MutableVolumeView& dgrid);

// Runs a plan on the views it was made for: merges or packs them, runs the
// image drivers, and copies packed outputs back. The backward of an empty
// problem zeroes the wanted outputs. `workspace` holds plan.workspace_bytes
// bytes (any alignment). kInternal when a packed copy cannot be allocated.
Status run_forward_3d(const ForwardPlan& plan, const VolumeView& input, const VolumeView& grid,
                      const MutableVolumeView& output);
Status run_backward_3d(const BackwardPlan& plan, const VolumeView& grad, const VolumeView& input,
                       const VolumeView& grid, const MutableVolumeView& dx, const MutableVolumeView& dgrid,
                       void* workspace);

}  // namespace gridsampler::cpu
