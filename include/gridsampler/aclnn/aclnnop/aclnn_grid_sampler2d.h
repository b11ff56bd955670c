/*
 * GridSampler2D (the forward of grid_sample) through the aclnn two-phase
 * convention; same rules as aclnn_grid_sampler2d_backward.h.
 *   input (N, C, Hin, Win), grid (N, Hout, Wout, 2), out (N, C, Hout, Wout).
 */
#ifndef GRIDSAMPLER_ACLNNOP_GRID_SAMPLER2D_H_
#define GRIDSAMPLER_ACLNNOP_GRID_SAMPLER2D_H_

#include "acl/acl.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnGridSampler2DGetWorkspaceSize(
    const aclTensor *input, const aclTensor *grid, int64_t interpolationMode, int64_t paddingMode,
    bool alignCorners, aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor);

ACL_FUNC_VISIBILITY aclnnStatus aclnnGridSampler2D(void *workspace, uint64_t workspaceSize,
                                                   aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* GRIDSAMPLER_ACLNNOP_GRID_SAMPLER2D_H_ */
