// Who a message is about, spelled one way in every error text and log line:
// "rank 3 (host gpu-a, pid 4242)". Parts that are not known are left out:
// "rank 3 (host gpu-a)", "rank 3", "host gpu-a (pid 4242)". A host name comes
// from another machine, so it is shown printable (common/printable.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cc {

struct Who {
  int rank = -1;          // -1: no rank (yet)
  std::string_view host;  // empty: unknown
  uint32_t pid = 0;       // 0: unknown
  int generation = -1;    // -1: not about a generation of a job
};

std::string who(const Who& w);

inline std::string who(int rank, std::string_view host, uint32_t pid = 0) {
  return who(Who{rank, host, pid, -1});
}

}  // namespace cc
