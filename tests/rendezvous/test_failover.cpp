// Failover inside cc's own protocol, without etcd: two servers in this
// process, A and then its successor B, and clients whose locator names A
// until A stops and B from then on. What a user would notice: store calls
// go on (a get parked on A is answered on B), members of a communicator
// resume on B and are not declared failed, a member that never resumes is
// announced failed once B's grace period ends (not before), a join that was
// in progress completes on B, and a client without a locator gets an error
// message. Both ways a server stops: failing (what stop() does) and
// handing over.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/frame_client.hpp"
#include "rendezvous/server.hpp"
#include "tests/common/join_msg.hpp"

namespace rv = cc::rv;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<rv::Server> start_server(bool successor, std::chrono::milliseconds grace = 2000ms) {
  rv::ServerOptions o;
  o.bind_addr = "127.0.0.1";
  o.successor = successor;
  o.resume_grace = grace;
  std::unique_ptr<rv::Server> s;
  const cc::Status st = rv::Server::start(o, &s);
  INFO(st.message);
  REQUIRE(st.ok());
  return s;
}

// Where the locator points: the port of the server in charge now.
struct Pointer {
  std::atomic<int> port{0};
};

rv::FrameClientOptions options_for(const std::string& job) {
  rv::FrameClientOptions o;
  o.job_id = job;
  o.connect_timeout = 5000ms;
  o.request_timeout = 5000ms;
  o.failover_timeout = 10000ms;
  return o;
}

// A client located through `where`; no Catch macros, for other threads.
cc::Status connect_located(Pointer& where, const std::string& job,
                           std::unique_ptr<rv::Client>* c) {
  rv::FrameClientOptions o = options_for(job);
  o.locate = [&where](Clock::time_point, std::string* host, int* port) {
    *host = "127.0.0.1";
    *port = where.port.load();
    return cc::Status::success();
  };
  return rv::connect_frame_client(o, c);
}

std::unique_ptr<rv::Client> located_client(Pointer& where, const std::string& job) {
  std::unique_ptr<rv::Client> c;
  const cc::Status st = connect_located(where, job, &c);
  INFO(st.message);
  REQUIRE(st.ok());
  return c;
}

// Server A, the locator pointing at it.
std::unique_ptr<rv::Server> start_first(Pointer& where) {
  auto a = start_server(false);
  where.port = a->port();
  return a;
}

// n clients of `job`, located through `where`.
std::vector<std::unique_ptr<rv::Client>> located_clients(Pointer& where, const std::string& job,
                                                         int n) {
  std::vector<std::unique_ptr<rv::Client>> cs;
  for (int r = 0; r < n; ++r) cs.push_back(located_client(where, job));
  return cs;
}

std::unique_ptr<rv::Client> plain_client(int port, const std::string& job) {
  rv::FrameClientOptions o = options_for(job);
  o.addr = "127.0.0.1";
  o.port = port;
  std::unique_ptr<rv::Client> c;
  const cc::Status st = rv::connect_frame_client(o, &c);
  INFO(st.message);
  REQUIRE(st.ok());
  return c;
}

rv::Join join_of(int rank, int world) {
  rv::Join j = cc::test::join_msg(rank, world, "host-" + std::to_string(rank), 20000);
  j.info.gpu_uuid = "GPU-" + std::to_string(rank);
  return j;
}

// Joins every client as the rank of its index, all at once.
std::vector<rv::Joined> join_all(std::vector<std::unique_ptr<rv::Client>>& cs) {
  const int world = static_cast<int>(cs.size());
  std::vector<std::future<std::pair<cc::Status, rv::Joined>>> fs;
  for (int r = 0; r < world; ++r)
    fs.push_back(std::async(std::launch::async, [&cs, r, world] {
      rv::Joined out;
      cc::Status st = cs[static_cast<size_t>(r)]->join(join_of(r, world), &out);
      return std::make_pair(st, out);
    }));
  std::vector<rv::Joined> out;
  for (auto& f : fs) {
    auto [st, joined] = f.get();
    INFO(st.message);
    REQUIRE(st.ok());
    out.push_back(joined);
  }
  return out;
}

std::string text(const std::vector<uint8_t>& v) { return {v.begin(), v.end()}; }
std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

