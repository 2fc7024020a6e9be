// One hostile rank against a real rendezvous server on loopback: what it
// sends, or asks too much of, ends its own channel or connection, never its
// node agent's link; a seat in a communicator belongs to the connection that
// holds it. Node agents are raw sockets speaking Relay, or cc-run's own
// (NodeAgent) with ranks on its Unix socket.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <poll.h>

#include <cstring>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <asio/io_context.hpp>

#include "rendezvous/agent/node_agent.hpp"
#include "rendezvous/server.hpp"
#include "tests/common/join_msg.hpp"
#include "tests/rendezvous/raw_client.hpp"

using namespace std::chrono_literals;
using cc::test::RawClient;
namespace rv = cc::rv;

namespace {

std::unique_ptr<rv::Server> start_server(rv::ServerOptions o = {}) {
  o.bind_addr = "127.0.0.1";
  o.port = 0;
  std::unique_ptr<rv::Server> s;
  cc::Status st = rv::Server::start(o, &s);
  INFO(st.message);
  REQUIRE(st.ok());
  return s;
}

std::vector<uint8_t> big_value() {
  std::vector<uint8_t> v(rv::Limits{}.max_value);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(i * 7 + 3);
  return v;
}

// A node agent on a raw socket: it opens channels and reads what the server
// says to each.
class RawAgent {
 public:
  RawAgent(int port, const std::string& job) : c_(port), job_(job) {
    REQUIRE(c_.hello(job, "node-x", 77));
  }

  void open(uint32_t channel, int pid) { open_as(channel, job_, pid); }
  void open_as(uint32_t channel, const std::string& job, int pid) {
    rv::Relay r;
    r.entries.push_back({channel, rv::RelayOp::open,
                         rv::encode_frame(1, rv::Hello{job, "node-x", static_cast<uint32_t>(pid),
                                                       "hostile rank"})});
    REQUIRE(c_.send(0, r));
  }

  bool send(uint32_t channel, uint32_t rid, const rv::Message& m) {
    rv::Relay r;
    r.entries.push_back({channel, rv::RelayOp::frames, rv::encode_frame(rid, m)});
    return c_.send(0, r);
  }
  bool send_many(uint32_t channel, const std::vector<rv::Message>& ms, uint32_t first_rid = 10) {
    rv::Relay r;
    r.entries.push_back({channel, rv::RelayOp::frames, {}});
    for (const rv::Message& m : ms) rv::append_frame(r.entries.back().data, first_rid++, m);
    return c_.send(0, r);
  }

  // The next frame the server says to `channel` (others' are kept), within
  // 10 s; nullopt when the agent's connection ends or a Relay is unreadable.
  std::optional<rv::FrameReader::Frame> next(uint32_t channel, std::chrono::seconds t = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + t;
    for (;;) {
      if (auto f = readers_[channel].next()) return f;
      if (closed_.count(channel)) return std::nullopt;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      auto f = c_.recv(left);
      if (!f) {
        link_lost_ = true;
        return std::nullopt;
      }
      if (auto* r = std::get_if<rv::Relay>(&f->message)) {
        ++relays_;
        for (const rv::RelayEntry& e : r->entries) {
          if (e.op == rv::RelayOp::frames) readers_[e.channel].feed(e.data);
          if (e.op == rv::RelayOp::close)
            closed_[e.channel] = std::string(e.data.begin(), e.data.end());
        }
      }
    }
  }
  // Why the server closed `channel` (empty while it has not).
  std::string closed_why(uint32_t channel) {
    auto it = closed_.find(channel);
    return it == closed_.end() ? "" : it->second;
  }
  bool link_lost() const { return link_lost_; }

