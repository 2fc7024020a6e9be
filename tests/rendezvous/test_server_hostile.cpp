// A real rendezvous server on loopback, driven by raw sockets: hostile input
// drops only the sender (with a message where an Error is sent) and a legitimate
// client still succeeds afterwards; join checks, auth, stop and idle waits.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "rendezvous/auth.hpp"
#include "rendezvous/server.hpp"
#include "tests/common/skip.hpp"
#include "tests/rendezvous/raw_client.hpp"

using namespace std::chrono_literals;
using cc::test::RawClient;
namespace rv = cc::rv;

namespace {

std::unique_ptr<rv::Server> start_server(rv::ServerOptions o = {}) {
  o.bind_addr = o.bind_addr == "0.0.0.0" ? "127.0.0.1" : o.bind_addr;
  o.port = 0;
  if (o.handshake_timeout == std::chrono::milliseconds(10000)) o.handshake_timeout = 400ms;
  if (o.frame_timeout == std::chrono::milliseconds(10000)) o.frame_timeout = 400ms;
  std::unique_ptr<rv::Server> s;
  cc::Status st = rv::Server::start(o, &s);
  INFO(st.message);
  REQUIRE(st.ok());
  return s;
}

std::vector<uint8_t> header(uint32_t magic, uint16_t version, uint16_t type, uint32_t length) {
  std::vector<uint8_t> h(rv::kHeaderSize);
  auto put32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) h[at + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
  };
  put32(0, magic);
  h[4] = static_cast<uint8_t>(version);
  h[5] = static_cast<uint8_t>(version >> 8);
  h[6] = static_cast<uint8_t>(type);
  h[7] = static_cast<uint8_t>(type >> 8);
  put32(8, 1);
  put32(12, length);
  return h;
}

std::string error_words(const std::vector<rv::Message>& seen) {
  for (const auto& m : seen)
    if (auto* e = std::get_if<rv::Error>(&m)) return e->message;
  return "";
}

// A legitimate client: hello, set, get back.
void legit_client_works(int port, const std::string& job = "legit") {
  RawClient c(port);
  REQUIRE(c.hello(job));
  auto r = c.call(rv::Set{"k", {1, 0, 2}});
  REQUIRE(r);
  REQUIRE(std::holds_alternative<rv::Ok>(*r));
  r = c.call(rv::Get{"k", 0});
  REQUIRE(r);
  REQUIRE(std::holds_alternative<rv::Value>(*r));
  CHECK(std::get<rv::Value>(*r).value == std::vector<uint8_t>{1, 0, 2});
}

rv::Join join_msg(int rank, int world, const std::string& host, uint32_t timeout_ms = 5000,
                  uint32_t comm_number = 0) {
  rv::Join j;
  j.info.rank = rank;
  j.info.world_size = world;
  j.info.comm_number = comm_number;
  j.info.host = host;
  j.info.pid = static_cast<uint32_t>(100 + rank);
  j.info.nccl_version = 22809;
  if (rank == 0) j.unique_id = {9, 8, 7};
  j.timeout_ms = timeout_ms;
  return j;
}

// The error a client hears next, within 3 s; anything else fails the test.
rv::Error next_error(RawClient& c) {
  auto f = c.recv(3s);
  REQUIRE(f);
  auto* e = std::get_if<rv::Error>(&f->message);
  REQUIRE(e);
  return *e;
}

// a and b say hello to `job`, then send their joins ja and jb (under request
// ids rid_a and rid_b); returns the time the joins were sent.
std::chrono::steady_clock::time_point join_both(RawClient& a, RawClient& b, const std::string& job,
                                                const rv::Join& ja, const rv::Join& jb,
                                                uint32_t rid_a = 1, uint32_t rid_b = 1) {
  REQUIRE(a.hello(job));
  REQUIRE(b.hello(job));
  const auto sent = std::chrono::steady_clock::now();
  REQUIRE(a.send(rid_a, ja));
  REQUIRE(b.send(rid_b, jb));
  return sent;
}

// a and b both hear an Error next: `code`, with a message that matches.
template <class Words>
void both_hear(RawClient& a, RawClient& b, cc_result_t code, const Words& words) {
  for (RawClient* c : {&a, &b}) {
    const rv::Error e = next_error(*c);
    CHECK(e.code == code);
    CHECK_THAT(e.message, words);
  }
}

}  // namespace

