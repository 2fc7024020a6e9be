#include "rendezvous/tls/socket_bio.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include <openssl/bio.h>
#include <openssl/ssl.h>

namespace cc::rv::tls {
namespace {

// The socket is kept in the BIO's data pointer; BIO_get_init says it is set.
int fd_of(BIO* b) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(b))); }

// As OpenSSL's socket BIO: these mean "call again", not a failure.
bool retry(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == EINTR; }

int write_ex(BIO* b, const char* data, size_t size, size_t* written) {
  BIO_clear_retry_flags(b);
  *written = 0;
  const ssize_t n = ::send(fd_of(b), data, size, MSG_NOSIGNAL);
  if (n > 0 || (n == 0 && size == 0)) {
    *written = static_cast<size_t>(n);
    return 1;
  }
  if (n < 0 && retry(errno)) BIO_set_retry_write(b);
  return 0;
}

int read_ex(BIO* b, char* out, size_t size, size_t* read) {
  BIO_clear_retry_flags(b);
  *read = 0;
  const ssize_t n = ::recv(fd_of(b), out, size, 0);
  if (n > 0) {
    *read = static_cast<size_t>(n);
    return 1;
  }
  if (n == 0 && size > 0) BIO_set_flags(b, BIO_FLAGS_IN_EOF);  // OpenSSL tells EOF by it
  if (n < 0 && retry(errno)) BIO_set_retry_read(b);
  return 0;
}

// What OpenSSL asks of a socket BIO.
long ctrl(BIO* b, int cmd, long num, void* ptr) {
  switch (cmd) {
    case BIO_C_SET_FD:  // BIO_set_fd: ptr points at the socket, num is the close flag
      BIO_set_data(b, reinterpret_cast<void*>(static_cast<intptr_t>(*static_cast<int*>(ptr))));
      BIO_set_shutdown(b, static_cast<int>(num));
      BIO_set_init(b, 1);
      return 1;
    case BIO_C_GET_FD:  // BIO_get_fd, SSL_get_fd
      if (BIO_get_init(b) == 0) return -1;
      if (ptr != nullptr) *static_cast<int*>(ptr) = fd_of(b);
      return fd_of(b);
    case BIO_CTRL_GET_CLOSE:
      return BIO_get_shutdown(b);
    case BIO_CTRL_SET_CLOSE:
      BIO_set_shutdown(b, static_cast<int>(num));
      return 1;
    case BIO_CTRL_EOF:
      return BIO_test_flags(b, BIO_FLAGS_IN_EOF) != 0 ? 1 : 0;
    case BIO_CTRL_FLUSH:  // nothing held back: every write went to the socket
    case BIO_CTRL_DUP:
      return 1;
    case BIO_CTRL_PUSH:  // a source and sink: nothing below it to link
    case BIO_CTRL_POP:
    default:
      return 0;
  }
}

int create(BIO* b) {
  BIO_set_data(b, nullptr);
  BIO_set_init(b, 0);
  BIO_set_shutdown(b, BIO_NOCLOSE);
  return 1;
}

int destroy(BIO* b) {
  if (b == nullptr) return 0;
  if (BIO_get_init(b) != 0 && BIO_get_shutdown(b) == BIO_CLOSE) ::close(fd_of(b));
  BIO_set_init(b, 0);
  BIO_set_data(b, nullptr);
  return 1;
}

// Made once and kept for the process.
const BIO_METHOD* method() {
  static BIO_METHOD* const made = [] {
    const int index = BIO_get_new_index();
    if (index == -1) return static_cast<BIO_METHOD*>(nullptr);
    // A descriptor, so SSL_get_fd finds it.
    BIO_METHOD* m = BIO_meth_new(index | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR, "cc socket");
    if (m == nullptr) return m;
    if (BIO_meth_set_write_ex(m, write_ex) != 1 || BIO_meth_set_read_ex(m, read_ex) != 1 ||
        BIO_meth_set_ctrl(m, ctrl) != 1 || BIO_meth_set_create(m, create) != 1 ||
        BIO_meth_set_destroy(m, destroy) != 1) {
      BIO_meth_free(m);
      return static_cast<BIO_METHOD*>(nullptr);
    }
    return m;
  }();
  return made;
}

}  // namespace

bool set_socket(SSL* ssl, int fd) {
  const BIO_METHOD* m = method();
  if (m == nullptr) return false;
  BIO* bio = BIO_new(m);
  if (bio == nullptr) return false;
  BIO_set_fd(bio, fd, BIO_NOCLOSE);
  SSL_set_bio(ssl, bio, bio);  // one reference for both directions
  return true;
}

}  // namespace cc::rv::tls
