#include "rendezvous/tls/stream.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "rendezvous/tls/context.hpp"

namespace cc::rv::tls {
namespace {

constexpr uint8_t kHandshakeRecord = 0x16;  // every TLS connection starts with one

// What an alert or an OpenSSL reason says of the peer.
FailureKind kind_of_reason(int reason) {
  switch (reason) {
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_HTTP_REQUEST:
      return FailureKind::not_tls;
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
      return FailureKind::verify;
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
      return FailureKind::cert_required;
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
      return FailureKind::cert_refused;
    case SSL_R_UNEXPECTED_EOF_WHILE_READING:
      return FailureKind::closed_early;
    default:
      return FailureKind::other;
  }
}

}  // namespace

Stream::Stream(ssl_st* ssl) : ssl_(ssl) {}

Stream::~Stream() { SSL_free(ssl_); }

bool Stream::established() const {
  std::lock_guard<std::mutex> lock(mu_);
  return established_;
}

size_t Stream::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<size_t>(SSL_pending(ssl_));
}

Result Stream::handshake() {
  std::lock_guard<std::mutex> lock(mu_);
  if (established_) return {};
  if (SSL_is_server(ssl_) && !sniffed_) {
    uint8_t first = 0;
    const ssize_t n = ::recv(SSL_get_fd(ssl_), &first, 1, MSG_PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
      return {Io::want_read, 0};
    if (n <= 0) return {Io::closed, 0};
    sniffed_ = true;
    if (first != kHandshakeRecord) {
      failure_ = {FailureKind::clear_peer, 0, "the first byte is not a TLS handshake record"};
      return {Io::failed, 0};
    }
  }
  ERR_clear_error();
  const int rc = SSL_do_handshake(ssl_);
  if (rc == 1) {
    established_ = true;
    return {};
  }
  return finish(rc, true);
}

Result Stream::read(std::span<uint8_t> out) {
  std::lock_guard<std::mutex> lock(mu_);
  ERR_clear_error();
  size_t n = 0;
  const int rc = SSL_read_ex(ssl_, out.data(), out.size(), &n);
  if (rc == 1) return {Io::done, n};
  return finish(rc, false);
}

Result Stream::write(std::span<const uint8_t> bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  ERR_clear_error();
  size_t n = 0;
  const int rc = SSL_write_ex(ssl_, bytes.data(), bytes.size(), &n);
  if (rc == 1) return {Io::done, n};
  return finish(rc, false);
}

void Stream::close_notify() {
  std::lock_guard<std::mutex> lock(mu_);
  if (notified_ || !established_) return;
  notified_ = true;
  ERR_clear_error();
  (void)SSL_shutdown(ssl_);
  ERR_clear_error();
}

bool Stream::asked_for_certificate() const {
  std::lock_guard<std::mutex> lock(mu_);
  const STACK_OF(X509_NAME)* names = SSL_get_client_CA_list(ssl_);
  return !SSL_is_server(ssl_) && names != nullptr && sk_X509_NAME_num(names) > 0;
}

std::string Stream::peer_subject() const {
  std::lock_guard<std::mutex> lock(mu_);
  X509* cert = SSL_get0_peer_certificate(ssl_);
  if (cert == nullptr) return "";
  char buf[512] = {};
  X509_NAME_oneline(X509_get_subject_name(cert), buf, sizeof buf - 1);
  return buf;
}

// Caller holds mu_.
Result Stream::finish(int rc, bool handshaking) {
  const int err = SSL_get_error(ssl_, rc);
  switch (err) {
    case SSL_ERROR_WANT_READ:
      return {Io::want_read, 0};
    case SSL_ERROR_WANT_WRITE:
      return {Io::want_write, 0};
    case SSL_ERROR_ZERO_RETURN:
      return {Io::closed, 0};
    case SSL_ERROR_SYSCALL: {
      const int saved = errno;
      ERR_clear_error();
      if (!handshaking) return {Io::closed, 0};
      failure_ = {FailureKind::closed_early, 0,
                  saved == 0 ? "end of stream" : std::string(std::strerror(saved))};
      return {Io::failed, 0};
    }
    default:
      break;
  }
  const unsigned long e = ERR_peek_last_error();
  const int reason = ERR_GET_REASON(e);
  if (!handshaking && reason == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
    ERR_clear_error();
    return {Io::closed, 0};
  }
  failure_.kind = kind_of_reason(reason);
  failure_.verify_code = SSL_get_verify_result(ssl_);
  if (failure_.verify_code != X509_V_OK) failure_.kind = FailureKind::verify;
  failure_.detail = failure_.kind == FailureKind::verify
                        ? X509_verify_cert_error_string(failure_.verify_code)
                        : openssl_errors();
  ERR_clear_error();
  return {Io::failed, 0};
}

}  // namespace cc::rv::tls
