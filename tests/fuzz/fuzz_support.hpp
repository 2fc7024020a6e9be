// What the server-side fuzz targets share: the check that every message the
// server sends can be decoded again.
#pragma once

#include <cstdint>

#include "rendezvous/protocol.hpp"

namespace cc::rv::fuzz {

// Traps unless `m`, framed as the server frames it, decodes again.
inline void trap_unless_decodable(uint32_t request_id, const Message& m) {
  FrameReader r;
  r.feed(encode_frame(request_id, m));
  if (!r.next()) __builtin_trap();  // the server sent something it cannot decode
}

}  // namespace cc::rv::fuzz
