// libFuzzer target: what a server with a token accepts from a connection
// before it has authenticated (ServerCore, one connection, a fake clock).
// The input:
//   byte 0: flags. bit 0: the bytes are sent raw from the first byte on;
//     otherwise the target builds the Hello from the input's fields and
//     answers the Challenge: bit 1 with the right MAC, else a wrong one.
//   byte 1: the piece size (1..64) the bytes are fed in.
//   built Hello: job id, host and client as (length byte, bytes), a pid byte;
//   the rest: bytes sent after the handshake (raw: all of it).
// Until the right MAC has been answered Ok, the connection must hear nothing
// but Challenge and Error, and no job may come to exist. At the end the
// connection is closed and every deadline passed: nothing may be left.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "rendezvous/auth.hpp"
#include "rendezvous/server_core.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace rv = cc::rv;
using namespace std::chrono_literals;

namespace {

constexpr const char* kToken = "fuzz-token";
constexpr rv::ConnId kConn = 1;

class PreAuthSink : public rv::Sink {
 public:
  void send(rv::ConnId, uint32_t request_id, const rv::Message& m) override {
    rv::fuzz::trap_unless_decodable(request_id, m);
    if (authenticated) return;
    if (const auto* c = std::get_if<rv::Challenge>(&m)) {
      if (!c->auth_required) __builtin_trap();  // a server with a token must ask for it
      nonce = c->nonce;
      return;
    }
    if (std::holds_alternative<rv::Error>(m)) return;
    if (std::holds_alternative<rv::Ok>(m) && proving && request_id == auth_request) {
      authenticated = true;
      return;
    }
    __builtin_trap();  // anything else reached a connection that never proved the token
  }
  void close(rv::ConnId, const std::string&) override { closed = true; }

  std::vector<uint8_t> nonce;
  bool proving = false;  // the right MAC was sent, under auth_request
  uint32_t auth_request = 0;
  bool authenticated = false;
  bool closed = false;
};

// A (length byte, bytes) field of the input, or what is left of it.
std::string field(std::span<const uint8_t>& in) {
  if (in.empty()) return {};
  const size_t n = std::min<size_t>(in[0], in.size() - 1);
  std::string s(reinterpret_cast<const char*>(in.data() + 1), n);
  in = in.subspan(1 + n);
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t flags = data[0];
  const size_t piece = 1 + data[1] % 64;
  std::span<const uint8_t> in(data + 2, size - 2);

  rv::ServerOptions o = rv::fuzz::small_server(1u << 14);
  o.token = kToken;
  PreAuthSink sink;
  rv::ServerCore core(o, sink);
  rv::Clock::time_point now = rv::Clock::time_point{} + 1000s;
  if (!core.on_connect(kConn, "10.0.0.1:1", now)) __builtin_trap();

  auto feed = [&](std::span<const uint8_t> bytes) {
    while (!bytes.empty() && !sink.closed) {
      const size_t n = std::min(piece, bytes.size());
      core.on_bytes(kConn, bytes.first(n), now);
      bytes = bytes.subspan(n);
      now += 1ms;
      core.expire(now);
      if (!sink.authenticated && core.job_count() != 0) __builtin_trap();
    }
  };

  if ((flags & 1) == 0) {
    rv::Hello hello;
    hello.job_id = field(in);
    hello.host = field(in);
    hello.client = field(in);
    if (!in.empty()) {
      hello.pid = in[0];
      in = in.subspan(1);
    }
    feed(rv::encode_frame(1, hello));
    if (!sink.nonce.empty() && !sink.closed) {
      const bool right = (flags & 2) != 0;
      sink.proving = right;
      sink.auth_request = 2;
      feed(rv::encode_frame(
          2, rv::Auth{rv::auth_mac(right ? kToken : "wrong-token", sink.nonce, hello.job_id)}));
      if (right && !sink.closed && !sink.authenticated) __builtin_trap();  // the right MAC refused
    }
  }
  feed(in);

  core.on_disconnect(kConn, "end");
  now += 10s;
  core.expire(now);
  if (core.connection_count() != 0 || core.job_count() != 0 || core.next_deadline())
    __builtin_trap();
  return 0;
}
