// libcc's functions as the torch backend calls them.
//
// They are taken from the very library `import cc` loaded (Python passes its
// path; dlopen of an already-loaded path returns the same handle), so the
// extension never links a second libcc and needs nothing of libcc at build
// time but cc.h. A function an older libcc lacks is left null when optional.
#pragma once

#include <string>
#include <type_traits>

#include <c10/util/ArrayRef.h>

#include "cc/cc.h"

namespace cc_torch {

struct Api {
  decltype(&cc_comm_init) comm_init = nullptr;
  decltype(&cc_comm_destroy) comm_destroy = nullptr;
  decltype(&cc_comm_abort) comm_abort = nullptr;
  decltype(&cc_comm_timeout) comm_timeout = nullptr;
  decltype(&cc_allreduce) allreduce = nullptr;
  decltype(&cc_broadcast) broadcast = nullptr;
  decltype(&cc_reduce) reduce = nullptr;
  decltype(&cc_allgather) allgather = nullptr;
  decltype(&cc_reducescatter) reducescatter = nullptr;
  decltype(&cc_alltoall) alltoall = nullptr;
  decltype(&cc_send) send = nullptr;
  decltype(&cc_recv) recv = nullptr;
  decltype(&cc_barrier) barrier = nullptr;
  decltype(&cc_group_start) group_start = nullptr;
  decltype(&cc_group_end) group_end = nullptr;
  decltype(&cc_server_stop) server_stop = nullptr;
  decltype(&cc_result_string) result_string = nullptr;
  decltype(&cc_last_error) last_error = nullptr;
  decltype(&cc_comm_failed_ranks) comm_failed_ranks = nullptr;  // optional
  decltype(&cc_comm_check) comm_check = nullptr;                // optional
  // Recovery (dist.shrink_group); optional: without them the backend does not shrink.
  decltype(&cc_comm_shrink) comm_shrink = nullptr;
  decltype(&cc_comm_rank) comm_rank = nullptr;
  decltype(&cc_comm_size) comm_size = nullptr;
  decltype(&cc_comm_generation) comm_generation = nullptr;
};

// Opens libcc at `path` and resolves every function; throws
// std::runtime_error naming a missing one. Idempotent.
void load(const std::string& path);

// The loaded functions; throws when load() was never called.
const Api& api();

// "<call>: <cc_last_error() or cc_result_string(r)>" for a failed call; read
// on the calling thread right after the failure.
std::string words(const char* call, cc_result_t r);

// Throws the message of a failed call as c10::DistBackendError (Python:
// torch.distributed.DistBackendError).
[[noreturn]] void fail(const char* call, cc_result_t r);
[[noreturn]] void fail(const std::string& message);

// Whether environment variable `name` is "1" (CC_TORCH_TIMING, ...).
bool env_flag(const char* name);

// Words from parts: strings as they are, integers in decimal.
//
// The extension writes no text through std::ostream (c10::str with more than
// one part, TORCH_CHECK's message parts, operator<<). Built by
// torch.utils.cpp_extension, it carries its own copies of libstdc++'s stream
// templates, and with torch 2.11 formatting an integer through them crashed
// the process (SIGSEGV in the extension's basic_ostream::_M_insert<long>,
// under TORCH_CHECK's message) instead of raising.
template <class... Parts>
std::string text(const Parts&... parts) {
  std::string out;
  const auto append = [&out](const auto& part) {
    if constexpr (std::is_integral_v<std::decay_t<decltype(part)>>)
      out += std::to_string(part);
    else
      out += part;
  };
  (append(parts), ...);
  return out;
}

// "[2, 3]" for sizes and strides.
inline std::string list_of(c10::IntArrayRef values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

}  // namespace cc_torch
