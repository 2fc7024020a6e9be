// The thread's last error, behind cc_last_error(). Every C entry point
// returns through one of these so the code and the message always agree.
#pragma once

#include <string>

#include "cc/cc.h"
#include "common/status.hpp"

namespace cc {

// Records `message` as this thread's last error and returns code.
cc_result_t fail(cc_result_t code, std::string message);
cc_result_t fail(const Status& status);
// Clears the last error and returns CC_SUCCESS.
cc_result_t succeed();

}  // namespace cc

// Wraps the body of a C entry point: turns any escaping C++ exception into
// CC_ERR_INTERNAL (or CC_ERR_SYSTEM for bad_alloc) with its message.
#define CC_API_GUARD_BEGIN try {
#define CC_API_GUARD_END                                                               \
  }                                                                                    \
  catch (const std::bad_alloc&) {                                                      \
    return ::cc::fail(CC_ERR_SYSTEM, std::string(__func__) + ": out of host memory");  \
  }                                                                                    \
  catch (const std::exception& e) {                                                    \
    return ::cc::fail(CC_ERR_INTERNAL, std::string(__func__) + ": " + e.what());       \
  }                                                                                    \
  catch (...) {                                                                        \
    return ::cc::fail(CC_ERR_INTERNAL, std::string(__func__) + ": unknown exception"); \
  }

// A C entry point whose whole body hands one Status-returning call's result
// (and its message) to the caller, inside the guard above.
#define CC_API_RETURN_STATUS(call) \
  CC_API_GUARD_BEGIN               \
  return ::cc::fail(call);         \
  CC_API_GUARD_END
