// The node agent's core (rendezvous/agent/agent_core.hpp) with a fake
// server and fake ranks: the ranks' handshakes answered by the agent, their
// frames carried in one Relay per flush, heartbeats answered here and
// forwarded at the agent's own, a rank's end told with a message, and what the
// ranks hear when the server is lost.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "cc/cc.h"
#include "rendezvous/agent/agent_core.hpp"
#include "rendezvous/auth.hpp"

namespace cc::test {
namespace {

namespace rv = cc::rv;
namespace ag = cc::rv::agent;
using namespace std::chrono_literals;

struct Frame {
  uint32_t rid;
  rv::Message m;
};

std::vector<Frame> decode_all(std::span<const uint8_t> bytes) {
  rv::FrameReader r;
  r.feed(bytes);
  std::vector<Frame> out;
  while (auto f = r.next()) out.push_back({f->request_id, f->message});
  REQUIRE(r.error() == rv::DecodeError::none);
  REQUIRE(r.buffered() == 0);
  return out;
}

class FakeIo : public ag::AgentIo {
 public:
  void to_upstream(std::vector<uint8_t> bytes) override {
    for (Frame& f : decode_all(bytes)) upstream.push_back(std::move(f));
  }
  void to_rank(ag::LocalId rank, std::span<const uint8_t> bytes) override {
    for (Frame& f : decode_all(bytes)) ranks[rank].push_back(std::move(f));
  }
  void close_rank(ag::LocalId rank) override { closed.push_back(rank); }

  std::vector<Frame> upstream;
  std::map<ag::LocalId, std::vector<Frame>> ranks;
  std::vector<ag::LocalId> closed;
};

struct Agent {
  // failover: not zero, the agent follows an elected server for that long.
  explicit Agent(std::string token = "", std::chrono::milliseconds failover = 0ms) {
    ag::AgentOptions o;
    o.failover_timeout = failover;
    o.elected_by = "etcd://10.0.0.1:2379";
    o.job_id = "job";
    o.token = std::move(token);
    o.host = "node-a";
    o.pid = 77;
    o.upstream = "10.0.0.9:29500";
    o.heartbeat_interval = 1000ms;
    o.heartbeat_window = 5000ms;
    o.exit_grace = 200ms;
    core = std::make_unique<ag::AgentCore>(o, io);
  }

  void server_says(const rv::Message& m, uint32_t rid = 0) {
    core->upstream_bytes(rv::encode_frame(rid, m), now);
  }
  // Connected to a server without a token.
  void ready() {
    io.upstream.clear();
    core->upstream_connected(now);
    REQUIRE(io.upstream.size() == 1);
    CHECK(std::get<rv::Hello>(io.upstream[0].m).client.find("node agent") != std::string::npos);
    server_says(rv::Challenge{false, {}, "cc-rendezvous"}, io.upstream[0].rid);
    REQUIRE(core->upstream_ready());
    // The agent's own frames; what it relays for ranks stays for relayed().
    std::erase_if(io.upstream, [](const Frame& f) { return !std::holds_alternative<rv::Relay>(f.m); });
  }
  void rank_sends(ag::LocalId rank, const rv::Message& m, uint32_t rid) {
    core->rank_bytes(rank, rv::encode_frame(rid, m), now);
  }
  // A rank connected and through its handshake.
  void rank(ag::LocalId id, pid_t pid) {
    core->rank_connected(id, pid, pid, now);
    rank_sends(id, rv::Hello{"job", "node-a", static_cast<uint32_t>(pid), "cc comm"}, 1);
  }
  // The Relay entries sent upstream since the last call.
  std::vector<rv::RelayEntry> relayed() {
    std::vector<rv::RelayEntry> out;
    for (Frame& f : io.upstream)
      if (auto* r = std::get_if<rv::Relay>(&f.m))
        for (auto& e : r->entries) out.push_back(std::move(e));
    io.upstream.clear();
    return out;
  }