// A member's watchdog, as lib/watch runs it: a heartbeat every 100 ms, and
// every event kept.
class Watch {
 public:
  explicit Watch(rv::Client& c) : client_(c), thread_([this] { run(); }) {}
  ~Watch() {
    stop_ = true;
    thread_.join();
  }
  std::vector<rv::PeerEvent> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  // The first event of `kind`, waiting until `deadline`.
  std::optional<rv::PeerEvent> wait_for(rv::PeerEventKind kind, Clock::time_point deadline) {
    while (Clock::now() < deadline) {
      for (const auto& e : events())
        if (e.kind == kind) return e;
      std::this_thread::sleep_for(20ms);
    }
    return std::nullopt;
  }

 private:
  void run() {
    uint64_t done = 0;
    while (!stop_) {
      (void)client_.heartbeat_nowait(++done);
      client_.pump();
      while (auto e = client_.next_event(0ms)) {
        std::lock_guard<std::mutex> lock(mu_);
        events_.push_back(*e);
      }
      std::this_thread::sleep_for(100ms);
    }
  }
  rv::Client& client_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<rv::PeerEvent> events_;
  std::thread thread_;
};

std::string words_of(const std::vector<rv::PeerEvent>& es) {
  std::string out;
  for (const auto& e : es) out += "[" + std::to_string(static_cast<int>(e.kind)) + " rank " +
                                  std::to_string(e.rank) + ": " + e.reason + "] ";
  return out;
}

const char* mode_name(rv::StopMode m) { return m == rv::StopMode::fail ? "fail" : "handover"; }

}  // namespace

TEST_CASE("failover: a store client's calls go on on the successor, its parked get answered "
          "there") {
  const rv::StopMode mode = GENERATE(rv::StopMode::fail, rv::StopMode::handover);
  INFO("stop mode " << mode_name(mode));
  Pointer where;
  auto a = start_first(where);
  auto c = located_client(where, "store-move");
  REQUIRE(c->set("before", bytes("on A")).ok());
  int64_t n = 0;
  REQUIRE(c->add("count", 5, &n).ok());
  CHECK(n == 5);

  auto parked = std::async(std::launch::async, [&] {
    std::vector<uint8_t> v;
    cc::Status st = c->get("later", &v, 15000);
    return std::make_pair(st, text(v));
  });
  std::this_thread::sleep_for(300ms);  // the get is parked on A
  auto b = start_server(true);
  a->stop(mode);
  where.port = b->port();

  // Another client of B sets the key the get waits for (B has no store of
  // A's: durability is the etcd store's business, not this test's).
  auto other = plain_client(b->port(), "store-move");
  REQUIRE(other->set("later", bytes("set on B")).ok());
  REQUIRE(parked.wait_for(10s) == std::future_status::ready);
  auto [st, value] = parked.get();
  INFO(st.message);
  REQUIRE(st.ok());
  CHECK(value == "set on B");

  REQUIRE(c->set("after", bytes("on B")).ok());
  std::vector<uint8_t> v;
  REQUIRE(other->get("after", &v, 1000).ok());
  CHECK(text(v) == "on B");
  REQUIRE(c->add("count", 2, &n).ok());
  CHECK(n == 2);
}

TEST_CASE("failover: members of a complete communicator resume and are not declared failed") {
  const rv::StopMode mode = GENERATE(rv::StopMode::fail, rv::StopMode::handover);
  INFO("stop mode " << mode_name(mode));
  Pointer where;
  auto a = start_first(where);
  auto cs = located_clients(where, "members-move", 3);
  for (auto& c : cs) REQUIRE(c->set_heartbeat_window(1000ms).ok());
  const auto joined = join_all(cs);
  std::vector<std::unique_ptr<Watch>> watches;
  for (auto& c : cs) watches.push_back(std::make_unique<Watch>(*c));
  std::this_thread::sleep_for(300ms);

  auto b = start_server(true, 1500ms);
  a->stop(mode);
  where.port = b->port();
  // Past the grace period and several heartbeat windows.
  std::this_thread::sleep_for(3000ms);
  for (size_t r = 0; r < cs.size(); ++r) {
    INFO("rank " << r << " events: " << words_of(watches[r]->events()));
    CHECK(watches[r]->events().empty());
  }
  // Each member is a member on B, its heartbeats heard there.
  for (int r = 0; r < 3; ++r) {
    rv::Progress p;
    const cc::Status st = cs[0]->progress(0, r, &p, 2000ms);
    INFO(st.message);
    REQUIRE(st.ok());
    REQUIRE(p.members.size() == 1);
    CHECK(p.members[0].rank == r);
    CHECK(p.members[0].last_completed > 0);
    CHECK(p.members[0].silent_ms < 1000);
  }
  // They can still leave cleanly.
  watches.clear();
  for (auto& c : cs) CHECK(c->leave().ok());
  CHECK(joined[0].unique_id == std::vector<uint8_t>{4, 2});
}

