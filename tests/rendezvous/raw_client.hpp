// A tiny blocking test client on raw sockets: it can send any bytes, so tests
// can be hostile, and every read has a deadline, so no test can hang.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "rendezvous/protocol.hpp"

namespace cc::test {

class RawClient {
 public:
  explicit RawClient(int port, const std::string& addr = "127.0.0.1") {
    const bool v6 = addr.find(':') != std::string::npos;
    fd_ = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) throw std::runtime_error("socket failed");
    int rc = -1;
    if (v6) {
      sockaddr_in6 sa{};
      sa.sin6_family = AF_INET6;
      sa.sin6_port = htons(static_cast<uint16_t>(port));
      inet_pton(AF_INET6, addr.c_str(), &sa.sin6_addr);
      rc = ::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    } else {
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_port = htons(static_cast<uint16_t>(port));
      inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
      rc = ::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    }
    if (rc != 0) {
      ::close(fd_);
      throw std::runtime_error("connect to " + addr + ":" + std::to_string(port) + " failed");
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  // Takes over a socket that is already connected.
  struct Adopt {};
  RawClient(int connected_fd, Adopt) : fd_(connected_fd) {}
  ~RawClient() { close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  bool send_bytes(std::span<const uint8_t> b) {
    size_t done = 0;
    while (done < b.size()) {
      ssize_t n = ::send(fd_, b.data() + done, b.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }
  bool send(uint32_t request_id, const rv::Message& m) {
    return send_bytes(rv::encode_frame(request_id, m));
  }

  // The next frame within `timeout`; nullopt on timeout, close or garbage.
  std::optional<rv::FrameReader::Frame> recv(
      std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (auto f = reader_.next()) return f;
      if (reader_.error() != rv::DecodeError::none || closed_) return std::nullopt;
      if (!fill(deadline)) return std::nullopt;
    }
  }

  // Sends a request and returns the reply's message (nullopt when none came).
  std::optional<rv::Message> call(const rv::Message& m,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    const uint32_t rid = next_rid_++;
    if (!send(rid, m)) return std::nullopt;
    auto f = recv(timeout);
    if (!f) return std::nullopt;
    return f->message;
  }

  // Hello (and no token): true when the Challenge came back.
  bool hello(const std::string& job = "job", const std::string& host = "host-a", uint32_t pid = 1) {
    auto r = call(rv::Hello{job, host, pid, "raw test client"});
    return r && std::holds_alternative<rv::Challenge>(*r) &&
           !std::get<rv::Challenge>(*r).auth_required;
  }

  // True when the server closed the connection within `timeout`; frames that
  // came before the close are kept in `seen`.
  bool closed_within(std::chrono::milliseconds timeout, std::vector<rv::Message>* seen = nullptr) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      while (auto f = reader_.next())
        if (seen) seen->push_back(f->message);
      if (closed_) return true;
      if (!fill(deadline)) return closed_;
    }
  }

  int fd() const { return fd_; }

 private:
  // Reads what is there before the deadline; false on timeout or close.
  bool fill(std::chrono::steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    int rc = ::poll(&p, 1, static_cast<int>(left.count()));
    if (rc <= 0) return false;
    uint8_t buf[65536];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      closed_ = true;
      return false;
    }
    reader_.feed(std::span<const uint8_t>(buf, static_cast<size_t>(n)));
    return true;
  }

  int fd_ = -1;
  bool closed_ = false;
  uint32_t next_rid_ = 1;
  rv::FrameReader reader_{rv::Limits{}};
};

}  // namespace cc::test
