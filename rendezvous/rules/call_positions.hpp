// Where each rank of a communicator is, as text, for a collective that timed
// out: the ranks grouped by their last call, the largest group last ("rank 1
// is in op #20 cc_barrier while ranks 0, 2, 3 are in op #20 cc_allreduce
// 4194304 x FLOAT32 SUM"). Each group names up to 16 ranks, then a count; at
// most 16 groups are told. Pure: the server answers a ProgressQuery with it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/call_desc.hpp"

namespace cc::rv::rules {

struct RankCall {
  int32_t rank = -1;
  uint64_t seq = 0;  // its last collective's number; 0: it reported none
  CallDesc call{};
};

// "" when every rank is in the same call (nothing differs).
std::string positions_words(const std::vector<RankCall>& ranks);

// "rank 3", "ranks 0, 2, 3", "ranks 0, 1, ... 15 and 4 more".
std::string ranks_named(const std::vector<int32_t>& ranks);

}  // namespace cc::rv::rules