TEST_CASE("hostile input drops only the sender, with its reason") {
  auto server = start_server();
  const int port = server->port();

  struct Case {
    const char* name;
    std::vector<uint8_t> bytes;
    bool after_hello;
    const char* words;  // expected in the Error the sender sees
  };
  std::vector<uint8_t> trailing = rv::encode_frame(1, rv::Hello{"j", "h", 1, "c"});
  trailing.push_back(0);
  trailing[12] = static_cast<uint8_t>(trailing[12] + 1);
  std::vector<Case> cases = {
      {"bad magic",
       {'G', 'E', 'T', ' ', '/', ' ', 'H', 'T', 'T', 'P', '/', '1', '.', '1', '\r', '\n'},
       false,
       "bad magic"},
      {"wrong version", header(rv::kMagic, 99, 1, 0), false, "unsupported protocol version"},
      {"length over the maximum", header(rv::kMagic, rv::kProtocolVersion, 10, (4u << 20) + 1),
       false, "frame length over the maximum"},
      {"unknown type", header(rv::kMagic, rv::kProtocolVersion, 999, 0), false,
       "unknown message type"},
      {"trailing bytes", trailing, false, "trailing bytes"},
      {"set before hello", rv::encode_frame(1, rv::Set{"k", {1}}), false,
       "first message must be hello"},
      {"oversized key", rv::encode_frame(2, rv::Set{std::string(2000, 'k'), {1}}), true,
       "over its size limit"},
      {"a server message from a client", rv::encode_frame(2, rv::Ok{}), true,
       "unexpected message ok"},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      RawClient bad(port);
      if (c.after_hello) REQUIRE(bad.hello("hostile"));
      REQUIRE(bad.send_bytes(c.bytes));
      std::vector<rv::Message> seen;
      CHECK(bad.closed_within(2s, &seen));
      CHECK_THAT(error_words(seen), Catch::Contains(c.words));
      legit_client_works(port);
    }
  }
}

TEST_CASE(
    "a truncated frame then close, and a client vanishing mid-frame, leave the server working") {
  auto server = start_server();
  const int port = server->port();
  RawClient other(port);
  REQUIRE(other.hello("bystander"));
  {
    RawClient t(port);
    REQUIRE(t.hello("hostile"));
    auto frame = rv::encode_frame(5, rv::Set{"key", std::vector<uint8_t>(100, 1)});
    REQUIRE(t.send_bytes(std::span<const uint8_t>(frame.data(), 30)));
  }  // closes mid-frame
  {
    RawClient t(port);
    auto frame = rv::encode_frame(1, rv::Hello{"j", "h", 1, "c"});
    REQUIRE(t.send_bytes(std::span<const uint8_t>(frame.data(), 7)));  // inside the header
  }
  legit_client_works(port);
  auto r = other.call(rv::Add{"n", 3});  // a client connected all along is unharmed
  REQUIRE(r);
  REQUIRE(std::holds_alternative<rv::Integer>(*r));
  CHECK(std::get<rv::Integer>(*r).value == 3);
}

TEST_CASE("a client that says nothing, or stalls mid-frame, is dropped at its deadline") {
  rv::ServerOptions o;
  o.handshake_timeout = 300ms;
  o.frame_timeout = 300ms;
  auto server = start_server(o);
  const int port = server->port();

  SECTION("silent after connecting") {
    RawClient silent(port);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<rv::Message> seen;
    REQUIRE(silent.closed_within(3s, &seen));
    const auto took = std::chrono::steady_clock::now() - t0;
    CHECK(took >= 250ms);
    CHECK(took < 2s);
    CHECK_THAT(error_words(seen), Catch::Contains("no hello within 300 ms"));
  }
  SECTION("slow drip inside a frame") {
    RawClient slow(port);
    REQUIRE(slow.hello("drip"));
    auto frame = rv::encode_frame(2, rv::Set{"key", {1, 2, 3}});
    REQUIRE(slow.send_bytes(std::span<const uint8_t>(frame.data(), 10)));
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<rv::Message> seen;
    REQUIRE(slow.closed_within(3s, &seen));
    CHECK(std::chrono::steady_clock::now() - t0 < 2s);
    CHECK_THAT(error_words(seen), Catch::Contains("a frame stalled"));
  }
  legit_client_works(port);
}

