/* The aclnn headers compile as C and the library links from C: a forward of
 * a 1x1x2x2 image at its four pixel centres (align_corners) returns it. */
#include <stdio.h>

#include "acl/acl.h"
#include "aclnnop/aclnn_grid_sampler2d.h"
#include "aclnnop/aclnn_grid_sampler2d_backward.h"

int main(void) {
  float image[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  float grid[8] = {-1, -1, 1, -1, -1, 1, 1, 1};
  float out[4] = {0, 0, 0, 0};
  int64_t image_dims[4] = {1, 1, 2, 2}, grid_dims[4] = {1, 2, 2, 2};
  aclTensor *x = aclCreateTensor(image_dims, 4, ACL_FLOAT, NULL, 0, ACL_FORMAT_NCHW, image_dims, 4, image);
  aclTensor *g = aclCreateTensor(grid_dims, 4, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, grid_dims, 4, grid);
  aclTensor *y = aclCreateTensor(image_dims, 4, ACL_FLOAT, NULL, 0, ACL_FORMAT_NCHW, image_dims, 4, out);
  uint64_t ws = 0;
  aclOpExecutor *exec = NULL;
  aclnnStatus st = aclnnGridSampler2DGetWorkspaceSize(x, g, 0, 0, true, y, &ws, &exec);
  if (st != ACLNN_SUCCESS) {
    printf("plan failed: %d %s\n", st, aclGetRecentErrMsg());
    return 1;
  }
  st = aclnnGridSampler2D(NULL, ws, exec, NULL);
  if (st != ACLNN_SUCCESS) return 1;
  for (int i = 0; i < 4; ++i) {
    if (out[i] != image[i]) {
      printf("out[%d] = %g, expected %g\n", i, out[i], image[i]);
      return 1;
    }
  }
  aclDestroyTensor(x);
  aclDestroyTensor(g);
  aclDestroyTensor(y);
  printf("c_smoke: ok\n");
  return 0;
}