 private:
  RawClient c_;
  std::string job_;
  std::map<uint32_t, rv::FrameReader> readers_;
  std::map<uint32_t, std::string> closed_;
  size_t relays_ = 0;
  bool link_lost_ = false;
};

// cc-run's node agent on its own io thread.
class RealAgent {
 public:
  RealAgent(int port, const std::string& job,
            std::chrono::milliseconds handshake_timeout = std::chrono::seconds(10))
      : work_(io_.get_executor()) {
    rv::agent::NodeAgentOptions o;
    o.agent.handshake_timeout = handshake_timeout;
    o.agent.job_id = job;
    o.agent.host = "node-y";
    o.agent.pid = 4242;
    o.agent.upstream = "127.0.0.1:" + std::to_string(port);
    o.server_host = "127.0.0.1";
    o.server_port = port;
    cc::Status st = rv::agent::NodeAgent::start(io_, o, &agent_);
    INFO(st.message);
    REQUIRE(st.ok());
    thread_ = std::thread([this] { io_.run(); });
  }
  ~RealAgent() {
    asio::post(io_, [this] { agent_.reset(); });
    work_.reset();
    thread_.join();
  }
  // A rank's connection to the agent's socket.
  std::unique_ptr<RawClient> rank() {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    const std::string& path = agent_->socket_path();
    std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
    return std::make_unique<RawClient>(fd, RawClient::Adopt{});
  }

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::unique_ptr<rv::agent::NodeAgent> agent_;
  std::thread thread_;
};

// A rank through the agent: hello (unless it said it), set, get back.
void rank_works(RawClient& r, const std::string& job, const std::string& key,
                bool say_hello = true) {
  if (say_hello) REQUIRE(r.hello(job, "node-y", 5));
  auto a = r.call(rv::Set{key, {4, 5, 6}}, 10s);
  REQUIRE(a);
  REQUIRE(std::holds_alternative<rv::Ok>(*a));
  a = r.call(rv::Get{key, 0}, 10s);
  REQUIRE(a);
  REQUIRE(std::holds_alternative<rv::Value>(*a));
  CHECK(std::get<rv::Value>(*a).value == std::vector<uint8_t>{4, 5, 6});
}

}  // namespace

TEST_CASE("a rank's answers larger than a frame reach it in pieces; its node's link stays") {
  auto server = start_server();
  RawAgent agent(server->port(), "big");
  agent.open(1, 101);
  agent.open(2, 102);
  const std::vector<uint8_t> v = big_value();
  REQUIRE(agent.send(1, 2, rv::Set{"v", v}));
  auto f = agent.next(1);
  REQUIRE(f);
  REQUIRE(std::holds_alternative<rv::Ok>(f->message));
  // Four legal Gets at once: 4 MiB of values and their headers, more than
  // one frame may carry.
  REQUIRE(agent.send_many(1, {rv::Get{"v", 0}, rv::Get{"v", 0}, rv::Get{"v", 0},
                              rv::Get{"v", 0}}));
  for (int i = 0; i < 4; ++i) {
    f = agent.next(1);
    INFO("answer " << i << "; the agent's link lost: " << agent.link_lost());
    REQUIRE(f);
    REQUIRE(std::holds_alternative<rv::Value>(f->message));
    CHECK(std::get<rv::Value>(f->message).value == v);
  }
  // The neighbour on the same node still works.
  REQUIRE(agent.send(2, 3, rv::Get{"v", 0}));
  f = agent.next(2);
  REQUIRE(f);
  CHECK(std::holds_alternative<rv::Value>(f->message));
}

TEST_CASE("a rank that does not read its replies ends its own channel, not its node's link") {
  auto server = start_server();
  RawAgent agent(server->port(), "flood");
  agent.open(1, 101);
  agent.open(2, 102);
  REQUIRE(agent.send(1, 2, rv::Set{"v", big_value()}));
  // 96 MiB of answers for rank 1, and the agent reads none of it for now.
  std::vector<rv::Message> gets(96, rv::Get{"v", 0});
  REQUIRE(agent.send_many(1, gets));
  // Until the server has done with them (a limit counted, or every answer
  // queued), then the agent reads.
  for (int i = 0; i < 600; ++i) {
    auto m = server->metrics(5s);
    REQUIRE(m);
    if (m->counters.limits[static_cast<size_t>(rv::LimitKind::write_queue)] > 0) break;
    std::this_thread::sleep_for(50ms);
  }
  // Rank 1 hears why, then its channel ends.
  std::string words;
  while (auto f = agent.next(1, 30s))
    if (auto* e = std::get_if<rv::Error>(&f->message)) words = e->message;
  INFO("the agent's link lost: " << agent.link_lost());
  REQUIRE_FALSE(agent.link_lost());
  CHECK_THAT(words, Catch::Contains("its replies are not read") &&
                        Catch::Contains("node agent (cc-run, on host node-x)") &&
                        Catch::Contains("64 MiB a rank"));
  CHECK_THAT(agent.closed_why(1), Catch::Contains("its replies are not read"));
  // Rank 2 on the same link goes on.
  REQUIRE(agent.send(2, 3, rv::Set{"k", {1}}));
  auto f = agent.next(2);
  REQUIRE(f);
  CHECK(std::holds_alternative<rv::Ok>(f->message));
}

