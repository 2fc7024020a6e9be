// A peer event's kind as the tests print it: "failed", "server_stopping", ...
#pragma once

#include <array>

#include "common/enum_names.hpp"
#include "rendezvous/protocol.hpp"

namespace cc::test {

inline const char* peer_event_kind_name(rv::PeerEventKind k) {
  static constexpr std::array kNames{"failed",          "aborted",     "left",
                                     "server_stopping", "init_failed", "mismatch"};
  return cc::enum_name<rv::PeerEventKind::failed, rv::PeerEventKind::mismatch>(kNames, k, "?");
}

}  // namespace cc::test