TEST_CASE("failover: a member that never resumes is failed at the end of the grace period, the "
          "others shrink on the successor") {
  Pointer where;
  auto a = start_first(where);
  auto cs = located_clients(where, "one-lost", 2);
  cs.push_back(plain_client(a->port(), "one-lost"));  // rank 2: no locator
  const auto joined = join_all(cs);
  std::vector<std::unique_ptr<Watch>> watches;
  for (auto& c : cs) watches.push_back(std::make_unique<Watch>(*c));
  std::this_thread::sleep_for(200ms);

  const auto grace = 2500ms;
  auto b = start_server(true, grace);
  const auto b_started = Clock::now();
  a->stop(rv::StopMode::handover);
  where.port = b->port();

  // Rank 2 cannot follow: it is told the server went, with a message.
  auto lost = watches[2]->wait_for(rv::PeerEventKind::server_stopping, Clock::now() + 5s);
  REQUIRE(lost);
  CHECK_THAT(lost->reason, Catch::Contains("handing its jobs over"));
  const cc::Status refused = cs[2]->set("k", bytes("v"));
  CHECK(refused.code == CC_ERR_RENDEZVOUS);
  CHECK_THAT(refused.message, Catch::Contains("handing its jobs over"));

  // Nobody is failed before the grace period ends...
  std::this_thread::sleep_for(grace / 2);
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << " events: " << words_of(watches[r]->events()));
    CHECK(watches[r]->events().empty());
  }
  // ...then rank 2 is, to each survivor.
  for (int r = 0; r < 2; ++r) {
    auto failed = watches[r]->wait_for(rv::PeerEventKind::failed, Clock::now() + 10s);
    INFO("rank " << r << " events: " << words_of(watches[r]->events()));
    REQUIRE(failed);
    CHECK(failed->rank == 2);
    CHECK_THAT(failed->reason, Catch::Contains("did not resume"));
    CHECK(Clock::now() - b_started >= grace - 100ms);
  }

  // The survivors shrink on the successor, each on a new connection (no
  // Catch macros on these threads: a failed connect is their status).
  std::vector<std::future<std::pair<cc::Status, rv::Joined>>> fs;
  for (int r = 0; r < 2; ++r)
    fs.push_back(std::async(std::launch::async, [&where, &joined, r] {
      std::unique_ptr<rv::Client> c;
      if (cc::Status connected = connect_located(where, "one-lost", &c); !connected.ok())
        return std::make_pair(connected, rv::Joined{});
      rv::Recover req;
      req.info = join_of(r, 3).info;
      req.seat = joined[static_cast<size_t>(r)].seat;  // as its resume told the successor
      req.generation = 0;
      req.kind = rv::RecoverKind::shrink;
      req.timeout_ms = 10000;
      rv::Joined out;
      cc::Status st = c->recover(
          req, [](std::vector<uint8_t>* id) { *id = {7, 7}; return cc::Status::success(); },
          &out);
      return std::make_pair(st, out);
    }));
  for (int r = 0; r < 2; ++r) {
    auto [st, out] = fs[static_cast<size_t>(r)].get();
    INFO(st.message);
    REQUIRE(st.ok());
    CHECK(out.generation == 1);
    CHECK(out.rank == r);
    CHECK(rv::world_size_of(out) == 2);
    CHECK(out.failed == std::vector<int32_t>{2});
  }
  watches.clear();
}

