// `cc-rendezvous status` output: the server's StatusReport as text for a
// person or as JSON, and which members are behind.
//
// A live member of a generation is behind when its last completed operation
// is lower than the generation's most advanced member's, or when it has been
// silent (no heartbeat) for at least kSilentMs and three times the median
// silence of the generation's live members, the lower median of an even
// count, so that of two members the silent one stands out (heartbeats come every
// CC_HEARTBEAT_MS, 1 s by default, so a member a few intervals late stands
// out while the others' age stays under one interval).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rendezvous/protocol.hpp"

namespace cc::tools::rendezvous {

inline constexpr uint32_t kSilentMs = 1500;

struct Behind {
  int32_t rank = -1;
  std::string why;  // "silent for 4.2 s", "3 ops behind rank 0 (op #41 against #44)"
};
std::vector<Behind> behind(const rv::CommStatus& g);

const char* state_name(rv::MemberState s);
const char* state_name(rv::JoinState s);

// `endpoint` is where the report came from ("127.0.0.1:29500"). The text
// shows every name and reason the server sent printable
// (common/printable.hpp); the JSON keeps them as sent (the status command
// writes it as ASCII, with \u escapes).
std::string status_text(const rv::StatusReport& r, const std::string& endpoint);
nlohmann::ordered_json status_json(const rv::StatusReport& r, const std::string& endpoint);

}  // namespace cc::tools::rendezvous