TEST_CASE("through cc-run's agent, a rank's oversized frame or large answers end no other rank") {
  auto server = start_server();
  RealAgent agent(server->port(), "node");
  auto a = agent.rank();
  auto b = agent.rank();
  REQUIRE(a->hello("node", "node-y", 1));
  rank_works(*b, "node", "b");

  SECTION("four pipelined Gets of a 1 MiB value") {
    const std::vector<uint8_t> v = big_value();
    auto r = a->call(rv::Set{"v", v}, 10s);
    REQUIRE(r);
    REQUIRE(std::holds_alternative<rv::Ok>(*r));
    for (uint32_t rid = 10; rid < 14; ++rid) REQUIRE(a->send(rid, rv::Get{"v", 0}));
    for (int i = 0; i < 4; ++i) {
      auto f = a->recv(10s);
      INFO("answer " << i);
      REQUIRE(f);
      REQUIRE(std::holds_alternative<rv::Value>(f->message));
      CHECK(std::get<rv::Value>(f->message).value == v);
    }
  }
  SECTION("a frame of the largest size, which no message fills") {
    // A Set whose value passes the value limit: the server refuses the rank.
    rv::Set s{"k", std::vector<uint8_t>(rv::Limits{}.max_frame - 64, 1)};
    std::vector<uint8_t> frame;
    rv::append_frame(frame, 9, s);
    REQUIRE(frame.size() <= rv::kHeaderSize + rv::Limits{}.max_frame);
    REQUIRE(a->send_bytes(frame));
    std::vector<rv::Message> seen;
    REQUIRE(a->closed_within(10s, &seen));
    bool refused = false;
    for (const auto& m : seen)
      if (auto* e = std::get_if<rv::Error>(&m)) refused = !e->message.empty();
    CHECK(refused);
  }
  // The neighbour and a rank that arrives later still work.
  rank_works(*b, "node", "b2", false);
  auto c = agent.rank();
  rank_works(*c, "node", "c");
}

namespace {

// pid 500 + rank, as the members' hellos say.
rv::Join join_of(int rank, int world, uint32_t timeout_ms = 10000) {
  rv::Join j = cc::test::join_msg(rank, world, "host-" + std::to_string(rank), timeout_ms);
  j.info.pid = static_cast<uint32_t>(500 + rank);
  return j;
}

rv::Recover shrink_of(int rank, int world, uint32_t generation, std::vector<uint8_t> seat) {
  rv::Recover r;
  r.info = join_of(rank, world).info;  // host and pid as the member said them
  r.generation = generation;
  r.kind = rv::RecoverKind::shrink;
  r.timeout_ms = 10000;
  r.seat = std::move(seat);
  return r;
}

std::string refusal_of(const std::optional<rv::Message>& m) {
  if (!m) return "(no answer)";
  if (auto* e = std::get_if<rv::Error>(&*m)) return e->message;
  return std::string("(answered with ") + rv::type_name(rv::type_of(*m)) + ")";
}

}  // namespace

