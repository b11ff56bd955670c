/*
 * GridSampler3DGrad through the aclnn two-phase convention: the rules of
 * aclnn_grid_sampler2d_backward.h with 5-D tensors.
 *
 * Phase 1, aclnnGridSampler3DBackwardGetWorkspaceSize: validates every tensor
 * and attribute, chooses the kernel, and returns the scratch size and a
 * single-use executor. Nothing is read or written yet. On error: a status,
 * aclGetRecentErrMsg() names the tensor and the rule, and no executor is made.
 *   gradOutput (N, C, Dout, Hout, Wout), input (N, C, Din, Hin, Win),
 *   grid (N, Dout, Hout, Wout, 3) holding (x, y, z), x indexing W, y H, z D:
 *     one dtype of ACL_FLOAT16, ACL_BF16, ACL_FLOAT, ACL_DOUBLE; formats
 *     ACL_FORMAT_NCDHW, ACL_FORMAT_NDHWC or ACL_FORMAT_ND (the strides, not
 *     the tag, give the memory layout);
 *   interpolationMode 0 bilinear (trilinear), 1 nearest; 2 bicubic
 *     (tricubic, 64 taps) is accepted as an extension of the original
 *     interface, which lists 0 and 1 only;
 *   paddingMode 0 zeros, 1 border, 2 reflection;
 *   outputMask: NULL or 2 values [inputGrad wanted, gridGrad wanted]; an
 *     output not wanted may be NULL and is not touched;
 *   inputGrad: shape of input; gridGrad: shape of grid (overwritten).
 * Phase 2, aclnnGridSampler3DBackward: checks only its own arguments (a live
 * executor planned by phase 1 of this operator, a workspace of at least the
 * size asked for, a stream that is NULL or from aclrtCreateStream), runs
 * synchronously, and frees the executor, whether it succeeds or fails.
 */
#ifndef GRIDSAMPLER_ACLNNOP_GRID_SAMPLER3D_BACKWARD_H_
#define GRIDSAMPLER_ACLNNOP_GRID_SAMPLER3D_BACKWARD_H_

#include "acl/acl.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnGridSampler3DBackwardGetWorkspaceSize(
    const aclTensor *gradOutput, const aclTensor *input, const aclTensor *grid,
    int64_t interpolationMode, int64_t paddingMode, bool alignCorners,
    const aclBoolArray *outputMask, aclTensor *inputGrad, aclTensor *gridGrad,
    uint64_t *workspaceSize, aclOpExecutor **executor);

ACL_FUNC_VISIBILITY aclnnStatus aclnnGridSampler3DBackward(void *workspace, uint64_t workspaceSize,
                                                           aclOpExecutor *executor,
                                                           aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* GRIDSAMPLER_ACLNNOP_GRID_SAMPLER3D_BACKWARD_H_ */
