// The BIO a connection's TLS reads and writes its socket through: OpenSSL's
// socket BIO, but writing with send(MSG_NOSIGNAL), as the clear path does.
// A peer gone is EPIPE, never SIGPIPE, at the cost of no extra syscall
// (OpenSSL's own socket BIO writes with write(2)).
#pragma once

struct ssl_st;

namespace cc::rv::tls {

// As SSL_set_fd: the socket becomes ssl's BIO both ways and stays the
// caller's (not closed with ssl). False when OpenSSL has no memory for it.
bool set_socket(ssl_st* ssl, int fd);

}  // namespace cc::rv::tls
