// One byte stream of a node agent on Asio (a rank's Unix socket, or the
// agent's TCP connection to the server): reads handed to a callback as they
// come, writes queued in order (one in flight, the rest gathered behind it),
// and a close that first lets the queued writes out. Kept alive by its own
// handlers; its owner holds it through a shared_ptr.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <system_error>
#include <utility>
#include <vector>

#include <asio/buffer.hpp>
#include <asio/write.hpp>

namespace cc::rv::agent {

template <typename Socket>
class Stream : public std::enable_shared_from_this<Stream<Socket>> {
 public:
  using OnBytes = std::function<void(std::span<const uint8_t>)>;
  using OnEnd = std::function<void(std::error_code)>;  // once: end of stream or an error

  // read_size: the most one read takes (a node agent's upstream reads small
  // Relays; a simulation holds thousands of streams).
  explicit Stream(Socket socket, size_t read_size = 16 * 1024)
      : socket_(std::move(socket)), buffer_(read_size) {}

  Socket& socket() { return socket_; }

  void start(OnBytes on_bytes, OnEnd on_end) {
    on_bytes_ = std::move(on_bytes);
    on_end_ = std::move(on_end);
    read();
  }

  void write(std::span<const uint8_t> bytes) {
    if (closed_ || muted_ || bytes.empty()) return;
    queued_.insert(queued_.end(), bytes.begin(), bytes.end());
    if (!writing_) write_queued();
  }

  // Closes once what is queued is written.
  void close_after_writes() {
    closing_ = true;
    if (!writing_) close_now();
  }

  void close_now() {
    if (closed_) return;
    closed_ = true;
    std::error_code ec;
    socket_.shutdown(Socket::shutdown_both, ec);
    socket_.close(ec);
    on_bytes_ = nullptr;
    on_end_ = nullptr;
  }

  // Neither reads nor writes from now on, and keeps the socket open: the
  // other end hears nothing, as from a host that hangs (for simulations).
  void mute() {
    muted_ = true;
    on_bytes_ = nullptr;
    on_end_ = nullptr;
  }

  bool closed() const { return closed_; }
  // Bytes written to it and not yet taken by the socket.
  size_t queued_bytes() const { return queued_.size() + in_flight_.size(); }

 private:
  void read() {
    auto self = this->shared_from_this();
    socket_.async_read_some(asio::buffer(buffer_), [self](std::error_code ec, size_t n) {
      if (self->closed_ || self->muted_) return;
      if (ec) return self->end(ec);
      if (self->on_bytes_) self->on_bytes_(std::span<const uint8_t>(self->buffer_.data(), n));
      if (!self->closed_) self->read();
    });
  }

  void write_queued() {
    writing_ = true;
    in_flight_.swap(queued_);
    queued_.clear();
    auto self = this->shared_from_this();
    asio::async_write(socket_, asio::buffer(in_flight_), [self](std::error_code ec, size_t) {
      self->writing_ = false;
      self->in_flight_.clear();
      if (self->closed_) return;
      if (ec) return self->end(ec);
      if (!self->queued_.empty()) return self->write_queued();
      if (self->closing_) self->close_now();
    });
  }

  void end(std::error_code ec) {
    OnEnd on_end = std::move(on_end_);
    close_now();
    if (on_end) on_end(ec);
  }

  Socket socket_;
  std::vector<uint8_t> buffer_;
  std::vector<uint8_t> queued_, in_flight_;
  bool writing_ = false;
  bool closing_ = false;
  bool closed_ = false;
  bool muted_ = false;
  OnBytes on_bytes_;
  OnEnd on_end_;
};

}  // namespace cc::rv::agent
