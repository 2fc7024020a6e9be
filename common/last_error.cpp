#include "common/last_error.hpp"

#include <cstring>
#include <string>

#include "common/log.hpp"

namespace cc {
namespace {
thread_local std::string last_error;
}  // namespace

cc_result_t fail(cc_result_t code, std::string message) {
  log().debug("{}: {}", cc_result_string(code), message);
  last_error = std::move(message);
  return code;
}

cc_result_t fail(const Status& status) {
  if (status.ok()) return succeed();
  return fail(status.code, status.message);
}

cc_result_t succeed() {
  last_error.clear();
  return CC_SUCCESS;
}

}  // namespace cc

extern "C" CC_API const char* cc_last_error(void) { return cc::last_error.c_str(); }

extern "C" CC_API const char* cc_result_string(cc_result_t result) {
  // A C caller may pass any int; read it as one, since loading an enum
  // object that holds a value outside the enum's range is undefined in C++.
  static_assert(sizeof(cc_result_t) == sizeof(int));
  int code = 0;
  std::memcpy(&code, &result, sizeof code);
  switch (code) {
    case CC_SUCCESS:
      return "CC_SUCCESS: no error";
    case CC_ERR_INVALID_ARGUMENT:
      return "CC_ERR_INVALID_ARGUMENT: an argument is invalid";
    case CC_ERR_INVALID_USAGE:
      return "CC_ERR_INVALID_USAGE: the call is not valid in this state";
    case CC_ERR_NO_DEVICE:
      return "CC_ERR_NO_DEVICE: no usable CUDA device";
    case CC_ERR_CUDA:
      return "CC_ERR_CUDA: a CUDA call failed";
    case CC_ERR_NCCL:
      return "CC_ERR_NCCL: an NCCL call failed";
    case CC_ERR_SYSTEM:
      return "CC_ERR_SYSTEM: an operating-system call failed";
    case CC_ERR_RENDEZVOUS:
      return "CC_ERR_RENDEZVOUS: the rendezvous failed";
    case CC_ERR_AUTH:
      return "CC_ERR_AUTH: the rendezvous token was refused";
    case CC_ERR_MISMATCH:
      return "CC_ERR_MISMATCH: the ranks disagree";
    case CC_ERR_TIMEOUT:
      return "CC_ERR_TIMEOUT: a deadline passed";
    case CC_ERR_PEER_FAILED:
      return "CC_ERR_PEER_FAILED: another rank failed";
    case CC_ERR_ABORTED:
      return "CC_ERR_ABORTED: the communicator was aborted";
    case CC_ERR_INTERNAL:
      return "CC_ERR_INTERNAL: internal error in cc (please report it)";
    case CC_ERR_BUFFER_TOO_SMALL:
      return "CC_ERR_BUFFER_TOO_SMALL: the output buffer is too small";
    case CC_NUM_RESULTS:
      break;
  }
  return "unknown cc_result_t value";
}
