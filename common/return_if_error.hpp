// Returns a failed Status to the caller: the one spelling of
// `if (Status st = f(); !st.ok()) return st;` (absl's RETURN_IF_ERROR).
#pragma once

#include "common/status.hpp"

// Evaluates `expr` (a Status) once; when it failed, the enclosing function
// returns it as it is.
#define CC_RETURN_IF_ERROR(expr)                                               \
  do {                                                                         \
    if (::cc::Status cc_status_ = (expr); !cc_status_.ok()) return cc_status_; \
  } while (false)