TEST_CASE("token: a wrong answer is refused in words, the right one gets in") {
  rv::ServerOptions o;
  o.token = "s3cret";
  auto server = start_server(o);
  const int port = server->port();

  RawClient bad(port);
  auto r = bad.call(rv::Hello{"job", "h", 1, "c"});
  REQUIRE(r);
  REQUIRE(std::get<rv::Challenge>(*r).auth_required);
  auto nonce = std::get<rv::Challenge>(*r).nonce;
  r = bad.call(rv::Auth{rv::auth_mac("wrong", nonce, "job")});
  REQUIRE(r);
  REQUIRE(std::holds_alternative<rv::Error>(*r));
  CHECK(std::get<rv::Error>(*r).code == CC_ERR_AUTH);
  CHECK_THAT(std::get<rv::Error>(*r).message, Catch::Contains("token was refused"));
  CHECK(bad.closed_within(2s));

  RawClient skip(port);  // skipping auth reads nothing
  REQUIRE(skip.call(rv::Hello{"job", "h", 1, "c"}));
  r = skip.call(rv::Get{"k", 0});
  REQUIRE(r);
  CHECK(std::get<rv::Error>(*r).code == CC_ERR_AUTH);

  RawClient good(port);
  r = good.call(rv::Hello{"job", "h", 1, "c"});
  REQUIRE(r);
  nonce = std::get<rv::Challenge>(*r).nonce;
  r = good.call(rv::Auth{rv::auth_mac("s3cret", nonce, "job")});
  REQUIRE(r);
  CHECK(std::holds_alternative<rv::Ok>(*r));
  r = good.call(rv::Add{"n", 5});
  REQUIRE(r);
  CHECK(std::get<rv::Integer>(*r).value == 5);
}

namespace {

// Whether a new connection proving `token` gets in.
bool token_admits(int port, const std::string& token) {
  RawClient c(port);
  auto r = c.call(rv::Hello{"job", "h", 1, "c"});
  REQUIRE(r);
  const auto* challenge = std::get_if<rv::Challenge>(&*r);
  REQUIRE(challenge != nullptr);
  REQUIRE(challenge->auth_required);
  r = c.call(rv::Auth{rv::auth_mac(token, challenge->nonce, "job")});
  REQUIRE(r);
  return std::holds_alternative<rv::Ok>(*r);
}

}  // namespace

TEST_CASE("token: a new token the server did not take in time never takes effect later") {
  rv::ServerOptions o;
  o.token = "old";
  auto server = start_server(o);
  const int port = server->port();
  std::string in_force = "old";
  int withdrawn = 0;
  for (int i = 0; i < 10; ++i) {
    const std::string next = "new-" + std::to_string(i);
    // No time at all: the io thread can rarely take it before the caller
    // gives up, and what set_token says must then be what happens.
    if (server->set_token(next, 0ms))
      in_force = next;
    else
      ++withdrawn;
    std::this_thread::sleep_for(20ms);  // room for a withdrawn change to land, were it kept
    INFO("round " << i << ": in force '" << in_force << "'");
    CHECK(token_admits(port, in_force));
    if (in_force != next) CHECK_FALSE(token_admits(port, next));
  }
  INFO(withdrawn << " of 10 changes were withdrawn");
  REQUIRE(server->set_token("final", 5s));
  CHECK(token_admits(port, "final"));
  CHECK_FALSE(token_admits(port, in_force));
}