TEST_CASE("a seat belongs to its holder: an outsider of the job cannot act for a member") {
  auto server = start_server();
  std::vector<std::unique_ptr<RawClient>> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.push_back(std::make_unique<RawClient>(server->port()));
    REQUIRE(ranks.back()->hello("seats", "host-" + std::to_string(r), 500u + r));
  }
  for (int r = 0; r < 3; ++r) REQUIRE(ranks[static_cast<size_t>(r)]->send(1, join_of(r, 3)));
  std::vector<std::vector<uint8_t>> seats;
  for (auto& c : ranks) {
    auto f = c->recv(10s);
    REQUIRE(f);
    const auto* j = std::get_if<rv::Joined>(&f->message);
    REQUIRE(j);
    CHECK(j->seat.size() >= 16);
    seats.push_back(j->seat);
  }
  CHECK(seats[0] != seats[1]);
  ranks[2]->close();  // rank 2 dies
  for (int r = 0; r < 2; ++r) {
    auto f = ranks[static_cast<size_t>(r)]->recv(10s);
    REQUIRE(f);
    CHECK(std::holds_alternative<rv::PeerEvent>(f->message));
  }

  // An outsider: a connection of the same job that never joined.
  RawClient outsider(server->port());
  REQUIRE(outsider.hello("seats", "host-0", 500));
  CHECK_THAT(refusal_of(outsider.call(rv::ProgressQuery{0, -1, 0})),
             Catch::Contains("no member of the job") && Catch::Contains("cc-rendezvous status"));
  auto st = outsider.call(rv::StatusQuery{}, 10s);
  REQUIRE(st);
  const auto* report = std::get_if<rv::StatusReport>(&*st);
  REQUIRE(report);
  REQUIRE(report->jobs.size() == 1);
  CHECK(report->jobs[0].id == "seats");
  for (const auto& g : report->jobs[0].comms) CHECK(g.members.empty());
  CHECK_THAT(refusal_of(outsider.call(rv::StatusQuery{"another"})),
             Catch::Contains("sees its own job only"));
  // Host and pid copied from the member are no proof.
  CHECK_THAT(refusal_of(outsider.call(shrink_of(0, 3, 0, {}))),
             Catch::Contains("brings no proof that it holds rank 0's seat") &&
                 Catch::Contains("Give each job an id of its own"));
  CHECK_THAT(refusal_of(outsider.call(shrink_of(1, 3, 0, std::vector<uint8_t>(16, 7)))),
             Catch::Contains("brings a wrong proof"));

  // The survivors recover, undisturbed.
  std::vector<std::unique_ptr<RawClient>> next;
  for (int r = 0; r < 2; ++r) {
    next.push_back(std::make_unique<RawClient>(server->port()));
    REQUIRE(next.back()->hello("seats", "host-" + std::to_string(r), 500u + r));
    REQUIRE(next.back()->send(2, shrink_of(r, 3, 0, seats[static_cast<size_t>(r)])));
  }
  for (int r = 0; r < 2; ++r) {
    auto f = next[static_cast<size_t>(r)]->recv(10s);
    REQUIRE(f);
    if (std::holds_alternative<rv::RecoverIdWanted>(f->message)) {
      REQUIRE(next[static_cast<size_t>(r)]->send(3, rv::RecoverId{1, {9, 9}, 10000}));
      f = next[static_cast<size_t>(r)]->recv(10s);
      REQUIRE(f);
    }
    const auto* j = std::get_if<rv::Joined>(&f->message);
    INFO(refusal_of(f->message));
    REQUIRE(j);
    CHECK(j->generation == 1);
    CHECK(rv::world_size_of(*j) == 2);
    CHECK(j->seat == seats[static_cast<size_t>(r)]);  // its seat, kept
  }
  // Rank 0's Recover of generation 0 sent again while it is a member of
  // generation 1: stale, even with its own seat.
  RawClient replay(server->port());
  REQUIRE(replay.hello("seats", "host-0", 500));
  CHECK_THAT(refusal_of(replay.call(shrink_of(0, 3, 0, seats[0]))),
             Catch::Contains("names generation 0") && Catch::Contains("the request is stale"));
}

TEST_CASE("ranks behind a node agent count as connections; an agent carries its own job only") {
  rv::ServerOptions o;
  o.max_connections = 4;
  auto server = start_server(o);
  SECTION("a connection that names no job may not relay") {
    RawClient status(server->port());
    REQUIRE(status.hello("", "ops", 1));
    rv::Relay r;
    r.entries.push_back({1, rv::RelayOp::open, rv::encode_frame(1, rv::Hello{"j", "h", 1, "x"})});
    REQUIRE(status.send(0, r));
    std::vector<rv::Message> seen;
    REQUIRE(status.closed_within(10s, &seen));
    REQUIRE_FALSE(seen.empty());
    CHECK_THAT(refusal_of(seen.back()), Catch::Contains("only cc-run's node agent"));
  }
  SECTION("a rank of another job is refused; the limit counts the agent's ranks") {
    RawAgent agent(server->port(), "mine");
    RawClient direct(server->port());  // the agent and this: two of the four
    REQUIRE(direct.hello("mine", "host-z", 3));
    agent.open_as(1, "theirs", 101);
    auto f = agent.next(1);
    REQUIRE(f);
    CHECK_THAT(refusal_of(f->message),
               Catch::Contains("a rank of job 'theirs' came through the node agent") &&
                   Catch::Contains("which serves job 'mine'"));
    for (uint32_t ch = 2; ch <= 4; ++ch) agent.open(ch, static_cast<int>(100 + ch));
    f = agent.next(4);
    REQUIRE(f);
    CHECK_THAT(refusal_of(f->message),
               Catch::Contains("at its limit of 4 connections, and a rank behind a node agent "
                               "counts as one"));
    REQUIRE(agent.send(2, 5, rv::Set{"k", {1}}));
    f = agent.next(2);
    REQUIRE(f);
    CHECK(std::holds_alternative<rv::Ok>(f->message));
    // Full: a new connection is refused with a message.
    RawClient late(server->port());
    std::vector<rv::Message> seen;
    REQUIRE(late.closed_within(10s, &seen));
    REQUIRE_FALSE(seen.empty());
    CHECK_THAT(refusal_of(seen[0]), Catch::Contains("at its limit of 4 connections"));
  }
}

