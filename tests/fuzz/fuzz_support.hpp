// What the server-side fuzz targets share: a small server's options, and the
// check that every message the server sends can be decoded again.
#pragma once

#include <chrono>
#include <cstdint>

#include "rendezvous/protocol.hpp"
#include "rendezvous/server_core.hpp"

namespace cc::rv::fuzz {

// Short handshake, frame and job deadlines, two jobs, frames of at most
// `max_frame` bytes: a run reaches every limit quickly.
inline ServerOptions small_server(uint32_t max_frame) {
  using namespace std::chrono_literals;
  ServerOptions o;
  o.handshake_timeout = 100ms;
  o.frame_timeout = 50ms;
  o.max_jobs = 2;
  o.job_ttl = 300ms;
  o.limits.max_frame = max_frame;
  return o;
}

// Traps unless `m`, framed as the server frames it, decodes again.
inline void trap_unless_decodable(uint32_t request_id, const Message& m) {
  FrameReader r;
  r.feed(encode_frame(request_id, m));
  if (!r.next()) __builtin_trap();  // the server sent something it cannot decode
}

}  // namespace cc::rv::fuzz
