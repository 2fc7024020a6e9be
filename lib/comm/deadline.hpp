// The time a call has left before its deadline, as a timeout to pass on.
#pragma once

#include <algorithm>
#include <chrono>

namespace cc::comm {

// At least 1 ms: a deadline that has passed still gives a timeout that ends
// at once, never 0 (which some callees take as no timeout).
inline std::chrono::milliseconds remaining(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

}  // namespace cc::comm
