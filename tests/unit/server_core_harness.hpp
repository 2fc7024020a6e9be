// ServerCore driven directly, with a fake Sink and a fake clock: no sockets.
// Every message the core sends is encoded and decoded again on the way, as
// a real connection would carry it.
#pragma once

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "rendezvous/server_core.hpp"
#include "tests/common/join_msg.hpp"

namespace cc::test {

namespace rv = cc::rv;
using namespace std::chrono_literals;

struct Sent {
  uint32_t request_id;
  rv::Message message;
};

class FakeSink : public rv::Sink {
 public:
  void send(rv::ConnId conn, uint32_t request_id, const rv::Message& m) override {
    rv::FrameReader r;
    r.feed(rv::encode_frame(request_id, m));
    auto f = r.next();
    REQUIRE(f);
    out[conn].push_back({request_id, f->message});
  }
  void close(rv::ConnId conn, const std::string& reason) override { closed[conn] = reason; }
  void job_idle(const std::string& job) override { ++idle[job]; }

  std::map<rv::ConnId, std::vector<Sent>> out;
  std::map<rv::ConnId, std::string> closed;
  std::map<std::string, int> idle;
};

struct Harness {
  explicit Harness(rv::ServerOptions o = {}) : options(std::move(o)), core(options, sink) {}

  void connect(rv::ConnId id) {
    REQUIRE(core.on_connect(id, "10.0.0." + std::to_string(id) + ":5000", now));
  }
  void feed(rv::ConnId id, const rv::Message& m, uint32_t rid = 1) {
    core.on_bytes(id, rv::encode_frame(rid, m), now);
  }
  // Connects and says hello (no token).
  void client(rv::ConnId id, const std::string& job = "job") {
    connect(id);
    feed(id, rv::Hello{job, "host-" + std::to_string(id), static_cast<uint32_t>(id), "test"});
    REQUIRE(take(id).size() == 1);
  }
  std::vector<Sent> take(rv::ConnId id) {
    auto v = std::move(sink.out[id]);
    sink.out[id].clear();
    return v;
  }
  // The one message sent to id since the last take.
  rv::Message one(rv::ConnId id) {
    auto v = take(id);
    INFO("messages to connection " << id << ": " << v.size());
    REQUIRE(v.size() == 1);
    return v[0].message;
  }
  // The one message sent to id since the last take, which must be a T (the
  // message of an Error in its place are shown).
  template <class T>
  T one_as(rv::ConnId id) {
    const rv::Message m = one(id);
    INFO("connection " << id << " got " << rv::type_name(rv::type_of(m)) << ": "
                       << (std::holds_alternative<rv::Error>(m) ? std::get<rv::Error>(m).message
                                                                : std::string()));
    REQUIRE(std::holds_alternative<T>(m));
    return std::get<T>(m);
  }
  rv::Error error_of(const rv::Message& m) {
    INFO("message type " << rv::type_name(rv::type_of(m)));
    REQUIRE(std::holds_alternative<rv::Error>(m));
    return std::get<rv::Error>(m);
  }
  // The one message sent to id since the last take, an Error with `code`:
  // its message.
  std::string refusal(rv::ConnId id, uint32_t code) {
    const rv::Error e = error_of(one(id));
    INFO("connection " << id << ": " << e.message);
    CHECK(e.code == code);
    return e.message;
  }
  void advance(std::chrono::milliseconds d) {
    now += d;
    core.expire(now);
  }

  rv::ServerOptions options;
  FakeSink sink;
  rv::ServerCore core;
  rv::Clock::time_point now = rv::Clock::time_point{} + 1000s;
};

// The ranks of a Joined's members or of a preflight plan's targets, in their
// order (or as a std::set<int>, when the order is not what a test checks).
template <class Ranks = std::vector<int32_t>, class Items>
Ranks ranks_of(const Items& items) {
  Ranks out;
  for (const auto& i : items) out.insert(out.end(), i.rank);
  return out;
}

// CHECKs that `m` comes back from its frame with every field: decoded, it
// encodes to the same bytes.
inline void check_round_trip(const rv::Message& m) {
  INFO("type " << rv::type_name(rv::type_of(m)));
  const auto bytes = rv::encode_frame(9, m);
  rv::FrameReader r;
  r.feed(bytes);
  auto f = r.next();
  REQUIRE(f);
  CHECK(f->message.index() == m.index());
  CHECK(rv::encode_frame(9, f->message) == bytes);
}

// The text of a Value.
inline std::string text(const rv::Message& m) {
  const auto& v = std::get<rv::Value>(m).value;
  return {v.begin(), v.end()};
}

}  // namespace cc::test
