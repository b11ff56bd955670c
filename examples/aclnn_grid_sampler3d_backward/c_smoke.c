/* The aclnn 3-D headers compile as C and the library links from C: a
 * forward of a 1x1x2x2x2 volume at its eight voxel centres (align_corners,
 * NCDHW) returns it. */
#include <stdio.h>

#include "acl/acl.h"
#include "aclnnop/aclnn_grid_sampler3d.h"
#include "aclnnop/aclnn_grid_sampler3d_backward.h"

int main(void) {
  float volume[8] = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f};
  float grid[24];
  float out[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t volume_dims[5] = {1, 1, 2, 2, 2}, grid_dims[5] = {1, 2, 2, 2, 3};
  int i;
  for (i = 0; i < 8; ++i) { /* voxel (d, h, w) = bits (2, 1, 0) of i: (x, y, z) = (w, h, d) */
    grid[3 * i + 0] = (i & 1) ? 1.0f : -1.0f;
    grid[3 * i + 1] = (i & 2) ? 1.0f : -1.0f;
    grid[3 * i + 2] = (i & 4) ? 1.0f : -1.0f;
  }
  aclTensor *x = aclCreateTensor(volume_dims, 5, ACL_FLOAT, NULL, 0, ACL_FORMAT_NCDHW, volume_dims, 5, volume);
  aclTensor *g = aclCreateTensor(grid_dims, 5, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, grid_dims, 5, grid);
  aclTensor *y = aclCreateTensor(volume_dims, 5, ACL_FLOAT, NULL, 0, ACL_FORMAT_NCDHW, volume_dims, 5, out);
  uint64_t ws = 0;
  aclOpExecutor *exec = NULL;
  aclnnStatus st = aclnnGridSampler3DGetWorkspaceSize(x, g, 0, 0, true, y, &ws, &exec);
  if (st != ACLNN_SUCCESS) {
    printf("plan failed: %d %s\n", st, aclGetRecentErrMsg());
    return 1;
  }
  st = aclnnGridSampler3D(NULL, ws, exec, NULL);
  if (st != ACLNN_SUCCESS) return 1;
  for (i = 0; i < 8; ++i) {
    if (out[i] != volume[i]) {
      printf("out[%d] = %g, expected %g\n", i, out[i], volume[i]);
      return 1;
    }
  }
  aclDestroyTensor(x);
  aclDestroyTensor(g);
  aclDestroyTensor(y);
  printf("c_smoke 3d: ok\n");
  return 0;
}
