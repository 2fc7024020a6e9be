// Ranks behind a node agent, as the server's core sees them (server_core/
// relay.cpp): each channel of an agent's connection is a rank with every
// rule of a rank on its own connection; what the core says to an agent's
// ranks in one call comes as one Relay; a rank's end carries the agent's
// message; a lost agent fails its ranks together, named with the node.
#include <catch2/catch.hpp>

#include <algorithm>

#include "tests/unit/server_core_harness.hpp"

namespace cc::test {
namespace {

constexpr rv::ConnId kAgent = 1;

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

rv::Hello rank_hello(int rank, const std::string& host = "node-a") {
  return rv::Hello{"job", host, static_cast<uint32_t>(1000 + rank), "test rank"};
}

rv::RelayEntry open_entry(uint32_t channel, int rank, const std::string& host = "node-a") {
  return {channel, rv::RelayOp::open, rv::encode_frame(1, rank_hello(rank, host))};
}

rv::RelayEntry frame_entry(uint32_t channel, const rv::Message& m, uint32_t rid = 2) {
  return {channel, rv::RelayOp::frames, rv::encode_frame(rid, m)};
}

// The frames of one Relay entry, decoded.
std::vector<Sent> frames_of(const rv::RelayEntry& e) {
  rv::FrameReader r;
  r.feed(e.data);
  std::vector<Sent> out;
  while (auto f = r.next()) out.push_back({f->request_id, f->message});
  REQUIRE(r.error() == rv::DecodeError::none);
  REQUIRE(r.buffered() == 0);
  return out;
}

// What each channel got in the Relays sent to the agent since the last take.
struct ToAgent {
  size_t relays = 0;
  std::map<uint32_t, std::vector<Sent>> frames;
  std::map<uint32_t, std::string> closed;
};

ToAgent to_agent(Harness& h) {
  ToAgent out;
  for (const Sent& s : h.take(kAgent)) {
    const auto* relay = std::get_if<rv::Relay>(&s.message);
    if (relay == nullptr) continue;
    ++out.relays;
    for (const auto& e : relay->entries) {
      if (e.op == rv::RelayOp::close) {
        out.closed[e.channel] = std::string(e.data.begin(), e.data.end());
        continue;
      }
      REQUIRE(e.op == rv::RelayOp::frames);
      for (Sent& f : frames_of(e)) out.frames[e.channel].push_back(std::move(f));
    }
  }
  return out;
}

// An agent with `n` ranks of a communicator of `world` (the others direct).
void agent_with_ranks(Harness& h, int n, int world) {
  h.client(kAgent);
  rv::Relay relay;
  for (int i = 0; i < n; ++i) relay.entries.push_back(open_entry(static_cast<uint32_t>(i + 1), i));
  for (int i = 0; i < n; ++i)
    relay.entries.push_back(frame_entry(static_cast<uint32_t>(i + 1), join_msg(i, world, "node-a")));
  h.feed(kAgent, relay);
}

// A rank that joins directly, on connection `id`, as host "host-<id>".
void direct_rank(Harness& h, rv::ConnId id, int rank, int world) {
  h.client(id);
  h.feed(id, join_msg(rank, world, "host-" + std::to_string(id)));
}

// Ranks 0 and 1 of 3 behind the agent and rank 2 direct on connection 9,
// joined; what the joins were answered is taken.
void agent_and_direct_joined(Harness& h) {
  agent_with_ranks(h, 2, 3);
  direct_rank(h, 9, 2, 3);
  (void)h.one_as<rv::Joined>(9);
  (void)to_agent(h);
}

TEST_CASE("the ranks behind an agent join as ranks do, and their answers come as one relay") {
  Harness h;
  agent_with_ranks(h, 3, 4);
  CHECK(h.take(kAgent).empty());  // waiting for rank 3
  direct_rank(h, 9, 3, 4);
  const auto joined = h.one_as<rv::Joined>(9);
  CHECK(joined.unique_id == std::vector<uint8_t>{4, 2});
  const ToAgent got = to_agent(h);
  CHECK(got.relays == 1);
  REQUIRE(got.frames.size() == 3);
  for (const auto& [channel, frames] : got.frames) {
    INFO("channel " << channel);
    REQUIRE(frames.size() == 1);
    CHECK(frames[0].request_id == 2);
    REQUIRE(std::holds_alternative<rv::Joined>(frames[0].message));
    CHECK(std::get<rv::Joined>(frames[0].message).unique_id == std::vector<uint8_t>{4, 2});
  }
  CHECK(h.core.connection_count() == 2);  // the agent's and rank 3's
  CHECK(h.core.relayed_rank_count() == 3);
  const rv::ServerMetrics m = h.core.metrics(h.now);
  CHECK(m.connections_open == 2);
  CHECK(m.agent_ranks == 3);
  CHECK(m.counters.connections_accepted == 2);
}

TEST_CASE("a world larger than the server's connections is refused, behind agents too") {
  rv::ServerOptions o;
  o.max_connections = 5;
  Harness h(o);
  direct_rank(h, 9, 1, 6);
  const std::string direct = h.error_of(h.one(9)).message;
  CHECK_THAT(direct, Catch::Contains("asks for a world of 6 ranks, more than the server can hold: "
                                     "its limit is 5 connections (a rank behind cc-run's node "
                                     "agent counts as one); check WORLD_SIZE"));
  agent_with_ranks(h, 3, 3);  // the agent and its three ranks: four of the five
  const ToAgent got = to_agent(h);
  REQUIRE(got.frames.size() == 3);
  for (const auto& [channel, frames] : got.frames) {
    REQUIRE(frames.size() == 1);
    CHECK(std::holds_alternative<rv::Joined>(frames[0].message));
  }
}

TEST_CASE("a rank's end carries the agent's words to the others") {
  Harness h;
  agent_and_direct_joined(h);
  h.feed(kAgent, rv::Relay{{{2, rv::RelayOp::close, bytes_of("exited with signal 9 (killed)")}}});
  const auto ev = h.one_as<rv::PeerEvent>(9);
  CHECK(ev.kind == rv::PeerEventKind::failed);
  CHECK(ev.rank == 1);
  CHECK(ev.host == "node-a");
  CHECK(ev.pid == 1001);
  CHECK(ev.reason == "exited with signal 9 (killed)");
  CHECK(ev.with.empty());
  const ToAgent got = to_agent(h);
  REQUIRE(got.frames.count(1) == 1);
  REQUIRE(got.frames.at(1).size() == 1);
  CHECK(std::get<rv::PeerEvent>(got.frames.at(1)[0].message).reason ==
        "exited with signal 9 (killed)");
  CHECK(got.frames.count(2) == 0);  // the rank that ended hears nothing
  CHECK(h.core.relayed_rank_count() == 1);
}

TEST_CASE("a lost agent fails its ranks together, named with its node") {
  Harness h;
  agent_with_ranks(h, 3, 5);
  direct_rank(h, 8, 3, 5);
  direct_rank(h, 9, 4, 5);
  (void)h.one_as<rv::Joined>(8);
  (void)h.one_as<rv::Joined>(9);
  h.core.on_disconnect(kAgent, "the client closed the connection", h.now);
  for (rv::ConnId id : {rv::ConnId{8}, rv::ConnId{9}}) {
    INFO("connection " << id);
    const auto ev = h.one_as<rv::PeerEvent>(id);  // one event for the three
    CHECK(ev.kind == rv::PeerEventKind::failed);
    CHECK(ev.rank == 0);
    CHECK(ev.with == std::vector<int32_t>{1, 2});
    CHECK(ev.reason ==
          "its node agent (cc-run, pid 1, on host host-1 at 10.0.0.1:5000) was lost: the client "
          "closed the connection");
  }
  CHECK(h.core.relayed_rank_count() == 0);
}

TEST_CASE("a silent agent is failed at its heartbeat window; its ranks keep none of their own") {
  Harness h;
  agent_and_direct_joined(h);
  h.feed(kAgent, rv::HeartbeatWindow{2000});
  (void)h.one_as<rv::Ok>(kAgent);
  // The ranks ask for a short window and beat through the agent: no
  // acknowledgement from the server (the agent gives it), no deadline of theirs.
  h.feed(kAgent, rv::Relay{{frame_entry(1, rv::HeartbeatWindow{100}, 5),
                            frame_entry(1, rv::Heartbeat{7}, 6)}});
  ToAgent got = to_agent(h);
  REQUIRE(got.frames.at(1).size() == 1);
  CHECK(std::holds_alternative<rv::Ok>(got.frames.at(1)[0].message));
  h.advance(1500ms);
  CHECK(h.take(9).empty());
  CHECK(h.sink.closed.count(kAgent) == 0);
  h.advance(600ms);  // the agent's own window passed
  const auto ev = h.one_as<rv::PeerEvent>(9);
  CHECK(ev.rank == 0);
  CHECK(ev.with == std::vector<int32_t>{1});
  CHECK(ev.reason.find("was lost: no heartbeat for 2000 ms") != std::string::npos);
  CHECK(h.sink.closed.count(kAgent) == 1);
}

TEST_CASE("an agent's mistakes end the agent or the rank, and other jobs are not touched") {
  Harness h;
  h.client(kAgent);
  SECTION("a channel opened twice drops the agent") {
    h.feed(kAgent, rv::Relay{{open_entry(1, 0), open_entry(1, 1)}});
    CHECK(h.refusal(kAgent, CC_ERR_RENDEZVOUS).find("opened channel 1 twice") !=
          std::string::npos);
    CHECK(h.sink.closed.count(kAgent) == 1);
  }
  SECTION("an open without a hello ends that channel with words") {
    h.feed(kAgent, rv::Relay{{{3, rv::RelayOp::open, rv::encode_frame(1, rv::Leave{})}}});
    const ToAgent got = to_agent(h);
    REQUIRE(got.closed.count(3) == 1);
    CHECK(got.closed.at(3).find("without the rank's hello") != std::string::npos);
    CHECK(h.sink.closed.count(kAgent) == 0);
  }
  SECTION("a rank that sends a relay of its own is dropped alone") {
    h.feed(kAgent, rv::Relay{{open_entry(1, 0), frame_entry(1, rv::Relay{})}});
    const ToAgent got = to_agent(h);
    REQUIRE(got.closed.count(1) == 1);
    CHECK(got.closed.at(1).find("relay of its own") != std::string::npos);
    CHECK(h.sink.closed.count(kAgent) == 0);
  }
  SECTION("frames for a channel that ended are dropped") {
    h.feed(kAgent, rv::Relay{{frame_entry(7, rv::Leave{})}});
    CHECK(to_agent(h).relays == 0);
    CHECK(h.sink.closed.count(kAgent) == 0);
  }
}

TEST_CASE("the connection limit counts the ranks agents carry") {
  rv::ServerOptions o;
  o.max_connections = 3;
  Harness h(o);
  h.client(kAgent);
  rv::Relay relay;
  for (uint32_t c = 1; c <= 10; ++c) relay.entries.push_back(open_entry(c, static_cast<int>(c)));
  h.feed(kAgent, relay);
  CHECK(h.core.relayed_rank_count() == 2);
  const ToAgent got = to_agent(h);
  CHECK(got.closed.size() == 8);
  CHECK_THAT(got.closed.at(10), Catch::Contains("at its limit of 3 connections, and a rank behind "
                                                "a node agent counts as one"));
  CHECK_FALSE(h.core.on_connect(2, "10.0.0.2:5000", h.now));
  CHECK(h.sink.closed.count(kAgent) == 0);
}

}  // namespace
}  // namespace cc::test
