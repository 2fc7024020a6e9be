// The store and server C API and the client, in one process against an
// embedded server on loopback: argument checks, deadlines, a stopped server,
// a closed port, tokens, IPv6, and the client's peer events under threads.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cc/cc.h"
#include "rendezvous/frame_client.hpp"
#include "rendezvous/server.hpp"
#include "tests/common/free_port.hpp"
#include "tests/common/skip.hpp"
#include "tests/rendezvous/loopback_client.hpp"
#include "tests/rendezvous/store_api_cases.hpp"

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

long long ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t).count();
}

std::string last_error() { return cc_last_error(); }

// A server on 127.0.0.1, any free port, stopped at the end of the scope.
struct TestServer {
  cc_server_t server = nullptr;
  int port = 0;
  explicit TestServer(const char* token = nullptr, const char* bind = "127.0.0.1") {
    cc_config_t config = CC_CONFIG_INIT;
    config.token = token;
    REQUIRE(cc_server_start(&server, bind, 0, &config) == CC_SUCCESS);
    REQUIRE(cc_server_port(server, &port) == CC_SUCCESS);
    REQUIRE(port > 0);
  }
  ~TestServer() { (void)cc_server_stop(server); }
};

cc_store_t connect(int port, const char* job = "test", const char* token = nullptr,
                   int timeout_ms = 5000) {
  cc_config_t config = CC_CONFIG_INIT;
  config.timeout_ms = timeout_ms;
  config.token = token;
  cc_store_t store = nullptr;
  const cc_result_t r = cc_store_connect(&store, "127.0.0.1", port, job, &config);
  INFO(last_error());
  REQUIRE(r == CC_SUCCESS);
  REQUIRE(store != nullptr);
  return store;
}

// The store API cases' view of a server: connections to one job, and how
// the store's messages name it.
cc::test::StoreApiTarget target(const TestServer& srv) {
  const int port = srv.port;
  return {[port] { return connect(port); }, "127.0.0.1:" + std::to_string(port)};
}

// A port nobody listens on.
int closed_port() {
  const int port = cc::test::free_port();
  REQUIRE(port > 0);
  return port;
}

}  // namespace

TEST_CASE("store: set, get, add and wait in one process") {
  TestServer srv;
  cc::test::store_api_case_basics(target(srv));
}

TEST_CASE("store: timeouts answer near their deadline and name the keys") {
  TestServer srv;
  cc::test::store_api_case_deadlines(target(srv));
}

TEST_CASE("store: a buffer too small reports the needed length") {
  TestServer srv;
  cc::test::store_api_case_small_buffer(target(srv));
}

