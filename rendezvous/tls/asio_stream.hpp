// A TCP socket on Asio that speaks TLS when given a stream (stream.hpp) and
// clear text otherwise, with the calls rendezvous/agent/stream.hpp makes of
// a socket (async_read_some, async_write_some for asio::async_write,
// shutdown, close). The handshake runs within the first read or write. Only
// for one io thread: its handlers run there.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include <asio/buffer.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>

#include "rendezvous/tls/stream.hpp"

namespace cc::rv::tls {

class AsioStream : public asio::socket_base {
 public:
  using executor_type = asio::ip::tcp::socket::executor_type;

  AsioStream(asio::ip::tcp::socket socket, std::unique_ptr<Stream> tls)
      : socket_(std::move(socket)), tls_(std::move(tls)) {}

  executor_type get_executor() { return socket_.get_executor(); }
  asio::ip::tcp::socket& lowest_layer() { return socket_; }
  // A failed handshake's cause, for messages (none in clear).
  const Failure* failure() const {
    return tls_ && tls_->failure().kind != FailureKind::none ? &tls_->failure() : nullptr;
  }

  template <typename Buffers, typename Handler>
  void async_read_some(const Buffers& buffers, Handler&& handler) {
    if (!tls_) return socket_.async_read_some(buffers, std::forward<Handler>(handler));
    const asio::mutable_buffer b = *asio::buffer_sequence_begin(buffers);
    step(b, true, std::forward<Handler>(handler));
  }

  template <typename Buffers, typename Handler>
  void async_write_some(const Buffers& buffers, Handler&& handler) {
    if (!tls_) return socket_.async_write_some(buffers, std::forward<Handler>(handler));
    const asio::const_buffer b = *asio::buffer_sequence_begin(buffers);
    step(asio::mutable_buffer(const_cast<void*>(b.data()), b.size()), false,
         std::forward<Handler>(handler));
  }

  void shutdown(shutdown_type what, std::error_code& ec) {
    if (tls_) tls_->close_notify();
    socket_.shutdown(what, ec);
  }
  void close(std::error_code& ec) { socket_.close(ec); }

 private:
  // One try at the handshake, then the read or write; waits for the socket
  // when OpenSSL wants it and tries again.
  template <typename Handler>
  void step(asio::mutable_buffer b, bool reading, Handler&& handler) {
    Result r = tls_->handshake();
    if (r.io == Io::done) {
      auto* p = static_cast<uint8_t*>(b.data());
      r = reading ? tls_->read({p, b.size()}) : tls_->write({p, b.size()});
    }
    if (r.io == Io::want_read || r.io == Io::want_write) {
      socket_.async_wait(r.io == Io::want_read ? wait_read : wait_write,
                         [this, b, reading, h = std::forward<Handler>(handler)](
                             std::error_code ec) mutable {
                           if (ec) return h(ec, size_t{0});
                           step(b, reading, std::move(h));
                         });
      return;
    }
    std::error_code ec;
    if (r.io == Io::closed) ec = asio::error::eof;
    if (r.io == Io::failed) ec = asio::error::connection_aborted;
    asio::post(socket_.get_executor(),
               [h = std::forward<Handler>(handler), ec, n = r.n]() mutable { h(ec, n); });
  }

  asio::ip::tcp::socket socket_;
  std::unique_ptr<Stream> tls_;
};

}  // namespace cc::rv::tls
