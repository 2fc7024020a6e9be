// Rank 0's embedded rendezvous server: shared by port within a process,
// stopped with its last user, and a taken port is an error as text.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include "lib/comm/embedded_server.hpp"
#include "rendezvous/frame_client.hpp"

namespace {

// A listening loopback socket on a kernel-chosen port; closed on scope exit.
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = 0;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && listen(fd, 4) == 0) {
      socklen_t len = sizeof a;
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
      port = ntohs(a.sin_port);
    }
  }
  ~Listener() { close(); }
  void close() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

bool can_bind(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

cc::Status connect_to(int port) {
  cc::rv::FrameClientOptions o;
  o.addr = "127.0.0.1";
  o.port = port;
  o.connect_timeout = std::chrono::milliseconds(1000);
  o.request_timeout = std::chrono::milliseconds(2000);
  std::unique_ptr<cc::rv::Client> client;
  cc::Status st = cc::rv::connect_frame_client(o, &client);
  if (!st.ok()) return st;
  uint8_t v = 7;
  st = client->set("k", std::span<const uint8_t>(&v, 1));
  return st;
}

}  // namespace

TEST_CASE("communicators of one process share the embedded server of a port") {
  Listener probe;
  REQUIRE(probe.port > 0);
  const int port = probe.port;
  probe.close();

  std::unique_ptr<cc::comm::EmbeddedServerRef> a, b;
  REQUIRE(cc::comm::EmbeddedServerRef::acquire("0.0.0.0", port, "", {}, &a).ok());
  REQUIRE(cc::comm::EmbeddedServerRef::acquire("0.0.0.0", port, "", {}, &b).ok());
  CHECK(a->port() == port);
  CHECK(connect_to(port).ok());
  CHECK_FALSE(can_bind(port));

  a->release("default", std::chrono::milliseconds(100));
  CHECK(connect_to(port).ok());  // b still holds it
  const auto t0 = std::chrono::steady_clock::now();
  b->release("no-such-job", std::chrono::milliseconds(3000));  // idle at once: no wait
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(1500));
  CHECK(can_bind(port));  // the last user stopped it
  CHECK_FALSE(connect_to(port).ok());
}

TEST_CASE("a port another program holds is an error that says what to do") {
  Listener other;
  REQUIRE(other.port > 0);
  std::unique_ptr<cc::comm::EmbeddedServerRef> ref;
  const cc::Status st = cc::comm::EmbeddedServerRef::acquire("0.0.0.0", other.port, "", {}, &ref);
  CHECK(st.code == CC_ERR_SYSTEM);
  CHECK(ref == nullptr);
  CHECK_THAT(st.message, Catch::StartsWith("could not start the embedded rendezvous server on "
                                           "0.0.0.0:" +
                                           std::to_string(other.port)));
  CHECK_THAT(st.message,
             Catch::Contains("MASTER_PORT") && Catch::Contains("CC_RENDEZVOUS=external"));
  // A failed start leaves nothing behind: once the port is free it works.
  other.close();
  CHECK(cc::comm::EmbeddedServerRef::acquire("0.0.0.0", other.port, "", {}, &ref).ok());
  ref.reset();  // the destructor releases
  CHECK(can_bind(other.port));
}

TEST_CASE("embedded server: rank 0 hosts only a server the address names, unless external") {
  const auto address = [](const char* text) {
    cc::rv::factory::Address a;
    REQUIRE(cc::rv::factory::parse_address(text, 29500, &a).ok());
    return a;
  };
  CHECK(cc::comm::server_in_rank0(address("10.0.0.1"), CC_RENDEZVOUS_EMBEDDED));
  CHECK(cc::comm::server_in_rank0(address("tcp://10.0.0.1:7000"), CC_RENDEZVOUS_EMBEDDED));
  CHECK_FALSE(cc::comm::server_in_rank0(address("10.0.0.1"), CC_RENDEZVOUS_EXTERNAL));
  // An etcd cluster: its election puts the server, whatever CC_RENDEZVOUS
  // says, so a shrink's watchdog never blames rank 0 for losing it.
  CHECK_FALSE(cc::comm::server_in_rank0(address("etcd://10.0.0.1:2379"), CC_RENDEZVOUS_EMBEDDED));
  CHECK_FALSE(cc::comm::server_in_rank0(address("etcds://a:2379,b:2379"), CC_RENDEZVOUS_EXTERNAL));
}
