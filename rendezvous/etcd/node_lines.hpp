// The lines of node_messages.hpp on a Unix socket, both ways: what the
// agent's server (node_agent_server.cpp) and a rank's link (node_link.cpp)
// share. Private to rendezvous/etcd.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "rendezvous/etcd/node_messages.hpp"

namespace cc::rv::etcd::node {

// Writes `message` as one line, whole (the caller keeps writers apart);
// false when the other end is gone (its reader sees the end).
bool write_line(int fd, const json& message);

// Reads lines until the stream ends, fails, a line is not one JSON object
// or is over max_line bytes, or on_message returns false. Returns why it
// stopped in words; empty at a clean end or when on_message stopped it.
std::string read_lines(int fd, size_t max_line, const std::function<bool(json)>& on_message);

}  // namespace cc::rv::etcd::node
