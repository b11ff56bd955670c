/*
 * GridSampler3D (the forward of 5-D grid_sample) through the aclnn two-phase
 * convention; same rules as aclnn_grid_sampler3d_backward.h.
 *   input (N, C, Din, Hin, Win), grid (N, Dout, Hout, Wout, 3),
 *   out (N, C, Dout, Hout, Wout).
 */
#ifndef GRIDSAMPLER_ACLNNOP_GRID_SAMPLER3D_H_
#define GRIDSAMPLER_ACLNNOP_GRID_SAMPLER3D_H_

#include "acl/acl.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnGridSampler3DGetWorkspaceSize(
    const aclTensor *input, const aclTensor *grid, int64_t interpolationMode, int64_t paddingMode,
    bool alignCorners, aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor);

ACL_FUNC_VISIBILITY aclnnStatus aclnnGridSampler3D(void *workspace, uint64_t workspaceSize,
                                                   aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* GRIDSAMPLER_ACLNNOP_GRID_SAMPLER3D_H_ */
