// A result code with its message: what every internal call returns. The C API
// turns it into a cc_result_t and the thread's last error.
#pragma once

#include <string>
#include <utility>

#include "cc/cc.h"

namespace cc {

struct [[nodiscard]] Status {
  cc_result_t code = CC_SUCCESS;
  std::string message;

  bool ok() const { return code == CC_SUCCESS; }
  static Status success() { return {}; }
};

inline Status make_status(cc_result_t code, std::string message) {
  return Status{code, std::move(message)};
}

inline Status invalid_argument(std::string message) {
  return make_status(CC_ERR_INVALID_ARGUMENT, std::move(message));
}

}  // namespace cc
