// One TLS connection over a connected, non-blocking socket: the handshake,
// reads and writes, each returning at once with what it needs to go on (the
// socket readable or writable). The caller waits for that and calls again
// with the same arguments. Calls are serialised by a mutex, so one thread may
// read while another writes. The socket stays the caller's; a peer gone is an
// error, never SIGPIPE (socket_bio.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>

struct ssl_st;

namespace cc::rv::tls {

enum class Io : uint8_t {
  done,        // n bytes moved (the handshake: finished)
  want_read,   // call again once the socket is readable
  want_write,  // call again once the socket is writable
  closed,      // the peer closed the connection (cleanly or not)
  failed,      // see failure()
};

struct Result {
  Io io = Io::done;
  size_t n = 0;
};

// Why a handshake failed, for messages (words.hpp).
enum class FailureKind : uint8_t {
  none,
  clear_peer,         // a server's peer sent cc frames in clear, not a TLS hello
  not_tls,            // a client's server answered in something that is not TLS
  verify,             // the peer's certificate did not pass (verify_code says why)
  cert_required,      // the server wants a client certificate and got none
  cert_refused,       // the peer refused our certificate
  closed_early,       // the peer closed the connection during the handshake
  other,              // detail says
};

struct Failure {
  FailureKind kind = FailureKind::none;
  long verify_code = 0;  // X509_V_* when kind is verify
  std::string detail;    // OpenSSL's message
};

class Stream {
 public:
  // Takes ownership of ssl (from ServerContext::accept_on or
  // ClientContext::connect_on).
  explicit Stream(ssl_st* ssl);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Drives the handshake on. A server first peeks at the first byte: a peer
  // that speaks cc's protocol in clear fails as clear_peer.
  Result handshake();
  bool established() const;
  Result read(std::span<uint8_t> out);
  Result write(std::span<const uint8_t> bytes);
  // Bytes already decrypted and waiting in OpenSSL: read them before
  // waiting for the socket.
  size_t pending() const;
  // Sends close_notify once, without waiting for the peer's.
  void close_notify();
  const Failure& failure() const { return failure_; }
  // A client's: the server asked for a client certificate (mTLS).
  bool asked_for_certificate() const;
  // The certificate the peer showed: its subject, in one line ("" if none).
  std::string peer_subject() const;

 private:
  Result finish(int rc, bool handshaking);

  ssl_st* ssl_;
  mutable std::mutex mu_;
  bool sniffed_ = false;  // a server looked at the first byte
  bool established_ = false;
  bool notified_ = false;
  Failure failure_;
};

}  // namespace cc::rv::tls
