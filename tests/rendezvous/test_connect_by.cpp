// Connecting with a deadline (rendezvous/connect_by.hpp) on loopback: a
// listener answers, a closed port refuses, a listener whose backlog is full
// never answers and the deadline ends the wait.
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <vector>

#include "common/unique_fd.hpp"
#include "rendezvous/connect_by.hpp"

namespace {

using cc::UniqueFd;
using std::chrono::milliseconds;

// A TCP socket listening on 127.0.0.1 with `backlog`, on a port of the system's choosing.
UniqueFd listener(int backlog, asio::ip::tcp::endpoint* at) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(fd.get() >= 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  REQUIRE(::listen(fd.get(), backlog) == 0);
  socklen_t len = sizeof sa;
  REQUIRE(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len) == 0);
  *at = cc::rv::endpoint_of(reinterpret_cast<sockaddr*>(&sa), len);
  return fd;
}

cc::rv::ConnectClock::time_point in(milliseconds d) { return cc::rv::ConnectClock::now() + d; }

}  // namespace

TEST_CASE("connect_by: a listener answers; the socket is non-blocking and close-on-exec") {
  asio::ip::tcp::endpoint at;
  UniqueFd l = listener(16, &at);
  UniqueFd fd;
  REQUIRE(cc::rv::connect_by(at, in(milliseconds(10000)), &fd) == 0);
  REQUIRE(fd.get() >= 0);
  CHECK((::fcntl(fd.get(), F_GETFL) & O_NONBLOCK) != 0);
  CHECK((::fcntl(fd.get(), F_GETFD) & FD_CLOEXEC) != 0);
}

TEST_CASE("connect_by: a closed port is refused, in errno's terms") {
  asio::ip::tcp::endpoint at;
  { UniqueFd gone = listener(16, &at); }  // the port, closed again
  UniqueFd fd;
  CHECK(cc::rv::connect_by(at, in(milliseconds(10000)), &fd) == ECONNREFUSED);
  CHECK(fd.get() < 0);
}

TEST_CASE("connect_by: no answer ends at the deadline as ETIMEDOUT") {
  asio::ip::tcp::endpoint at;
  UniqueFd l = listener(0, &at);
  // Fill the backlog: later SYNs are dropped, so a connect waits for an answer.
  std::vector<UniqueFd> queued;
  int err = 0;
  for (int i = 0; i < 8 && err == 0; ++i) {
    UniqueFd fd;
    err = cc::rv::connect_by(at, in(milliseconds(300)), &fd);
    if (err == 0) queued.push_back(std::move(fd));
  }
  CHECK(err == ETIMEDOUT);
}

TEST_CASE("async_connect_by: the outcome comes once, through the io_context") {
  asio::ip::tcp::endpoint at;
  UniqueFd l = listener(16, &at);
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.open(at.protocol());
  int calls = 0;
  std::error_code outcome = asio::error::would_block;
  cc::rv::async_connect_by(socket, at, in(milliseconds(10000)), [&](std::error_code ec) {
    ++calls;
    outcome = ec;
  });
  io.run();
  CHECK(calls == 1);
  CHECK(!outcome);
}