TEST_CASE("store: arguments are checked before anything is sent") {
  TestServer srv;
  cc_store_t s = connect(srv.port);
  char buf[4];
  size_t len = 0;
  cc_store_t out = nullptr;

  CHECK(cc_store_connect(nullptr, "127.0.0.1", srv.port, nullptr, nullptr) ==
        CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("store is NULL"));
  CHECK(cc_store_connect(&out, nullptr, srv.port, nullptr, nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("addr is NULL"));
  CHECK(cc_store_connect(&out, "127.0.0.1", 70000, nullptr, nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("port 70000 is out of range 1..65535"));
  CHECK(cc_store_connect(&out, "127.0.0.1", 0, nullptr, nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK(cc_store_connect(&out, "127.0.0.1", srv.port, "", nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("job_id is empty"));
  CHECK(out == nullptr);

  cc_config_t bad = CC_CONFIG_INIT;
  bad.magic = 0;
  CHECK(cc_store_connect(&out, "127.0.0.1", srv.port, nullptr, &bad) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("CC_CONFIG_INIT"));

  CHECK(cc_store_set(nullptr, "k", "v", 1) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("store is NULL"));
  CHECK(cc_store_set(s, nullptr, "v", 1) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("key is NULL"));
  CHECK(cc_store_set(s, "k", nullptr, 3) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("value is NULL but len is 3"));
  CHECK(cc_store_set(s, std::string(2000, 'k').c_str(), "v", 1) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("2000 bytes long"));
  CHECK(cc_store_get(s, "k", nullptr, 4, &len, 0) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("buf is NULL"));
  CHECK(cc_store_get(s, "k", buf, sizeof(buf), nullptr, 0) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("len is NULL"));
  CHECK(cc_store_add(s, nullptr, 1, nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK(cc_store_wait(s, nullptr, -1, 0) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("nkeys is -1"));
  CHECK(cc_store_wait(s, nullptr, 2, 0) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("keys is NULL"));
  const char* with_null[] = {"a", nullptr};
  CHECK(cc_store_wait(s, with_null, 2, 0) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("keys[1] is NULL"));

  CHECK(cc_store_close(nullptr) == CC_SUCCESS);
  CHECK(cc_server_stop(nullptr) == CC_SUCCESS);
  CHECK(cc_server_start(nullptr, nullptr, 0, nullptr) == CC_ERR_INVALID_ARGUMENT);
  cc_server_t srv2 = nullptr;
  CHECK(cc_server_start(&srv2, nullptr, -1, nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("port -1 is out of range"));
  int port = 0;
  CHECK(cc_server_port(nullptr, &port) == CC_ERR_INVALID_ARGUMENT);
  CHECK(cc_store_close(s) == CC_SUCCESS);
}

TEST_CASE("store: tcp://host:port carries its port; a malformed address is refused in words") {
  TestServer srv;
  const std::string tcp = "tcp://127.0.0.1:" + std::to_string(srv.port);
  cc_config_t config = CC_CONFIG_INIT;
  config.timeout_ms = 5000;
  cc_store_t a = nullptr;
  cc_store_t b = nullptr;
  // The port argument is not used: 0 and a wrong one alike.
  REQUIRE(cc_store_connect(&a, tcp.c_str(), 0, "tcp-form", &config) == CC_SUCCESS);
  REQUIRE(cc_store_connect(&b, "127.0.0.1", srv.port, "tcp-form", &config) == CC_SUCCESS);
  REQUIRE(cc_store_set(a, "k", "v", 1) == CC_SUCCESS);
  char buf[4];
  size_t len = 0;
  REQUIRE(cc_store_get(b, "k", buf, sizeof(buf), &len, 0) == CC_SUCCESS);
  CHECK(std::string(buf, len) == "v");
  CHECK(cc_store_close(a) == CC_SUCCESS);
  CHECK(cc_store_close(b) == CC_SUCCESS);

  cc_store_t out = nullptr;
  CHECK(cc_store_connect(&out, "127.0.0.1:29500", 29500, "x", &config) == CC_ERR_INVALID_ARGUMENT);
  CHECK(last_error() ==
        "cc_store_connect: the rendezvous address '127.0.0.1:29500' has a port in it: write "
        "tcp://127.0.0.1:29500, or the host alone with its port apart (MASTER_PORT)");
  CHECK(cc_store_connect(&out, "tcp://127.0.0.1", 29500, "x", &config) == CC_ERR_INVALID_ARGUMENT);
  CHECK(last_error() ==
        "cc_store_connect: the rendezvous address 'tcp://127.0.0.1' has no port: write it as "
        "tcp://host:port ([v6]:port for IPv6)");
  CHECK(out == nullptr);
}

TEST_CASE("store: connecting to a closed port fails within its timeout, naming the address") {
  const int port = closed_port();
  cc_config_t config = CC_CONFIG_INIT;
  config.timeout_ms = 700;
  cc_store_t s = nullptr;
  const auto t0 = Clock::now();
  const cc_result_t r = cc_store_connect(&s, "127.0.0.1", port, "x", &config);
  const long long elapsed = ms_since(t0);
  CHECK(r == CC_ERR_RENDEZVOUS);
  CHECK(s == nullptr);
  CHECK(elapsed >= 600);
  CHECK(elapsed < 3000);
  CHECK_THAT(last_error(),
             Catch::Contains("cannot reach the rendezvous at 127.0.0.1:" + std::to_string(port)) &&
                 Catch::Contains("connection refused") && Catch::Contains("attempts") &&
                 Catch::Contains("MASTER_ADDR/MASTER_PORT"));
}

TEST_CASE("store: connect retries until a late server comes up") {
  const int port = closed_port();
  auto late = std::async(std::launch::async, [port] {
    std::this_thread::sleep_for(milliseconds(300));
    cc_server_t server = nullptr;
    const cc_result_t r = cc_server_start(&server, "127.0.0.1", port, nullptr);
    return std::make_pair(r, server);
  });
  cc_store_t s = nullptr;
  cc_config_t config = CC_CONFIG_INIT;
  config.timeout_ms = 10000;
  const cc_result_t r = cc_store_connect(&s, "127.0.0.1", port, "late", &config);
  auto [started, server] = late.get();
  REQUIRE(started == CC_SUCCESS);
  CHECK(r == CC_SUCCESS);
  CHECK(cc_store_set(s, "k", "v", 1) == CC_SUCCESS);
  CHECK(cc_store_close(s) == CC_SUCCESS);
  CHECK(cc_server_stop(server) == CC_SUCCESS);
}

TEST_CASE("store: a stopped server releases a waiting get with an error") {
  auto srv = std::make_unique<TestServer>();
  cc_store_t s = connect(srv->port);
  auto waiting = std::async(std::launch::async, [s] {
    char buf[8];
    size_t len = 0;
    const auto t0 = Clock::now();
    const cc_result_t r = cc_store_get(s, "never", buf, sizeof(buf), &len, 30000);
    return std::make_tuple(r, std::string(cc_last_error()), ms_since(t0));
  });
  std::this_thread::sleep_for(milliseconds(300));
  srv.reset();  // cc_server_stop
  REQUIRE(waiting.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  auto [r, words, elapsed] = waiting.get();
  CHECK(r == CC_ERR_RENDEZVOUS);
  CHECK(elapsed < 5000);
  CHECK_THAT(words, Catch::Contains("stopping") || Catch::Contains("closed the connection"));
  // later calls fail at once, saying the server went away
  CHECK(cc_store_set(s, "k", "v", 1) == CC_ERR_RENDEZVOUS);
  CHECK(cc_store_close(s) == CC_SUCCESS);
}

TEST_CASE("store: tokens") {
  TestServer srv("sesame");
  cc_config_t config = CC_CONFIG_INIT;
  config.timeout_ms = 3000;
  cc_store_t s = nullptr;

  config.token = "";
  CHECK(cc_store_connect(&s, "127.0.0.1", srv.port, "tok", &config) == CC_ERR_AUTH);
  CHECK_THAT(last_error(),
             Catch::Contains("requires a token") && Catch::Contains("CC_RENDEZVOUS_TOKEN"));

  config.token = "wrong";
  CHECK(cc_store_connect(&s, "127.0.0.1", srv.port, "tok", &config) == CC_ERR_AUTH);
  CHECK_THAT(last_error(), Catch::Contains("refused our token") &&
                               Catch::Contains("127.0.0.1:" + std::to_string(srv.port)));
  CHECK(s == nullptr);

  config.token = "sesame";
  REQUIRE(cc_store_connect(&s, "127.0.0.1", srv.port, "tok", &config) == CC_SUCCESS);
  CHECK(cc_store_set(s, "k", "v", 1) == CC_SUCCESS);
  CHECK(cc_store_close(s) == CC_SUCCESS);
}

TEST_CASE("store: IPv6 loopback, with and without brackets", "[.ipv6]") {
  cc_server_t server = nullptr;
  if (cc_server_start(&server, "::1", 0, nullptr) != CC_SUCCESS)
    cc::test::skip_case("no IPv6 loopback here: " + std::string(last_error()));
  int port = 0;
  REQUIRE(cc_server_port(server, &port) == CC_SUCCESS);
  for (const char* addr : {"::1", "[::1]"}) {
    cc_store_t s = nullptr;
    INFO(addr);
    REQUIRE(cc_store_connect(&s, addr, port, "v6", nullptr) == CC_SUCCESS);
    int64_t v = 0;
    CHECK(cc_store_add(s, "n", 1, &v) == CC_SUCCESS);
    CHECK(cc_store_close(s) == CC_SUCCESS);
  }
  CHECK(cc_server_stop(server) == CC_SUCCESS);
}

TEST_CASE("client: peer events arrive while another thread sends heartbeats") {
  using namespace cc::rv;
  TestServer srv;
  FrameClientOptions o;
  o.addr = "127.0.0.1";
  o.port = srv.port;
  o.job_id = "events";
  o.connect_timeout = milliseconds(5000);
  o.request_timeout = milliseconds(5000);
  std::unique_ptr<Client> a, b;
  REQUIRE(connect_frame_client(o, &a).ok());
  REQUIRE(connect_frame_client(o, &b).ok());

  auto join = [](Client& c, int rank) {
    Join j;
    j.info.rank = rank;
    j.info.world_size = 2;
    j.info.host = "localhost";
    j.info.pid = static_cast<uint32_t>(1000 + rank);
    j.info.gpu_uuid = "GPU-" + std::to_string(rank);
    if (rank == 0) j.unique_id = std::vector<uint8_t>(128, 42);
    j.timeout_ms = 10000;
    Joined out;
    cc::Status s = c.join(j, &out);
    return std::make_pair(s, out);
  };
  auto joined_b = std::async(std::launch::async, [&] { return join(*b, 1); });
  auto [sa, ja] = join(*a, 0);
  auto [sb, jb] = joined_b.get();
  INFO(sa.message << " / " << sb.message);
  REQUIRE(sa.ok());
  REQUIRE(sb.ok());
  CHECK(jb.unique_id == std::vector<uint8_t>(128, 42));
  REQUIRE(ja.members.size() == 1);  // rank 0: the others come named in their events
  CHECK(ja.members[0].pid == 1000);

  // a waits for events on one thread while another heartbeats on the same client
  auto events = std::async(std::launch::async, [&] { return a->next_event(milliseconds(10000)); });
  for (int i = 0; i < 5; ++i) {
    cc::Status hb = a->heartbeat(static_cast<uint64_t>(i));
    INFO(hb.message);
    CHECK(hb.ok());
  }
  const auto t0 = Clock::now();
  b.reset();  // rank 1 vanishes without leaving
  REQUIRE(events.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  const auto e = events.get();
  REQUIRE(e.has_value());
  CHECK(e->kind == PeerEventKind::failed);
  CHECK(e->rank == 1);
  CHECK(ms_since(t0) < 5000);
  CHECK(a->heartbeat(99).ok());
  CHECK(a->leave().ok());
}

namespace {

// A one-connection fake server on loopback: answers Hello with a Challenge,
// then runs `after_hello` on the accepted socket.
template <typename F>
std::pair<int, std::thread> fake_server(F after_hello) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  REQUIRE(::listen(listener, 4) == 0);
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  std::thread t([listener, after_hello] {
    const int fd = ::accept(listener, nullptr, nullptr);
    ::close(listener);
    if (fd < 0) return;
    cc::rv::FrameReader reader;
    uint8_t buf[4096];
    std::optional<cc::rv::FrameReader::Frame> hello;
    while (!hello) {
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      reader.feed(std::span<const uint8_t>(buf, static_cast<size_t>(n)));
      hello = reader.next();
    }
    if (hello) {
      const auto frame =
          cc::rv::encode_frame(hello->request_id, cc::rv::Challenge{false, {}, "fake"});
      (void)!::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL);
      after_hello(fd);
    }
    ::close(fd);
  });
  return {ntohs(a.sin_port), std::move(t)};
}

}  // namespace

TEST_CASE("client: a server that closes mid-request is named, and the event reader learns it") {
  auto [port, thread] = fake_server([](int fd) {
    uint8_t buf[256];
    (void)!::recv(fd, buf, sizeof(buf), 0);  // the request, then hang up
  });
  auto c = cc::test::loopback_client(port);
  const auto t0 = Clock::now();
  const cc::Status s = c->add("k", 1, nullptr);
  thread.join();
  CHECK(s.code == CC_ERR_RENDEZVOUS);
  CHECK_THAT(s.message,
             Catch::Contains("the rendezvous server at 127.0.0.1:" + std::to_string(port) +
                             " closed the connection (did it stop or crash?)"));
  CHECK(ms_since(t0) < 3000);
  const auto e = c->next_event(milliseconds(1000));
  REQUIRE(e.has_value());
  CHECK(e->kind == cc::rv::PeerEventKind::server_stopping);
  CHECK_FALSE(c->next_event(milliseconds(10)).has_value());
  CHECK(c->set("k", {}).code == CC_ERR_RENDEZVOUS);
}

TEST_CASE("client: a server that sends garbage, or never answers") {
  SECTION("garbage") {
    auto [port, thread] = fake_server([](int fd) {
      uint8_t buf[256];
      (void)!::recv(fd, buf, sizeof(buf), 0);
      const char junk[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
      (void)!::send(fd, junk, sizeof(junk) - 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(milliseconds(200));
    });
    auto c = cc::test::loopback_client(port);
    const cc::Status s = c->add("k", 1, nullptr);
    thread.join();
    CHECK(s.code == CC_ERR_RENDEZVOUS);
    CHECK_THAT(s.message,
               Catch::Contains("sent a frame we cannot read") && Catch::Contains("bad magic"));
  }
  SECTION("silence: the request deadline") {
    std::atomic<bool> done{false};
    auto [port, thread] = fake_server([&done](int) {
      while (!done) std::this_thread::sleep_for(milliseconds(10));
    });
    cc::rv::FrameClientOptions o;
    o.addr = "127.0.0.1";
    o.port = port;
    o.request_timeout = milliseconds(300);
    std::unique_ptr<cc::rv::Client> c;
    REQUIRE(cc::rv::connect_frame_client(o, &c).ok());
    const auto t0 = Clock::now();
    const cc::Status s = c->set("k", {});
    const long long elapsed = ms_since(t0);
    done = true;
    thread.join();
    CHECK(s.code == CC_ERR_TIMEOUT);
    CHECK(elapsed >= 250);
    CHECK(elapsed < 3000);
    CHECK_THAT(s.message, Catch::Contains("did not answer a set of key 'k'"));
  }
}

TEST_CASE("store: an empty key is refused in words, and the handle keeps working") {
  TestServer srv;
  cc_store_t s = connect(srv.port);
  char buf[4];
  size_t len = 0;
  int64_t sum = 0;
  int swapped = 0;
  CHECK(cc_store_set(s, "", "v", 1) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("cc_store_set: key is empty"));
  CHECK(cc_store_get(s, "", buf, sizeof(buf), &len, 0) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("cc_store_get: key is empty"));
  CHECK(cc_store_add(s, "", 1, &sum) == CC_ERR_INVALID_ARGUMENT);
  CHECK(cc_store_delete(s, "") == CC_ERR_INVALID_ARGUMENT);
  CHECK(cc_store_compare_set(s, "", nullptr, 0, "v", 1, &swapped) == CC_ERR_INVALID_ARGUMENT);
  const char* keys[] = {"a", ""};
  CHECK(cc_store_wait(s, keys, 2, 0) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("keys[1] is empty"));
  REQUIRE(cc_store_set(s, "k", "v", 1) == CC_SUCCESS);
  REQUIRE(cc_store_get(s, "k", buf, sizeof(buf), &len, 0) == CC_SUCCESS);
  CHECK(std::string(buf, len) == "v");
  CHECK(cc_store_close(s) == CC_SUCCESS);

  // The client under the C API refuses it too, before anything is sent.
  auto c = cc::test::loopback_client(srv.port, "test");
  const cc::Status empty = c->set("", {});
  CHECK(empty.code == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(empty.message, Catch::Contains("the key is empty"));
  const std::vector<std::string> with_empty{"k", ""};
  CHECK(c->wait(with_empty, 0).code == CC_ERR_INVALID_ARGUMENT);
  std::vector<uint8_t> value;
  const cc::Status got = c->get("k", &value, 0);
  INFO(got.message);
  CHECK(got.ok());
  CHECK(value == std::vector<uint8_t>{'v'});
}

TEST_CASE("store: a job id over 1024 bytes is refused, naming its start and the limit") {
  TestServer srv;
  const std::string job = "job-" + std::string(1996, 'x');  // 2000 bytes
  cc_store_t out = nullptr;
  CHECK(cc_store_connect(&out, "127.0.0.1", srv.port, job.c_str(), nullptr) ==
        CC_ERR_INVALID_ARGUMENT);
  CHECK(out == nullptr);
  const std::string words = last_error();
  CHECK_THAT(words, Catch::Contains("cc_store_connect: job_id 'job-xxxx") &&
                        Catch::Contains("(2000 bytes)") &&
                        Catch::Contains("over the limit of 1024 bytes"));
  CHECK(words.size() < 400);  // not the whole id

  // The client itself refuses one too (cc_comm_init's path).
  cc::rv::FrameClientOptions o;
  o.addr = "127.0.0.1";
  o.port = srv.port;
  o.job_id = job;
  std::unique_ptr<cc::rv::Client> c;
  const cc::Status refused = cc::rv::connect_frame_client(o, &c);
  CHECK(refused.code == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(refused.message, Catch::Contains("the job id 'job-x") &&
                                  Catch::Contains("over the limit of 1024 bytes"));

  const std::string longest(1024, 'y');
  cc_store_t s = nullptr;
  CHECK(cc_store_connect(&s, "127.0.0.1", srv.port, longest.c_str(), nullptr) == CC_SUCCESS);
  CHECK(cc_store_set(s, "k", "v", 1) == CC_SUCCESS);
  CHECK(cc_store_close(s) == CC_SUCCESS);
}

TEST_CASE("store: a get from a server that never answers ends at its deadline, saying so") {
  std::atomic<bool> done{false};
  auto [port, thread] = fake_server([&done](int) {
    while (!done) std::this_thread::sleep_for(milliseconds(10));
  });
  cc_config_t config = CC_CONFIG_INIT;
  config.timeout_ms = 30000;
  cc_store_t s = nullptr;
  REQUIRE(cc_store_connect(&s, "127.0.0.1", port, "test", &config) == CC_SUCCESS);
  char buf[4];
  size_t len = 0;
  const auto t0 = Clock::now();
  const cc_result_t r = cc_store_get(s, "k", buf, sizeof(buf), &len, 1000);
  const long long elapsed = ms_since(t0);
  const std::string words = last_error();
  done = true;
  thread.join();
  INFO(words);
  CHECK(r == CC_ERR_TIMEOUT);
  CHECK(elapsed >= 1000);
  CHECK(elapsed < 2500);  // the timeout and 250 ms for an answer, not seconds more
  CHECK_THAT(words, Catch::Contains("did not answer a get of key 'k'") &&
                        !Catch::Contains("not set within"));
  CHECK(cc_store_close(s) == CC_SUCCESS);
}

TEST_CASE("client: a server flooding it with peer events is given up in words at the bound") {
  auto [port, thread] = fake_server([](int fd) {
    std::this_thread::sleep_for(milliseconds(100));  // the handshake is over
    std::vector<uint8_t> flood;
    for (int i = 0; i < 3000; ++i) {
      cc::rv::append_frame(flood, 0,
                           cc::rv::PeerEvent{cc::rv::PeerEventKind::failed, i, "host", 1,
                                             std::string(100, 'r')});
    }
    size_t done = 0;
    while (done < flood.size()) {  // until the client gives up and closes
      const ssize_t n = ::send(fd, flood.data() + done, flood.size() - done, MSG_NOSIGNAL);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    // Closing with the client's request unread would reset the connection
    // under what it has not read yet: wait for the client to close first.
    uint8_t buf[4096];
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) > 0 && ::recv(fd, buf, sizeof(buf), 0) <= 0) break;
    }
  });
  auto c = cc::test::loopback_client(port);
  const cc::Status s = c->set("k", {});  // never answered
  INFO(s.message);
  CHECK(s.code == CC_ERR_RENDEZVOUS);
  CHECK_THAT(s.message, Catch::Contains("the rendezvous at 127.0.0.1:" + std::to_string(port)) &&
                            Catch::Contains("pushed more than 1024 peer events"));
  size_t events = 0;
  while (c->next_event(milliseconds(0))) ++events;
  CHECK(events == 1025);  // the bound, then the news that the connection is given up
  CHECK(c->add("n", 1, nullptr).code == CC_ERR_RENDEZVOUS);
  c.reset();
  thread.join();
}
