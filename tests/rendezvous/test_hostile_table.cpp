// Hostile input against a real server on loopback, as a table: for each case
// the error the sender sees (code and a message), the line the server logs (taken
// from the "cc" logger) and a legitimate client succeeding afterwards.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <sys/socket.h>

#include <functional>
#include <thread>

#include "rendezvous/auth.hpp"
#include "rendezvous/server.hpp"
#include "tests/rendezvous/log_capture.hpp"
#include "tests/rendezvous/raw_client.hpp"

using namespace std::chrono_literals;
using cc::test::LogCapture;
using cc::test::RawClient;
namespace rv = cc::rv;

namespace {

constexpr const char* kToken = "s3cret-token";

// "127.0.0.1:PORT" of our end, as the server names us.
std::string local_name(const RawClient& c) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  ::getsockname(c.fd(), reinterpret_cast<sockaddr*>(&sa), &len);
  return "127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
}

std::vector<uint8_t> header(uint32_t magic, uint16_t version, uint16_t type, uint32_t length) {
  std::vector<uint8_t> h(rv::kHeaderSize);
  auto put = [&](size_t at, uint32_t v, int n) {
    for (int i = 0; i < n; ++i) h[at + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
  };
  put(0, magic, 4);
  put(4, version, 2);
  put(6, type, 2);
  put(8, 1, 4);
  put(12, length, 4);
  return h;
}

// Hello, and the token's answer when the server asks for one.
bool handshake(RawClient& c, const std::string& token, const std::string& job = "table") {
  auto r = c.call(rv::Hello{job, "host-t", 7, "table test"});
  if (!r || !std::holds_alternative<rv::Challenge>(*r)) return false;
  const auto& ch = std::get<rv::Challenge>(*r);
  if (!ch.auth_required) return true;
  r = c.call(rv::Auth{rv::auth_mac(token, ch.nonce, job)});
  return r && std::holds_alternative<rv::Ok>(*r);
}

// A legitimate client: connects (retrying while the server still counts the
// attacker's connections), authenticates, sets and gets a key.
bool legit_client_works(int port, const std::string& token) {
  const auto deadline = std::chrono::steady_clock::now() + 3s;
  while (std::chrono::steady_clock::now() < deadline) {
    RawClient c(port);
    if (handshake(c, token, "legit")) {
      auto r = c.call(rv::Set{"k", {1, 0, 2}});
      if (!r || !std::holds_alternative<rv::Ok>(*r)) return false;
      r = c.call(rv::Get{"k", 0});
      return r && std::holds_alternative<rv::Value>(*r) &&
             std::get<rv::Value>(*r).value == std::vector<uint8_t>{1, 0, 2};
    }
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

struct Outcome {
  std::string peer;               // how the server names the attacker
  std::vector<rv::Message> seen;  // frames it received before the close
  bool closed = false;            // the server closed the connection
  std::chrono::milliseconds took{0};
};

const rv::Error* first_error(const Outcome& o) {
  for (const auto& m : o.seen)
    if (auto* e = std::get_if<rv::Error>(&m)) return e;
  return nullptr;
}

// Sends bytes (after the handshake when asked), then waits for the close.
Outcome send_and_watch(int port, const std::vector<uint8_t>& bytes, bool after_handshake,
                       const std::string& token) {
  RawClient c(port);
  Outcome o;
  o.peer = local_name(c);
  if (after_handshake) REQUIRE(handshake(c, token));
  const auto t0 = std::chrono::steady_clock::now();
  c.send_bytes(bytes);
  o.closed = c.closed_within(3s, &o.seen);
  o.took =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  return o;
}

// An attack on one connection: `steps` talk on it, then the server's close
// is awaited.
std::function<Outcome(int)> on_one_connection(std::function<void(RawClient&)> steps) {
  return [steps](int port) {
    RawClient c(port);
    Outcome o;
    o.peer = local_name(c);
    steps(c);
    o.closed = c.closed_within(3s, &o.seen);
    return o;
  };
}

struct Case {
  std::string name;
  bool token = false;  // the server requires kToken
  std::function<void(rv::ServerOptions&)> tune;
  std::function<Outcome(int port)> attack;
  cc_result_t code = CC_SUCCESS;           // CC_SUCCESS: the sender sees no Error
  std::string words;                       // in the Error the sender sees
  std::vector<std::string> log;            // parts of one server log line; "PEER" = the attacker
  std::chrono::milliseconds within{2000};  // the close comes within this
};

std::vector<Case> cases() {
  std::vector<uint8_t> truncated = rv::encode_frame(2, rv::Set{"key", {1, 2, 3}});
  truncated.resize(truncated.size() - 2);  // the value's bytes run past the frame
  truncated[12] = static_cast<uint8_t>(truncated[12] - 2);
  std::vector<uint8_t> half = rv::encode_frame(2, rv::Set{"key", std::vector<uint8_t>(64, 5)});
  half.resize(half.size() / 2);

  auto bytes = [](std::vector<uint8_t> b, bool after) {
    return [b, after](int port) { return send_and_watch(port, b, after, ""); };
  };
  std::vector<Case> t;
  t.push_back(
      {"bad magic",
       false,
       nullptr,
       bytes({'G', 'E', 'T', ' ', '/', ' ', 'H', 'T', 'T', 'P', '/', '1', '.', '1', '\r', '\n'},
             false),
       CC_ERR_RENDEZVOUS,
       "bad magic",
       {"[warning] dropping PEER: bad magic"}});
  t.push_back({"wrong version",
               false,
               nullptr,
               bytes(header(rv::kMagic, 99, 1, 0), false),
               CC_ERR_RENDEZVOUS,
               "unsupported protocol version",
               {"[warning] dropping PEER: unsupported protocol version"}});
  t.push_back({"length over the maximum",
               false,
               nullptr,
               bytes(header(rv::kMagic, rv::kProtocolVersion, 10, (4u << 20) + 1), false),
               CC_ERR_RENDEZVOUS,
               "frame length over the maximum",
               {"[warning] dropping PEER: frame length over the maximum"}});
  t.push_back({"a hello larger than the handshake's limit",
               false,
               nullptr,
               bytes(header(rv::kMagic, rv::kProtocolVersion, 1, 1u << 20), false),
               CC_ERR_RENDEZVOUS,
               "before the handshake was done, over the limit of 16384 bytes",
               {"[warning] dropping PEER: a frame of 1048576 bytes before the handshake"}});
  t.push_back({"truncated frame",
               false,
               nullptr,
               bytes(truncated, true),
               CC_ERR_RENDEZVOUS,
               "truncated message",
               {"[warning] dropping ", " at PEER: truncated message"}});
  t.push_back({"unknown type",
               false,
               nullptr,
               bytes(header(rv::kMagic, rv::kProtocolVersion, 999, 0), false),
               CC_ERR_RENDEZVOUS,
               "unknown message type",
               {"[warning] dropping PEER: unknown message type"}});
  t.push_back({"oversized key",
               false,
               nullptr,
               bytes(rv::encode_frame(2, rv::Set{std::string(2000, 'k'), {1}}), true),
               CC_ERR_RENDEZVOUS,
               "over its size limit",
               {"[warning] dropping ", " at PEER: a key, value"}});
  t.push_back(
      {"a flood of connects",
       false,
       [](rv::ServerOptions& o) { o.max_connections = 16; },
       [](int port) {
         std::vector<std::unique_ptr<RawClient>> flood;
         for (int i = 0; i < 16; ++i) flood.push_back(std::make_unique<RawClient>(port));
         RawClient extra(port);
         Outcome o;
         o.peer = local_name(extra);
         o.closed = extra.closed_within(3s, &o.seen);
         return o;
       },
       CC_ERR_RENDEZVOUS,
       "at its limit of 16 connections",
       {"[warning] refusing PEER: the rendezvous server is at its limit of 16 connections"}});
  t.push_back(
      {"slow drip of bytes",
       false,
       nullptr,
       [](int port) {
         RawClient c(port);
         Outcome o;
         o.peer = local_name(c);
         REQUIRE(handshake(c, ""));
         const auto frame = rv::encode_frame(2, rv::Set{"drip", std::vector<uint8_t>(40, 1)});
         const auto t0 = std::chrono::steady_clock::now();
         for (size_t i = 0; i < frame.size(); ++i) {  // one byte every 50 ms: 3 s for the frame
           if (!c.send_bytes(std::span(frame.data() + i, 1))) break;
           if (c.closed_within(50ms, &o.seen)) break;
         }
         o.closed = c.closed_within(3s, &o.seen);
         o.took = std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now() - t0);
         return o;
       },
       CC_ERR_RENDEZVOUS,
       "a frame stalled",
       {"[warning] dropping ", " at PEER: a frame stalled"},
       1500ms});
  t.push_back({"silent after connecting",
               false,
               nullptr,
               bytes({}, false),
               CC_ERR_RENDEZVOUS,
               "no hello within 400 ms",
               {"[warning] dropping PEER: no hello within 400 ms"},
               1500ms});
  t.push_back({"idle after the handshake",
               false,
               [](rv::ServerOptions& o) { o.idle_timeout = 300ms; },
               bytes({}, true),
               CC_ERR_RENDEZVOUS,
               "idle for 300 ms",
               {"[warning] dropping ", " at PEER: idle for 300 ms"},
               1500ms});
  t.push_back({"wrong token",
               true,
               nullptr,
               on_one_connection([](RawClient& c) {
                 auto r = c.call(rv::Hello{"table", "host-t", 7, "c"});
                 REQUIRE(r);
                 const auto nonce = std::get<rv::Challenge>(*r).nonce;
                 c.send(2, rv::Auth{rv::auth_mac("not-the-token", nonce, "table")});
               }),
               CC_ERR_AUTH,
               "token was refused",
               {"[warning] dropping PEER: the rendezvous token was refused"}});
  t.push_back({"missing token",
               true,
               nullptr,
               on_one_connection([](RawClient& c) {
                 REQUIRE(c.call(rv::Hello{"table", "host-t", 7, "c"}));
                 c.send(2, rv::Get{"k", 0});  // skipping Auth reads nothing
               }),
               CC_ERR_AUTH,
               "requires a token",
               {"[warning] dropping PEER: the rendezvous server requires a token"}});
  t.push_back({"replayed auth answer",
               true,
               nullptr,
               [](int port) {
                 // A legitimate client's answer, recorded, then sent on a new connection.
                 RawClient first(port);
                 auto r = first.call(rv::Hello{"table", "host-t", 7, "c"});
                 REQUIRE(r);
                 const auto nonce1 = std::get<rv::Challenge>(*r).nonce;
                 const rv::Auth answer{rv::auth_mac(kToken, nonce1, "table")};
                 r = first.call(answer);
                 REQUIRE(r);
                 REQUIRE(std::holds_alternative<rv::Ok>(*r));
                 RawClient replay(port);
                 Outcome o;
                 o.peer = local_name(replay);
                 r = replay.call(rv::Hello{"table", "host-t", 7, "c"});
                 REQUIRE(r);
                 CHECK(std::get<rv::Challenge>(*r).nonce != nonce1);  // a fresh nonce
                 replay.send(2, answer);
                 o.closed = replay.closed_within(3s, &o.seen);
                 return o;
               },
               CC_ERR_AUTH,
               "token was refused",
               {"[warning] dropping PEER: the rendezvous token was refused"}});
  t.push_back({"client vanishing mid-frame",
               false,
               nullptr,
               [half](int port) {
                 Outcome o;
                 {
                   RawClient c(port);
                   o.peer = local_name(c);
                   REQUIRE(handshake(c, ""));
                   REQUIRE(c.send_bytes(half));
                 }  // closed here
                 o.closed = true;
                 return o;
               },
               CC_SUCCESS,
               "",
               {"[warning] ", " at PEER disconnected",
                "in the middle of a frame (" + std::to_string(half.size()) +
                    " bytes of a truncated frame)"}});
  return t;
}

std::vector<std::string> with_peer(std::vector<std::string> parts, const std::string& peer) {
  for (auto& p : parts)
    if (auto at = p.find("PEER"); at != std::string::npos) p.replace(at, 4, peer);
  return parts;
}

}  // namespace

TEST_CASE(
    "hostile table: what the sender sees, what the server logs, and a legitimate client after") {
  LogCapture& log = LogCapture::install();
  for (const Case& c : cases()) {
    SECTION(c.name) {
      rv::ServerOptions o;
      o.bind_addr = "127.0.0.1";
      o.handshake_timeout = 400ms;
      o.frame_timeout = 400ms;
      if (c.token) o.token = kToken;
      if (c.tune) c.tune(o);
      std::unique_ptr<rv::Server> server;
      cc::Status st = rv::Server::start(o, &server);
      INFO(st.message);
      REQUIRE(st.ok());
      const int port = server->port();

      const Outcome out = c.attack(port);
      INFO("peer " << out.peer);
      CHECK(out.closed);
      if (out.took.count() > 0) CHECK(out.took < c.within);
      const rv::Error* e = first_error(out);
      if (c.code == CC_SUCCESS) {
        CHECK(e == nullptr);
      } else {
        REQUIRE(e != nullptr);
        CHECK(e->code == static_cast<uint32_t>(c.code));
        CHECK_THAT(e->message, Catch::Contains(c.words));
      }
      const auto parts = with_peer(c.log, out.peer);
      std::string all;
      for (const auto& p : parts) all += "<" + p + "> ";
      INFO("expected a log line with " << all);
      CHECK_FALSE(log.wait_for(parts).empty());
      CHECK(legit_client_works(port, c.token ? kToken : ""));
    }
  }
}

TEST_CASE("hostile table: the refused token's words say nothing of what was wrong") {
  LogCapture::install();
  rv::ServerOptions o;
  o.bind_addr = "127.0.0.1";
  o.token = kToken;
  std::unique_ptr<rv::Server> server;
  REQUIRE(rv::Server::start(o, &server).ok());
  for (const std::string job : {"table", "other-job"}) {
    RawClient c(server->port());
    auto r = c.call(rv::Hello{job, "h", 1, "c"});
    REQUIRE(r);
    const auto nonce = std::get<rv::Challenge>(*r).nonce;
    CHECK(nonce.size() == rv::kNonceSize);
    r = c.call(rv::Auth{rv::auth_mac("wrong", nonce, job)});
    REQUIRE(r);
    const auto& e = std::get<rv::Error>(*r);
    CHECK(e.code == CC_ERR_AUTH);
    CHECK_THAT(e.message, Catch::Contains("the rendezvous token was refused"));
    CHECK_THAT(e.message, !Catch::Contains("nonce") && !Catch::Contains("job") &&
                              !Catch::Contains(kToken) && !Catch::Contains("length") &&
                              !Catch::Contains("byte"));
  }
}

TEST_CASE("hostile table: a server without a token warns at start; one with a token does not") {
  LogCapture& log = LogCapture::install();
  rv::ServerOptions open;
  open.bind_addr = "127.0.0.1";
  std::unique_ptr<rv::Server> a;
  REQUIRE(rv::Server::start(open, &a).ok());
  const std::string where = "127.0.0.1:" + std::to_string(a->port());
  CHECK_FALSE(log.wait_for({"[warning] rendezvous server on " + where + " has no token",
                            "anyone who can reach the port can join"})
                  .empty());
  rv::ServerOptions guarded = open;
  guarded.token = kToken;
  std::unique_ptr<rv::Server> b;
  REQUIRE(rv::Server::start(guarded, &b).ok());
  CHECK(log.find({"127.0.0.1:" + std::to_string(b->port()) + " has no token"}).empty());
}

TEST_CASE("hostile table: the idle deadline spares members, parked waits and talkers") {
  LogCapture::install();
  rv::ServerOptions o;
  o.bind_addr = "127.0.0.1";
  o.idle_timeout = 300ms;
  std::unique_ptr<rv::Server> server;
  REQUIRE(rv::Server::start(o, &server).ok());
  const int port = server->port();

  RawClient waiter(port);
  REQUIRE(handshake(waiter, ""));
  REQUIRE(waiter.send(2, rv::Get{"late", 1500}));  // parked for 1.5 s: not idle
  RawClient talker(port);
  REQUIRE(handshake(talker, ""));
  RawClient idle(port);
  REQUIRE(handshake(idle, ""));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 8; ++i) {  // 800 ms of a request every 100 ms
    auto r = talker.call(rv::Add{"n", 1});
    REQUIRE(r);
    REQUIRE(std::holds_alternative<rv::Integer>(*r));
    std::this_thread::sleep_for(100ms);
  }
  std::vector<rv::Message> seen;
  CHECK(idle.closed_within(100ms, &seen));
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
  auto r = talker.call(rv::Set{"late", {1}});
  REQUIRE(r);
  CHECK(std::holds_alternative<rv::Ok>(*r));
  auto f = waiter.recv(2s);
  REQUIRE(f);
  CHECK(std::holds_alternative<rv::Value>(f->message));
}