TEST_CASE("join checks through the real server") {
  auto server = start_server();
  const int port = server->port();

  SECTION("a rank claimed twice: both hear it, naming both hosts") {
    RawClient a(port), b(port);
    join_both(a, b, "twice", join_msg(1, 2, "host-a"), join_msg(1, 2, "host-b"), 7, 8);
    both_hear(
        a, b, CC_ERR_MISMATCH,
        Catch::Contains("claimed twice") && Catch::Contains("host-a") && Catch::Contains("host-b"));
  }
  SECTION("world sizes that differ") {
    RawClient a(port), b(port);
    join_both(a, b, "sizes", join_msg(0, 2, "host-a"), join_msg(1, 3, "host-b"));
    both_hear(
        a, b, CC_ERR_MISMATCH,
        Catch::Contains("world size") && Catch::Contains("said 2") && Catch::Contains("said 3"));
  }
  SECTION("ranks that never come are named at the deadline") {
    RawClient a(port), b(port);
    const auto t0 =
        join_both(a, b, "missing", join_msg(0, 4, "host-a", 300), join_msg(1, 4, "host-b", 5000));
    both_hear(a, b, CC_ERR_TIMEOUT,
              Catch::Contains("ranks 2, 3 of 4 never joined communicator 0 of job 'missing'"));
    const auto took = std::chrono::steady_clock::now() - t0;
    CHECK(took >= 250ms);
    CHECK(took < 2s);
  }
  SECTION("a complete join hands rank 0's id to all; a vanished member is announced") {
    RawClient r0(port), r1(port), r2(port);
    for (RawClient* c : {&r0, &r1, &r2}) REQUIRE(c->hello("ok"));
    REQUIRE(r0.send(11, join_msg(0, 3, "host-a")));
    REQUIRE(r1.send(12, join_msg(1, 3, "host-b")));
    REQUIRE(r2.send(13, join_msg(2, 3, "host-c")));
    uint32_t rid = 11;
    for (RawClient* c : {&r0, &r1, &r2}) {
      auto f = c->recv(3s);
      REQUIRE(f);
      CHECK(f->request_id == rid++);
      auto* j = std::get_if<rv::Joined>(&f->message);
      REQUIRE(j);
      CHECK(j->unique_id == std::vector<uint8_t>{9, 8, 7});
      REQUIRE(j->members.size() == 1);  // rank 0: the others come named in their events
      CHECK(j->members[0].host == "host-a");
      CHECK(j->members[0].pid == 100);
    }
    const auto t0 = std::chrono::steady_clock::now();
    r2.close();
    for (RawClient* c : {&r0, &r1}) {
      auto f = c->recv(2s);
      REQUIRE(f);
      CHECK(f->request_id == 0);
      auto* ev = std::get_if<rv::PeerEvent>(&f->message);
      REQUIRE(ev);
      CHECK(ev->kind == rv::PeerEventKind::failed);
      CHECK(ev->rank == 2);
      CHECK(ev->host == "host-c");
    }
    CHECK(std::chrono::steady_clock::now() - t0 < 1s);
    // A late joiner of the completed generation never gets the old id: for
    // a rank that is alive it is refused at once (one for the rank that
    // failed waits as a replacement for a cc_comm_regrow, server-recovery).
    RawClient late(port);
    REQUIRE(late.hello("ok"));
    auto r = late.call(join_msg(1, 3, "host-d"));
    REQUIRE(r);
    REQUIRE(std::holds_alternative<rv::Error>(*r));
    CHECK_THAT(std::get<rv::Error>(*r).message,
               Catch::Contains("after it had completed") && Catch::Contains("is alive"));
  }
}

TEST_CASE("status stays one frame with 300 joining generations of world size 100000") {
  auto server = start_server();
  const int port = server->port();
  constexpr uint32_t kComms = 300;
  std::vector<std::unique_ptr<RawClient>> joiners;
  for (uint32_t g = 1; g <= kComms; ++g) {
    joiners.push_back(std::make_unique<RawClient>(port));
    REQUIRE(joiners.back()->hello("huge"));
    REQUIRE(joiners.back()->send(2, join_msg(0, 100000, "host-a", 60000, g)));
  }
  RawClient status(port);
  REQUIRE(status.hello(""));
  // The server reads each connection as its bytes arrive, so the query may
  // overtake the last joins: ask again until all 300 are in.
  std::optional<rv::StatusReport> report;
  for (int i = 0; i < 50; ++i) {
    auto r = status.call(rv::StatusQuery{}, 10s);
    INFO("attempt " << i);
    REQUIRE(r);  // none: the report did not decode (a frame over the maximum)
    REQUIRE(std::holds_alternative<rv::StatusReport>(*r));
    report = std::get<rv::StatusReport>(*r);
    if (!report->jobs.empty() && report->jobs[0].comms.size() == kComms) break;
    std::this_thread::sleep_for(20ms);
  }
  REQUIRE(report->jobs.size() == 1);
  const auto& gens = report->jobs[0].comms;
  REQUIRE(gens.size() == kComms);
  CHECK(gens[0].missing.size() == 4096);
  CHECK(gens.back().missing.empty());
  CHECK(gens.back().world_size - gens.back().joined == 99999);
}

