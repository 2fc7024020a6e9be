#include "rendezvous/connect_by.hpp"

#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

namespace cc::rv {

void async_connect_by(asio::ip::tcp::socket& socket, const asio::ip::tcp::endpoint& endpoint,
                      ConnectClock::time_point deadline,
                      std::function<void(std::error_code)> done) {
  struct Attempt {
    explicit Attempt(const asio::any_io_executor& executor) : timer(executor) {}
    asio::steady_timer timer;
    bool timed_out = false;
    std::function<void(std::error_code)> done;
  };
  auto attempt = std::make_shared<Attempt>(socket.get_executor());
  attempt->done = std::move(done);
  attempt->timer.expires_at(deadline);
  attempt->timer.async_wait([attempt, &socket](std::error_code ec) {
    if (ec) return;  // cancelled: the connect ended first
    attempt->timed_out = true;
    std::error_code ignored;
    socket.cancel(ignored);
  });
  socket.async_connect(endpoint, [attempt](std::error_code ec) {
    attempt->timer.cancel();
    attempt->done(attempt->timed_out ? std::error_code(asio::error::timed_out) : ec);
  });
}

int connect_by(const asio::ip::tcp::endpoint& endpoint, ConnectClock::time_point deadline,
               UniqueFd* out) {
  UniqueFd fd(::socket(endpoint.protocol().family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                       IPPROTO_TCP));
  if (fd.get() < 0) return errno;
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  std::error_code ec;
  socket.assign(endpoint.protocol(), fd.get(), ec);
  if (ec) return ec.value();
  fd.release();  // the socket owns it now
  std::error_code result;
  async_connect_by(socket, endpoint, deadline, [&result](std::error_code e) { result = e; });
  io.run();
  if (result) return result.value();
  socket.set_option(asio::ip::tcp::no_delay(true), ec);
  *out = UniqueFd(socket.release(ec));
  return 0;
}

asio::ip::tcp::endpoint endpoint_of(const sockaddr* address, socklen_t length) {
  asio::ip::tcp::endpoint endpoint;
  const size_t size = std::min<size_t>(length, endpoint.capacity());
  std::memcpy(endpoint.data(), address, size);
  endpoint.resize(size);
  return endpoint;
}

}  // namespace cc::rv