TEST_CASE("failover: a join in progress completes on the successor") {
  const rv::StopMode mode = GENERATE(rv::StopMode::fail, rv::StopMode::handover);
  INFO("stop mode " << mode_name(mode));
  Pointer where;
  auto a = start_first(where);
  auto cs = located_clients(where, "join-move", 3);
  std::vector<std::future<std::pair<cc::Status, rv::Joined>>> fs;
  for (int r = 0; r < 2; ++r)  // rank 2 is late
    fs.push_back(std::async(std::launch::async, [&cs, r] {
      rv::Joined out;
      cc::Status st = cs[static_cast<size_t>(r)]->join(join_of(r, 3), &out);
      return std::make_pair(st, out);
    }));
  std::this_thread::sleep_for(300ms);  // ranks 0 and 1 wait on A
  auto b = start_server(true);
  a->stop(mode);
  where.port = b->port();
  rv::Joined late;
  const cc::Status st2 = cs[2]->join(join_of(2, 3), &late);
  INFO(st2.message);
  REQUIRE(st2.ok());
  for (auto& f : fs) {
    auto [st, out] = f.get();
    INFO(st.message);
    REQUIRE(st.ok());
    CHECK(out.unique_id == std::vector<uint8_t>{4, 2});
    CHECK(rv::world_size_of(out) == 3);
  }
  CHECK(late.unique_id == std::vector<uint8_t>{4, 2});
}

TEST_CASE("failover: a client without a locator sees the server go, in words") {
  const rv::StopMode mode = GENERATE(rv::StopMode::fail, rv::StopMode::handover);
  INFO("stop mode " << mode_name(mode));
  auto a = start_server(false);
  auto c = plain_client(a->port(), "no-locator");
  auto parked = std::async(std::launch::async, [&] {
    std::vector<uint8_t> v;
    return c->get("never", &v, 15000);
  });
  std::this_thread::sleep_for(300ms);
  const auto t0 = Clock::now();
  a->stop(mode);
  REQUIRE(parked.wait_for(5s) == std::future_status::ready);
  const cc::Status st = parked.get();
  CHECK(st.code == CC_ERR_RENDEZVOUS);
  CHECK_THAT(st.message, Catch::Contains("stopped") || Catch::Contains("closed the connection"));
  CHECK(Clock::now() - t0 < 5s);
  CHECK_FALSE(c->set("k", bytes("v")).ok());
}

// A new connection during a failover: the locator still names the leader
// that died (its key outlives it by its lease), then the next one. The
// client asks again instead of dialling the dead address to its deadline.
TEST_CASE("failover: a client that connects while the locator names a dead server asks again") {
  Pointer where;
  {
    auto dead = start_server(false);
    where.port = dead->port();
    dead->stop();
  }
  auto next = start_server(true);
  std::thread move_on([&where, port = next->port()] {
    std::this_thread::sleep_for(1500ms);
    where.port = port;
  });
  const auto t0 = Clock::now();
  std::unique_ptr<rv::Client> c;
  const cc::Status st = connect_located(where, "late", &c);  // connect_timeout 5 s
  const auto took = Clock::now() - t0;
  move_on.join();
  INFO(st.message);
  REQUIRE(st.ok());
  CHECK(took < 3500ms);  // the locator asked again within a second of the move
  REQUIRE(c->set("k", bytes("v")).ok());
}

TEST_CASE("failover: with no successor to be found, calls fail in words after the timeout") {
  Pointer where;
  auto a = start_first(where);
  rv::FrameClientOptions o = options_for("nowhere");
  o.failover_timeout = 1000ms;
  o.locate = [&where](Clock::time_point, std::string* host, int* port) {
    *host = "127.0.0.1";
    *port = where.port.load();
    return cc::Status::success();
  };
  std::unique_ptr<rv::Client> c;
  REQUIRE(rv::connect_frame_client(o, &c).ok());
  REQUIRE(c->set_heartbeat_window(1000ms).ok());
  std::vector<std::unique_ptr<rv::Client>> one;
  one.push_back(std::move(c));
  join_all(one);
  a->stop(rv::StopMode::handover);  // and nobody takes over
  const auto t0 = Clock::now();
  std::optional<rv::PeerEvent> e = one[0]->next_event(10s);
  REQUIRE(e);
  CHECK(e->kind == rv::PeerEventKind::server_stopping);
  CHECK_THAT(e->reason, Catch::Contains("rank 0") && Catch::Contains("could not resume") &&
                            Catch::Contains("successor rendezvous server"));
  CHECK(Clock::now() - t0 < 8s);
  const cc::Status st = one[0]->set("k", bytes("v"));
  CHECK(st.code == CC_ERR_RENDEZVOUS);
  CHECK_THAT(st.message, Catch::Contains("could not resume"));
}