  FakeIo io;
  std::unique_ptr<ag::AgentCore> core;
  ag::Clock::time_point now = ag::Clock::time_point{} + 1000s;
};

TEST_CASE("a rank's hello waits for the server; then its channel opens with it") {
  Agent a;
  a.rank(1, 4242);
  CHECK(a.io.ranks[1].empty());  // no server yet: no answer
  a.ready();
  REQUIRE(a.io.ranks[1].size() == 1);
  CHECK(a.io.ranks[1][0].rid == 1);
  CHECK_FALSE(std::get<rv::Challenge>(a.io.ranks[1][0].m).auth_required);
  rv::Join join;
  join.info.rank = 0;
  join.info.world_size = 2;
  a.rank_sends(1, join, 2);  // carried as it is: the server decides
  a.core->flush();
  const auto entries = a.relayed();
  REQUIRE(entries.size() == 2);
  CHECK(entries[0].op == rv::RelayOp::open);
  const auto hello = decode_all(entries[0].data);
  REQUIRE(hello.size() == 1);
  CHECK(std::get<rv::Hello>(hello[0].m).pid == 4242);
  CHECK(entries[1].op == rv::RelayOp::frames);
  CHECK(entries[1].channel == entries[0].channel);
  CHECK(decode_all(entries[1].data).size() == 1);
}

TEST_CASE("what every rank sent goes as one relay, and the server's answers reach each rank") {
  Agent a;
  a.ready();
  for (ag::LocalId id = 1; id <= 8; ++id) a.rank(id, static_cast<pid_t>(100 + id));
  for (ag::LocalId id = 1; id <= 8; ++id) a.rank_sends(id, rv::Leave{}, 5);
  a.core->flush();
  REQUIRE(a.io.upstream.size() == 1);  // one frame for the node
  const auto entries = a.relayed();
  CHECK(entries.size() == 16);  // an open and a frame per rank
  rv::Relay answer;
  for (const auto& e : entries)
    if (e.op == rv::RelayOp::open)
      answer.entries.push_back({e.channel, rv::RelayOp::frames, rv::encode_frame(5, rv::Ok{})});
  a.server_says(answer);
  for (ag::LocalId id = 1; id <= 8; ++id) {
    INFO("rank connection " << id);
    REQUIRE(a.io.ranks[id].size() == 2);  // the challenge, then the answer
    CHECK(a.io.ranks[id][1].rid == 5);
    CHECK(std::holds_alternative<rv::Ok>(a.io.ranks[id][1].m));
  }
}

TEST_CASE("with a token the agent asks each rank for it") {
  Agent a("s3cret");
  a.core->upstream_connected(a.now);
  const auto nonce = std::vector<uint8_t>(32, 7);
  a.server_says(rv::Challenge{true, nonce, "cc-rendezvous"}, a.io.upstream[0].rid);
  REQUIRE(a.io.upstream.size() == 2);
  CHECK(std::get<rv::Auth>(a.io.upstream[1].m).mac == rv::auth_mac("s3cret", nonce, "job"));
  a.server_says(rv::Ok{}, a.io.upstream[1].rid);
  REQUIRE(a.core->upstream_ready());
  a.io.upstream.clear();

  a.rank(1, 11);
  const auto ch = std::get<rv::Challenge>(a.io.ranks[1].at(0).m);
  REQUIRE(ch.auth_required);
  SECTION("the right token opens the channel") {
    a.rank_sends(1, rv::Auth{rv::auth_mac("s3cret", ch.nonce, "job")}, 2);
    CHECK(std::holds_alternative<rv::Ok>(a.io.ranks[1].at(1).m));
    a.core->flush();
    CHECK(a.relayed().size() == 1);
  }
  SECTION("a wrong one is refused with words, and nothing goes to the server") {
    a.rank_sends(1, rv::Auth{rv::auth_mac("guess", ch.nonce, "job")}, 2);
    const auto e = std::get<rv::Error>(a.io.ranks[1].at(1).m);
    CHECK(e.code == CC_ERR_AUTH);
    CHECK(e.message.find("token was refused by cc-run's node agent on host node-a (pid 77)") !=
          std::string::npos);
    CHECK(a.io.closed == std::vector<ag::LocalId>{1});
    a.core->flush();
    CHECK(a.relayed().empty());
  }
}

TEST_CASE("heartbeats are answered by the agent and forwarded at its own") {
  Agent a;
  a.ready();
  a.rank(1, 11);
  a.core->flush();
  (void)a.relayed();
  a.rank_sends(1, rv::Heartbeat{3}, 7);
  a.rank_sends(1, rv::Heartbeat{4}, 8);
  REQUIRE(a.io.ranks[1].size() == 3);
  CHECK(a.io.ranks[1][1].rid == 7);
  CHECK(std::holds_alternative<rv::HeartbeatAck>(a.io.ranks[1][1].m));
  a.core->flush();
  CHECK(a.relayed().empty());  // not before the agent's heartbeat
  a.now += 1000ms;
  a.core->tick(a.now);
  std::vector<Frame> own;
  for (const Frame& f : a.io.upstream)
    if (std::holds_alternative<rv::Heartbeat>(f.m)) own.push_back(f);
  CHECK(own.size() == 1);
  const auto entries = a.relayed();
  REQUIRE(entries.size() == 1);
  const auto beats = decode_all(entries[0].data);
  REQUIRE(beats.size() == 1);  // only the latest
  CHECK(std::get<rv::Heartbeat>(beats[0].m).last_completed == 4);
}

TEST_CASE("a rank's end is told with its exit status, or that it closed its connection") {
  Agent a;
  a.ready();
  a.rank(1, 11);
  a.rank(2, 12);
  a.core->flush();
  const auto opened = a.relayed();
  REQUIRE(opened.size() == 2);
  const uint32_t first = opened[0].channel, second = opened[1].channel;
  SECTION("an exit is told at once, closing the connection") {
    a.core->process_exited(11, "exited with signal 9 (killed)", a.now);
    const auto entries = a.relayed();  // flushed by process_exited itself
    REQUIRE(entries.size() == 1);
    CHECK(entries[0].op == rv::RelayOp::close);
    CHECK(entries[0].channel == first);
    CHECK(std::string(entries[0].data.begin(), entries[0].data.end()) ==
          "exited with signal 9 (killed)");
    CHECK(a.io.closed == std::vector<ag::LocalId>{1});
  }
  SECTION("a connection that ends waits for the exit status") {
    a.core->rank_closed(2, a.now);
    a.now += 50ms;
    a.core->tick(a.now);
    CHECK(a.relayed().empty());
    a.core->process_exited(12, "exited with status 3", a.now);
    const auto entries = a.relayed();
    REQUIRE(entries.size() == 1);
    CHECK(entries[0].channel == second);
    CHECK(std::string(entries[0].data.begin(), entries[0].data.end()) == "exited with status 3");
    CHECK(a.io.closed.empty());  // it was closed already
  }
  SECTION("without an exit status in time, the words say what is known") {
    a.core->rank_closed(2, a.now);
    a.now += 250ms;
    a.core->tick(a.now);
    const auto entries = a.relayed();
    REQUIRE(entries.size() == 1);
    CHECK(std::string(entries[0].data.begin(), entries[0].data.end()) ==
          "closed its connection to cc-run's node agent on host node-a (pid 77) without "
          "leaving, and its process was not seen to exit");
  }
}

TEST_CASE("when the server is lost, members hear it in words and waiting ranks get an error") {
  Agent a;
  a.ready();
  a.rank(1, 11);
  a.core->upstream_lost("the connection to the rendezvous at 10.0.0.9:29500 ended (closed by "
                        "the server)",
                        a.now);
  a.core->rank_connected(2, 12, 12, a.now);
  a.rank_sends(2, rv::Hello{"job", "node-a", 12, "cc comm"}, 1);
  const auto ev = std::get<rv::PeerEvent>(a.io.ranks[1].back().m);
  CHECK(ev.kind == rv::PeerEventKind::server_stopping);
  CHECK(ev.reason ==
        "cc-run's node agent on host node-a (pid 77) lost the rendezvous: the connection to the "
        "rendezvous at 10.0.0.9:29500 ended (closed by the server)");
  const auto e = std::get<rv::Error>(a.io.ranks[2].back().m);
  CHECK(e.code == CC_ERR_RENDEZVOUS);
  CHECK(e.message.find("cannot reach the rendezvous: the connection to the rendezvous at "
                       "10.0.0.9:29500 ended") != std::string::npos);
  CHECK(a.io.closed == std::vector<ag::LocalId>{1, 2});
}

TEST_CASE("the agent gives the server up when it hears nothing for its window") {
  Agent a;
  a.ready();
  a.rank(1, 11);
  for (int i = 0; i < 7; ++i) {
    a.now += 1000ms;
    a.core->tick(a.now);
  }
  CHECK_FALSE(a.core->upstream_ready());
  CHECK(a.core->upstream_failure().find("nothing heard from the rendezvous at 10.0.0.9:29500 "
                                        "for 7000 ms") != std::string::npos);
  CHECK(a.io.closed == std::vector<ag::LocalId>{1});
}

TEST_CASE("following the election: the ranks' connections close without a word, their hellos "
          "wait for the next server, and they resume there through new channels") {
  Agent a("", 8000ms);
  a.ready();
  a.rank(1, 11);
  a.rank(2, 12);
  a.core->flush();
  const auto before = a.relayed();
  REQUIRE(before.size() == 2);
  const size_t heard = a.io.ranks[1].size();  // the agent's challenge
  a.core->upstream_lost("the connection to the rendezvous at 10.0.0.9:29500 ended (closed by "
                        "the server)",
                        a.now);
  CHECK(a.core->following());
  CHECK_FALSE(a.core->upstream_ready());
  CHECK(a.core->upstream_failure().empty());
  CHECK(a.io.ranks[1].size() == heard);  // no event, no error: the rank's client moves
  std::sort(a.io.closed.begin(), a.io.closed.end());
  CHECK(a.io.closed == std::vector<ag::LocalId>{1, 2});
  // Rank 1's client connects again and says hello: it waits for the next server.
  a.now += 1500ms;
  a.rank(3, 11);
  a.core->tick(a.now);
  CHECK(a.io.ranks[3].empty());
  // A first attempt fails (the old leader's address still published).
  a.core->upstream_lost("cannot reach the rendezvous at 10.0.0.9:29500 after 3 attempts: "
                        "connection refused",
                        a.now);
  CHECK(a.core->following());
  a.now += 1500ms;
  a.core->upstream_moved("10.0.0.8:29500");
  a.ready();
  CHECK_FALSE(a.core->following());
  REQUIRE(a.io.ranks[3].size() == 1);
  CHECK(std::get<rv::Challenge>(a.io.ranks[3][0].m).server.find("10.0.0.8:29500") !=
        std::string::npos);
  rv::Resume resume;
  resume.info.rank = 0;
  resume.info.world_size = 2;
  resume.rank = 0;
  resume.world_size = 2;
  resume.seat = {1, 2, 3};
  a.rank_sends(3, resume, 2);
  a.core->flush();
  const auto after = a.relayed();
  REQUIRE(after.size() == 2);
  CHECK(after[0].op == rv::RelayOp::open);
  CHECK(after[1].op == rv::RelayOp::frames);
  const auto frames = decode_all(after[1].data);
  REQUIRE(frames.size() == 1);
  CHECK(std::get<rv::Resume>(frames[0].m).seat == std::vector<uint8_t>{1, 2, 3});
  // The server's answer reaches the rank on its new channel.
  rv::Relay answer;
  answer.entries.push_back({after[0].channel, rv::RelayOp::frames, rv::encode_frame(2, rv::Ok{})});
  a.server_says(answer);
  REQUIRE(a.io.ranks[3].size() == 2);
  CHECK(std::holds_alternative<rv::Ok>(a.io.ranks[3][1].m));
}

TEST_CASE("following the election: with no next server by the deadline, waiting ranks are "
          "refused at once with the cause and the fix") {
  Agent a("", 8000ms);
  a.ready();
  a.rank(1, 11);
  const auto lost_at = a.now;
  a.core->upstream_lost("the connection to the rendezvous at 10.0.0.9:29500 ended (closed by "
                        "the server)",
                        a.now);
  a.now += 100ms;
  a.rank(2, 11);
  CHECK(a.core->next_deadline() == lost_at + 8000ms);
  a.now += 3000ms;
  a.core->upstream_lost("cannot reach the rendezvous at 10.0.0.9:29500 after 4 attempts: "
                        "connection refused",
                        a.now);
  a.now = lost_at + 8000ms;
  a.core->tick(a.now);
  CHECK_FALSE(a.core->following());
  const auto e = std::get<rv::Error>(a.io.ranks[2].back().m);
  CHECK(e.code == CC_ERR_RENDEZVOUS);
  CHECK(e.message.find("lost the rendezvous server at 10.0.0.9:29500 (the connection to the "
                       "rendezvous at 10.0.0.9:29500 ended (closed by the server)) and no next "
                       "server took over within 8000 ms (the election at etcd://10.0.0.1:2379 "
                       "named none that answered; the last attempt: cannot reach the rendezvous "
                       "at 10.0.0.9:29500 after 4 attempts: connection refused)") !=
        std::string::npos);
  CHECK(e.message.find("cc-rendezvous --etcd") != std::string::npos);
  // A rank that comes later is refused with the same words.
  a.rank(3, 13);
  const auto later = std::get<rv::Error>(a.io.ranks[3].back().m);
  CHECK(later.message.find("no next server took over") != std::string::npos);
}

TEST_CASE("following the election: a server silent past the window is left for the next") {
  Agent a("", 8000ms);
  a.ready();
  a.rank(1, 11);
  for (int i = 0; i < 7; ++i) {
    a.now += 1000ms;
    a.core->tick(a.now);
  }
  CHECK(a.core->following());
  CHECK(a.core->upstream_failure().empty());
  CHECK(a.io.closed == std::vector<ag::LocalId>{1});
  a.ready();
  CHECK(a.core->upstream_ready());
}

}  // namespace
}  // namespace cc::test