TEST_CASE("cc-run's agent bounds a rank before its handshake as the server does") {
  auto server = start_server();
  RealAgent agent(server->port(), "bounded", 300ms);
  SECTION("a rank that says nothing is closed at the handshake deadline, in words") {
    auto silent = agent.rank();
    std::vector<rv::Message> seen;
    REQUIRE(silent->closed_within(10s, &seen));
    REQUIRE_FALSE(seen.empty());
    CHECK_THAT(refusal_of(seen.back()), Catch::Contains("no handshake with cc-run's node agent") &&
                                            Catch::Contains("within 300 ms"));
  }
  SECTION("a hello that claims 4 MiB is refused at once, in words") {
    auto big = agent.rank();
    rv::Hello h{"bounded", "node-y", 7, std::string(4000, 'x')};
    std::vector<uint8_t> frame = rv::encode_frame(1, h);
    // The header claims a frame of the largest size; only its start is sent.
    const uint32_t claim = rv::Limits{}.max_frame;
    std::memcpy(frame.data() + 12, &claim, 4);
    REQUIRE(big->send_bytes(std::span(frame).first(rv::kHeaderSize + 100)));
    std::vector<rv::Message> seen;
    REQUIRE(big->closed_within(10s, &seen));
    REQUIRE_FALSE(seen.empty());
    CHECK_THAT(refusal_of(seen.back()), Catch::Contains("before the handshake is done") &&
                                            Catch::Contains("16384 bytes"));
  }
  // The agent still serves a rank that behaves.
  auto good = agent.rank();
  rank_works(*good, "bounded", "g");
}

TEST_CASE("cc-run's agent cuts off a rank that does not read; its neighbour goes on") {
  auto server = start_server();
  RealAgent agent(server->port(), "unread");
  auto hog = agent.rank();
  auto neighbour = agent.rank();
  REQUIRE(hog->hello("unread", "node-y", 1));
  rank_works(*neighbour, "unread", "n");
  auto r = hog->call(rv::Set{"v", big_value()}, 10s);
  REQUIRE(r);
  REQUIRE(std::holds_alternative<rv::Ok>(*r));
  std::vector<uint8_t> gets;
  for (uint32_t rid = 10; rid < 90; ++rid) rv::append_frame(gets, rid, rv::Get{"v", 0});
  REQUIRE(hog->send_bytes(gets));  // 80 MiB of answers, none read
  // The server hears the agent end the hog's channel: one rank behind agents left.
  bool ended = false;
  for (int i = 0; i < 600 && !ended; ++i) {
    auto m = server->metrics(5s);
    REQUIRE(m);
    ended = m->agent_ranks == 1;
    if (!ended) std::this_thread::sleep_for(50ms);
  }
  REQUIRE(ended);
  CHECK(hog->closed_within(30s));
  rank_works(*neighbour, "unread", "n2", false);
}

namespace {

// A listening socket on loopback that plays the server by hand.
class FakeServer {
 public:
  FakeServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
    REQUIRE(::listen(fd_, 4) == 0);
    socklen_t len = sizeof sa;
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) == 0);
    port_ = ntohs(sa.sin_port);
  }
  ~FakeServer() { ::close(fd_); }
  int port() const { return port_; }
  // The next connection, within 10 s.
  std::unique_ptr<RawClient> accept() {
    pollfd p{fd_, POLLIN, 0};
    REQUIRE(::poll(&p, 1, 10000) == 1);
    const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    REQUIRE(c >= 0);
    return std::make_unique<RawClient>(c, RawClient::Adopt{});
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace

TEST_CASE("cc-run's agent that gives its server up closes the link at once and tells its ranks") {
  FakeServer server;
  RealAgent agent(server.port(), "gone");
  auto link = server.accept();
  auto hello = link->recv(10s);
  REQUIRE(hello);
  REQUIRE(std::holds_alternative<rv::Hello>(hello->message));
  REQUIRE(link->send(hello->request_id, rv::Challenge{false, {}, "fake server"}));
  auto rank = agent.rank();
  REQUIRE(rank->hello("gone", "node-y", 3));
  // A frame the agent cannot read: the server is given up.
  const std::vector<uint8_t> garbage(64, 0x5a);
  REQUIRE(link->send_bytes(garbage));
  // The server's side of the link ends now, not at a heartbeat window...
  CHECK(link->closed_within(10s));
  // ...and the rank hears why.
  std::vector<rv::Message> seen;
  REQUIRE(rank->closed_within(10s, &seen));
  bool told = false;
  for (const auto& m : seen)
    if (const auto* e = std::get_if<rv::PeerEvent>(&m))
      told = e->kind == rv::PeerEventKind::server_stopping &&
             e->reason.find("sent a frame the agent cannot read") != std::string::npos;
  CHECK(told);
}
