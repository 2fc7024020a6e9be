#include "rendezvous/tls/socket_io.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "rendezvous/tls/words.hpp"

namespace cc::rv::tls {
namespace {

using Clock = std::chrono::steady_clock;

ssize_t through(Result r, short* events) {
  switch (r.io) {
    case Io::done:
      return static_cast<ssize_t>(r.n);
    case Io::want_read:
      *events = POLLIN;
      errno = EAGAIN;
      return -1;
    case Io::want_write:
      *events = POLLOUT;
      errno = EAGAIN;
      return -1;
    case Io::closed:
      return 0;
    case Io::failed:
      break;
  }
  errno = EPROTO;
  return -1;
}

}  // namespace

ssize_t send_some(int fd, Stream* tls, const uint8_t* data, size_t size, short* events) {
  *events = POLLOUT;
  if (tls == nullptr) return ::send(fd, data, size, MSG_NOSIGNAL);
  const ssize_t n = through(tls->write({data, size}), events);
  if (n == 0) {  // a write meets a closed connection as a reset
    errno = ECONNRESET;
    return -1;
  }
  return n;
}

ssize_t recv_some(int fd, Stream* tls, uint8_t* data, size_t size, short* events) {
  *events = POLLIN;
  if (tls == nullptr) return ::recv(fd, data, size, 0);
  return through(tls->read({data, size}), events);
}

Status client_handshake(int fd, ClientContext& context, const std::string& host,
                        const std::string& endpoint, Clock::time_point deadline,
                        std::unique_ptr<Stream>* out) {
  ssl_st* ssl = context.connect_on(fd, host);
  if (ssl == nullptr)
    return make_status(CC_ERR_RENDEZVOUS, "cannot start TLS toward the rendezvous at " + endpoint +
                                              ": " + openssl_errors());
  auto stream = std::make_unique<Stream>(ssl);
  for (;;) {
    const Result r = stream->handshake();
    if (r.io == Io::done) break;
    if (r.io == Io::failed || r.io == Io::closed) {
      Failure f = stream->failure();
      if (r.io == Io::closed) f = {FailureKind::closed_early, 0, "end of stream"};
      return make_status(CC_ERR_RENDEZVOUS, client_failure_words(f, endpoint,
                                                                 context.expected_name(host),
                                                                 context.files()));
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0)
      return make_status(CC_ERR_TIMEOUT,
                         "the rendezvous at " + endpoint +
                             " accepted the connection but did not finish the TLS handshake in "
                             "time: is it a cc rendezvous server, and not overloaded?");
    pollfd p{fd, static_cast<short>(r.io == Io::want_read ? POLLIN : POLLOUT), 0};
    (void)::poll(&p, 1, static_cast<int>(std::min<long long>(left.count() + 1, 1000)));
  }
  *out = std::move(stream);
  return Status::success();
}

}  // namespace cc::rv::tls
