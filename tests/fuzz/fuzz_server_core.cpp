// libFuzzer target: ServerCore, the server's per-connection state machine,
// fed byte streams as several connections with a fake clock. The input is a
// list of operations:
//   op byte: low 2 bits = what, next 2 bits = which of 4 connections
//     0 connect, 1 bytes (a length byte, then that many bytes), 2 disconnect,
//     3 advance the clock by (length byte) * 2 ms
// Afterwards every connection is closed and every deadline passed (the job
// TTL too): the core must then hold no connection, job or deadline.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "rendezvous/server_core.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace rv = cc::rv;
using namespace std::chrono_literals;

namespace {

class CheckingSink : public rv::Sink {
 public:
  void send(rv::ConnId, uint32_t request_id, const rv::Message& m) override {
    rv::fuzz::trap_unless_decodable(request_id, m);
  }
  void close(rv::ConnId, const std::string&) override {}
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  rv::ServerOptions o = rv::fuzz::small_server(1u << 12);
  if (data[0] & 1) o.token = "fuzz-token";
  o.idle_timeout = (data[0] & 2) ? 200ms : 0ms;
  o.heartbeat_timeout = (data[0] & 4) ? 150ms : 0ms;
  o.max_connections = 3;
  o.max_keys_per_job = 4;
  o.max_bytes_per_job = 512;
  o.max_total_bytes = 768;
  CheckingSink sink;
  rv::ServerCore core(o, sink);
  rv::Clock::time_point now = rv::Clock::time_point{} + 1000s;
  bool open[4] = {false, false, false, false};
  rv::ConnId ids[4] = {1, 2, 3, 4};
  rv::ConnId next_id = 5;

  size_t i = 1;
  while (i < size) {
    const uint8_t op = data[i++];
    const int which = (op >> 2) & 3;
    switch (op & 3) {
      case 0:
        if (open[which]) core.on_disconnect(ids[which], "replaced");
        ids[which] = next_id++;
        open[which] = core.on_connect(ids[which], "10.0.0." + std::to_string(which) + ":1", now);
        break;
      case 1: {
        if (i >= size) break;
        const size_t want = data[i++];
        const size_t n = std::min(want, size - i);
        if (open[which]) core.on_bytes(ids[which], std::span(data + i, n), now);
        i += n;
        break;
      }
      case 2:
        if (open[which]) core.on_disconnect(ids[which], "gone");
        open[which] = false;
        break;
      default:
        if (i < size) now += std::chrono::milliseconds(2 * data[i++]);
        core.expire(now);
        break;
    }
  }
  for (int w = 0; w < 4; ++w)
    if (open[w]) core.on_disconnect(ids[w], "end");
  now += 10s;
  core.expire(now);
  if (core.connection_count() != 0 || core.job_count() != 0 || core.next_deadline())
    __builtin_trap();
  return 0;
}
