/* The tensor and status declarations live in acl/acl.h; this header exists
 * for programs that include it by its name on the original platform. */
#ifndef GRIDSAMPLER_ACLNN_ACL_META_H_
#define GRIDSAMPLER_ACLNN_ACL_META_H_
#include "acl/acl.h"
#endif