TEST_CASE("wait_job_idle follows members leaving") {
  auto server = start_server();
  const int port = server->port();
  RawClient r0(port), r1(port);
  join_both(r0, r1, "idle", join_msg(0, 2, "host-a"), join_msg(1, 2, "host-b"));
  REQUIRE(r0.recv(3s));
  REQUIRE(r1.recv(3s));
  CHECK_FALSE(server->wait_job_idle("idle", 100ms));
  auto r = r1.call(rv::Leave{});
  REQUIRE(r);
  CHECK(std::holds_alternative<rv::Ok>(*r));
  std::thread leaver([&] {
    std::this_thread::sleep_for(100ms);
    (void)r0.call(rv::Leave{});
  });
  CHECK(server->wait_job_idle("idle", 3s));
  leaver.join();
  CHECK_FALSE(r1.recv(200ms));  // a clean leave is no peer event
}

TEST_CASE("stop releases parked waiters with an error and tells members") {
  auto server = start_server();
  const int port = server->port();
  RawClient waiter(port), m0(port), m1(port);
  REQUIRE(waiter.hello("stop"));
  join_both(m0, m1, "stop", join_msg(0, 2, "host-a"), join_msg(1, 2, "host-b"));
  REQUIRE(m0.recv(3s));
  REQUIRE(m1.recv(3s));
  REQUIRE(waiter.send(42, rv::Get{"never", 30000}));
  std::this_thread::sleep_for(50ms);
  const auto t0 = std::chrono::steady_clock::now();
  server->stop();
  auto f = waiter.recv(2s);
  REQUIRE(f);
  CHECK(f->request_id == 42);
  auto* e = std::get_if<rv::Error>(&f->message);
  REQUIRE(e);
  CHECK(e->code == CC_ERR_RENDEZVOUS);
  CHECK_THAT(e->message, Catch::Contains("server is stopping"));
  f = m0.recv(2s);
  REQUIRE(f);
  auto* ev = std::get_if<rv::PeerEvent>(&f->message);
  REQUIRE(ev);
  CHECK(ev->kind == rv::PeerEventKind::server_stopping);
  CHECK(waiter.closed_within(2s));
  CHECK(std::chrono::steady_clock::now() - t0 < 3s);
  server->stop();  // idempotent
}

TEST_CASE("a taken port is an error naming the port and what to do") {
  auto first = start_server();
  rv::ServerOptions o;
  o.bind_addr = "127.0.0.1";
  o.port = first->port();
  std::unique_ptr<rv::Server> second;
  cc::Status st = rv::Server::start(o, &second);
  CHECK(st.code == CC_ERR_SYSTEM);
  CHECK_THAT(st.message,
             Catch::Contains("cannot listen on 127.0.0.1:" + std::to_string(first->port())) &&
                 Catch::Contains("address already in use") && Catch::Contains("--port"));
}

