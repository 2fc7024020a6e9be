// libFuzzer target: the node agent's reader of a rank's bytes (AgentCore,
// a fake clock, a server that answered its hello). The input:
//   byte 0: the piece size (1..64) the rank's bytes are fed in;
//   the rest: what one rank sends, from its first byte on.
// A second rank said hello before it and must be untouched by whatever the
// first sends: never closed. Every frame the agent sends up must decode, and
// none may pass the frame limit. At the end the rank's deadlines pass.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "rendezvous/agent/agent_core.hpp"
#include "rendezvous/protocol.hpp"

namespace rv = cc::rv;
namespace ag = cc::rv::agent;
using namespace std::chrono_literals;

namespace {

constexpr ag::LocalId kHostile = 1;
constexpr ag::LocalId kNeighbour = 2;

class FakeIo : public ag::AgentIo {
 public:
  void to_upstream(std::vector<uint8_t> bytes) override {
    up.feed(bytes);
    while (auto f = up.next()) {
    }
    if (up.error() != rv::DecodeError::none) __builtin_trap();  // unreadable, or over the limit
  }
  void to_rank(ag::LocalId, std::span<const uint8_t>) override {}
  void close_rank(ag::LocalId rank) override {
    if (rank == kNeighbour) __builtin_trap();  // one rank's bytes ended another
  }

  rv::FrameReader up;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t piece = static_cast<size_t>(data[0] % 64) + 1;
  std::span<const uint8_t> in(data + 1, size - 1);

  FakeIo io;
  ag::AgentOptions o;
  o.job_id = "fuzz";
  o.host = "node";
  o.pid = 1;
  o.upstream = "server:1";
  o.heartbeat_window = 3600s;  // the server stays heard: only the rank's deadlines pass
  ag::AgentCore core(o, io);
  auto now = ag::Clock::time_point{} + 1000s;
  core.upstream_connected(now);
  rv::Challenge ch;
  ch.server = "fuzz server";
  core.upstream_bytes(rv::encode_frame(1, ch), now);
  core.rank_connected(kNeighbour, 20, 20, now);
  core.rank_bytes(kNeighbour, rv::encode_frame(1, rv::Hello{"fuzz", "node", 20, "neighbour"}), now);
  core.rank_connected(kHostile, 10, 10, now);
  while (!in.empty()) {
    const size_t n = std::min(piece, in.size());
    core.rank_bytes(kHostile, in.first(n), now);
    core.flush();
    in = in.subspan(n);
    now += 1ms;
  }
  core.tick(now + 60s);
  core.flush();
  return 0;
}
