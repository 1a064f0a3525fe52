// DTRAIN_NCCL_CHECK: a failed NCCL call throws dtrain::Error naming the call, file:line and
// NCCL's error string (docs/architecture.md, decision 7).
#pragma once
#include <nccl.h>

#include "core/error.h"

#define DTRAIN_NCCL_CHECK(call)                                                              \
  if (const ncclResult_t dtrain_nccl_status_ = (call); dtrain_nccl_status_ == ncclSuccess) { \
  } else                                                                                     \
    ::dtrain::detail::CheckFailure<::dtrain::Error>(__FILE__, __LINE__, nullptr)             \
        << __FILE__ << ":" << __LINE__ << ": " << #call                                      \
        << " failed: " << ncclGetErrorString(dtrain_nccl_status_)                            \
        << " (NCCL_DEBUG=WARN in the environment says more)"