TEST_CASE("64 concurrent adders give an exact sum; jobs do not see each other's keys") {
  auto server = start_server();
  const int port = server->port();
  RawClient c(port), other(port);  // keeps the job alive between the adders
  REQUIRE(c.hello("adders"));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 64; ++i) {
    threads.emplace_back([&, i] {
      try {
        RawClient c(port);
        if (!c.hello("adders")) ++failures;
        for (int k = 0; k < 10; ++k) {
          auto r = c.call(rv::Add{"sum", i});
          if (!r || !std::holds_alternative<rv::Integer>(*r)) ++failures;
        }
      } catch (...) {
        ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures == 0);
  auto r = c.call(rv::Get{"sum", 0});
  REQUIRE(r);
  REQUIRE(std::holds_alternative<rv::Value>(*r));
  const auto& v = std::get<rv::Value>(*r).value;
  CHECK(std::string(v.begin(), v.end()) == std::to_string(10 * 63 * 64 / 2));
  REQUIRE(other.hello("another-job"));
  r = other.call(rv::Get{"sum", 0});
  REQUIRE(r);
  REQUIRE(std::holds_alternative<rv::Error>(*r));
  CHECK(std::get<rv::Error>(*r).code == CC_ERR_TIMEOUT);
}

TEST_CASE("IPv6 loopback works where the machine has it", "[.ipv6]") {
  rv::ServerOptions o;
  o.bind_addr = "::1";
  std::unique_ptr<rv::Server> s;
  o.port = 0;
  cc::Status st = rv::Server::start(o, &s);
  if (!st.ok()) cc::test::skip_case("no IPv6 loopback here: " + st.message);
  RawClient c(s->port(), "::1");
  REQUIRE(c.hello("v6"));
  auto r = c.call(rv::Set{"k", {1}});
  REQUIRE(r);
  CHECK(std::holds_alternative<rv::Ok>(*r));
}

TEST_CASE("a client that does not read its replies is dropped; others keep working") {
  auto server = start_server();
  const int port = server->port();
  RawClient hog(port);
  REQUIRE(hog.hello("hog"));
  auto r = hog.call(rv::Set{"big", std::vector<uint8_t>(1u << 20, 7)});
  REQUIRE(r);
  REQUIRE(std::holds_alternative<rv::Ok>(*r));
  std::vector<uint8_t> gets;
  for (uint32_t i = 0; i < 100; ++i) rv::append_frame(gets, 100 + i, rv::Get{"big", 0});
  REQUIRE(hog.send_bytes(gets));
  legit_client_works(port);
  CHECK(hog.closed_within(10s));
}

TEST_CASE("running out of file descriptors refuses in words and does not end the accept loop") {
  auto server = start_server();
  const int port = server->port();
  // Sockets made before the limit drops; connecting needs no new descriptor.
  std::vector<int> fds;
  for (int i = 0; i < 3; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    fds.push_back(fd);
  }
  rlimit old{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &old) == 0);
  const int lowest_free = ::dup(0);  // a new descriptor always takes the lowest free number
  REQUIRE(lowest_free >= 0);
  ::close(lowest_free);
  rlimit low = old;
  low.rlim_cur = static_cast<rlim_t>(lowest_free);  // not one descriptor more: accept gets EMFILE
  REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  bool connected = true;
  for (int fd : fds)
    connected = connected && ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  // Each hears why at once, instead of waiting out its own deadline. None is
  // closed before all three are refused: a descriptor freed here would let
  // the server accept the next one normally.
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int fd : fds) clients.push_back(std::make_unique<RawClient>(fd, RawClient::Adopt{}));
  std::vector<std::string> words;
  for (auto& c : clients) {
    auto f = c->recv(5s);
    const auto* e = f ? std::get_if<rv::Error>(&f->message) : nullptr;
    words.push_back(e ? e->message : "no error frame");
  }
  // The limit back first: the sanitizers' own checks may need a descriptor.
  REQUIRE(setrlimit(RLIMIT_NOFILE, &old) == 0);
  const auto m = server->metrics(5s);
  clients.clear();
  REQUIRE(connected);
  for (const auto& w : words)
    CHECK_THAT(w, Catch::Contains("out of file descriptors (too many open files)") &&
                      Catch::Contains("ulimit -n"));
  REQUIRE(m);
  CHECK(m->counters.limits[static_cast<size_t>(rv::LimitKind::descriptors)] == 3);
  legit_client_works(port);
  legit_client_works(port);
}

namespace {

// A client that asked for `gets` replies of 1 MiB each and reads none of them.
std::unique_ptr<RawClient> hog_with_unread_replies(int port, int gets) {
  auto hog = std::make_unique<RawClient>(port);
  REQUIRE(hog->hello("hog"));
  auto r = hog->call(rv::Set{"big", std::vector<uint8_t>(1u << 20, 7)});
  REQUIRE(r);
  REQUIRE(std::holds_alternative<rv::Ok>(*r));
  std::vector<uint8_t> frames;
  for (int i = 0; i < gets; ++i) rv::append_frame(frames, 100 + i, rv::Get{"big", 0});
  REQUIRE(hog->send_bytes(frames));
  return hog;
}

uint64_t connections_open(rv::Server& s) {
  auto m = s.metrics(5s);
  REQUIRE(m);
  return m->connections_open;
}

}  // namespace

