#include "tools/cc-run/output_relay.hpp"

#include <unistd.h>

#include <cerrno>

namespace cc::tools::run {
namespace {

constexpr size_t kMaxLine = 64 * 1024;  // a longer line is cut, not buffered forever

void write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // our own output is gone: nothing better to do
    done += static_cast<size_t>(n);
  }
}

// Writes the whole lines of `partial` with `prefix` (and, with
// `flush_partial` or when it grew too long, the rest as a line of its own).
void emit_lines(int fd, const std::string& prefix, std::string& partial, bool flush_partial) {
  size_t start = 0;
  for (;;) {
    const size_t nl = partial.find('\n', start);
    if (nl == std::string::npos) break;
    write_all(fd, prefix + partial.substr(start, nl - start + 1));
    start = nl + 1;
  }
  partial.erase(0, start);
  if (!partial.empty() && (flush_partial || partial.size() >= kMaxLine)) {
    write_all(fd, prefix + partial + "\n");
    partial.clear();
  }
}

}  // namespace

OutputRelay::OutputRelay(asio::io_context& io, std::function<void()> closed)
    : io_(io), closed_(std::move(closed)) {}

void OutputRelay::relay(size_t slot, int rank, int out_fd, int err_fd) {
  if (streams_.size() <= slot) streams_.resize(slot + 1);
  const int fds[2] = {out_fd, err_fd};
  for (int k = 0; k < 2; ++k) {
    if (StreamPtr& old = streams_[slot][static_cast<size_t>(k)]; old) close(*old);
    auto s = std::make_shared<Stream>(io_);
    s->pipe.assign(fds[k]);
    s->pipe.non_blocking(true);
    s->to_fd = k == 0 ? 1 : 2;
    s->prefix = "[rank " + std::to_string(rank) + "] ";
    streams_[slot][static_cast<size_t>(k)] = s;
    read_more(s);
  }
}

// Waits until the pipe has something, then reads it here: bytes never wait
// in a read of Asio's that has not been handed over yet, so flush() sees
// everything the rank wrote.
void OutputRelay::read_more(const StreamPtr& s) {
  s->pipe.async_wait(asio::posix::stream_descriptor::wait_read, [this, s](std::error_code ec) {
    if (!s->pipe.is_open() || ec == asio::error::operation_aborted) return;
    read_available(*s);
    if (s->pipe.is_open())
      read_more(s);
    else
      closed_();
  });
}

void OutputRelay::take(Stream& s, const char* data, size_t n) {
  s.partial.append(data, n);
  emit_lines(s.to_fd, s.prefix, s.partial, false);
}

// Reads what the pipe holds now, without waiting; closes it at its end.
void OutputRelay::read_available(Stream& s) {
  while (s.pipe.is_open()) {
    std::error_code ec;
    const size_t n = s.pipe.read_some(asio::buffer(s.buf), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) return;
    if (ec) {
      emit_lines(s.to_fd, s.prefix, s.partial, true);
      close(s);
      return;
    }
    take(s, s.buf.data(), n);
  }
}

void OutputRelay::flush(size_t slot, bool close_it) {
  if (slot >= streams_.size()) return;
  for (const StreamPtr& s : streams_[slot]) {
    if (!s) continue;
    read_available(*s);
    if (close_it && s->pipe.is_open()) {
      emit_lines(s->to_fd, s->prefix, s->partial, true);
      close(*s);
    }
  }
}

void OutputRelay::flush_all() {
  for (auto& pair : streams_)
    for (const StreamPtr& s : pair)
      if (s && s->pipe.is_open()) {
        emit_lines(s->to_fd, s->prefix, s->partial, true);
        close(*s);
      }
}

bool OutputRelay::any_open() const {
  for (const auto& pair : streams_)
    for (const StreamPtr& s : pair)
      if (s && s->pipe.is_open()) return true;
  return false;
}

void OutputRelay::close(Stream& s) {
  std::error_code ignored;
  s.pipe.close(ignored);
}

}  // namespace cc::tools::run
