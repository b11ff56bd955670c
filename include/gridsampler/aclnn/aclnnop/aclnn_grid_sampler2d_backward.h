/*
 * GridSampler2DGrad through the aclnn two-phase convention.
 *
 * Phase 1, aclnnGridSampler2DBackwardGetWorkspaceSize: validates every tensor
 * and attribute, chooses the kernel, and returns the scratch size and a
 * single-use executor. Nothing is read or written yet. On error: a status,
 * aclGetRecentErrMsg() names the tensor and the rule, and no executor is made.
 *   gradOutput (N, C, Hout, Wout), input (N, C, Hin, Win), grid (N, Hout, Wout, 2):
 *     one dtype of ACL_FLOAT16, ACL_BF16, ACL_FLOAT, ACL_DOUBLE;
 *   interpolationMode 0 bilinear, 1 nearest, 2 bicubic;
 *   paddingMode 0 zeros, 1 border, 2 reflection;
 *   outputMask: NULL or 2 values [inputGrad wanted, gridGrad wanted]; an
 *     output not wanted may be NULL and is not touched;
 *   inputGrad: shape of input; gridGrad: shape of grid (overwritten).
 * Phase 2, aclnnGridSampler2DBackward: checks only its own arguments (a live
 * executor, a workspace of at least the size asked for, a stream that is
 * NULL or from aclrtCreateStream), runs synchronously, and frees the
 * executor, whether it succeeds or fails. A reused, freed or foreign executor
 * is rejected, never dereferenced.
 */
#ifndef GRIDSAMPLER_ACLNNOP_GRID_SAMPLER2D_BACKWARD_H_
#define GRIDSAMPLER_ACLNNOP_GRID_SAMPLER2D_BACKWARD_H_

#include "acl/acl.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnGridSampler2DBackwardGetWorkspaceSize(
    const aclTensor *gradOutput, const aclTensor *input, const aclTensor *grid,
    int64_t interpolationMode, int64_t paddingMode, bool alignCorners,
    const aclBoolArray *outputMask, aclTensor *inputGrad, aclTensor *gridGrad,
    uint64_t *workspaceSize, aclOpExecutor **executor);

ACL_FUNC_VISIBILITY aclnnStatus aclnnGridSampler2DBackward(void *workspace, uint64_t workspaceSize,
                                                           aclOpExecutor *executor,
                                                           aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* GRIDSAMPLER_ACLNNOP_GRID_SAMPLER2D_BACKWARD_H_ */