TEST_CASE("a connection dropped while its replies are unread is closed after its linger") {
  rv::ServerOptions o;
  o.max_connections = 2;
  o.drain_timeout = 4s;  // long enough for the checks while it drains
  auto server = start_server(o);
  const int port = server->port();
  auto hog = hog_with_unread_replies(port, 40);  // 40 MiB: more than the sockets hold
  std::this_thread::sleep_for(200ms);
  const std::vector<uint8_t> junk = {'G', 'E', 'T', ' '};
  REQUIRE(hog->send_bytes(junk));  // the server drops it, its replies still unread
  std::this_thread::sleep_for(200ms);
  // Still holding its socket and buffers: counted, and against the limit.
  CHECK(connections_open(*server) == 1);
  {
    RawClient second(port);
    REQUIRE(second.hello("second"));
    RawClient third(port);
    std::vector<rv::Message> seen;
    CHECK(third.closed_within(5s, &seen));
    CHECK_THAT(error_words(seen), Catch::Contains("at its limit of 2 connections"));
  }
  // Closed within its linger, though the client never reads.
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = connections_open(*server) == 0;
    if (!gone) std::this_thread::sleep_for(100ms);
  }
  CHECK(gone);
  legit_client_works(port);
}

TEST_CASE("stop ends promptly while clients leave their replies unread") {
  auto server = start_server();
  const int port = server->port();
  auto hog = hog_with_unread_replies(port, 40);
  auto waiter = std::make_unique<RawClient>(port);
  REQUIRE(waiter->hello("hog"));
  REQUIRE(waiter->send(7, rv::Get{"never", 60000}));
  std::this_thread::sleep_for(200ms);
  auto stopped = std::async(std::launch::async, [&] { server->stop(); });
  const bool prompt = stopped.wait_for(10s) == std::future_status::ready;
  CHECK(prompt);
  if (!prompt) hog->close();  // lets a stop that waits for the client end the test
  stopped.wait();
  auto f = waiter->recv(2s);
  REQUIRE(f);
  CHECK(f->request_id == 7);
}

TEST_CASE("a client that pipelines steadily is not dropped by the frame deadline") {
  rv::ServerOptions o;
  o.frame_timeout = 400ms;
  auto server = start_server(o);
  RawClient c(server->port());
  REQUIRE(c.hello("pipeline"));
  // 300 frames of 100 kB sent in 16 KiB pieces, a millisecond apart: reads
  // end mid-frame for seconds, while each frame takes a few milliseconds.
  constexpr int kFrames = 300;
  std::vector<uint8_t> stream;
  for (int i = 0; i < kFrames; ++i)
    rv::append_frame(stream, static_cast<uint32_t>(i + 1),
                     rv::Set{"k" + std::to_string(i % 7), std::vector<uint8_t>(100000, 1)});
  std::atomic<bool> sent_all{false};
  std::thread writer([&] {
    bool ok = true;
    for (size_t at = 0; at < stream.size() && ok; at += 16384) {
      const size_t n = std::min<size_t>(16384, stream.size() - at);
      ok = c.send_bytes(std::span(stream.data() + at, n));
      std::this_thread::sleep_for(1ms);
    }
    sent_all = ok;
  });
  int answered = 0;
  std::string other;
  while (answered < kFrames) {
    auto f = c.recv(10s);
    if (!f) break;
    if (std::holds_alternative<rv::Ok>(f->message))
      ++answered;
    else if (auto* e = std::get_if<rv::Error>(&f->message))
      other = e->message;
  }
  writer.join();
  CHECK(sent_all);
  CHECK(other.empty());
  CHECK(answered == kFrames);
}

TEST_CASE("a hello larger than any real one is refused before authentication") {
  rv::ServerOptions o;
  o.token = "tok";
  auto server = start_server(o);
  RawClient c(server->port());
  // A hello header that says 4 MiB, then 20 KiB of it.
  auto bytes =
      header(rv::kMagic, rv::kProtocolVersion, static_cast<uint16_t>(rv::MsgType::hello), 4u << 20);
  bytes.resize(bytes.size() + 20000, 'x');
  c.send_bytes(bytes);
  std::vector<rv::Message> seen;
  CHECK(c.closed_within(3s, &seen));
  CHECK_THAT(error_words(seen), Catch::Contains("before the handshake was done") &&
                                    Catch::Contains("limit of 16384 bytes"));
}
