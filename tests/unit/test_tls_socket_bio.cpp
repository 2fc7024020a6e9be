// rendezvous/tls/socket_bio.hpp: a TLS write to a connection its peer has
// closed fails, and the process lives, with SIGPIPE at its default action (as
// cc-run gives its ranks) and the signal mask untouched. Both ways: a client
// whose server closed, a server whose client closed. OpenSSL's own socket
// BIO, in a child, dies of SIGPIPE in the same case: the case does reach a
// write that raises it.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "rendezvous/tls/context.hpp"
#include "rendezvous/tls/socket_io.hpp"
#include "rendezvous/tls/stream.hpp"

namespace tls = cc::rv::tls;
using Clock = std::chrono::steady_clock;

namespace {

// A self-signed certificate for 127.0.0.1 and its key, in a folder of their own.
struct Certs {
  std::string dir, cert, key;

  Certs() {
    char tmpl[] = "/tmp/cc-tls-bio-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    cert = dir + "/cert.pem";
    key = dir + "/key.pem";
    EVP_PKEY* pkey = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
    REQUIRE(pkey != nullptr);
    X509* x = X509_new();
    REQUIRE(x != nullptr);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 24 * 3600);
    X509_set_pubkey(x, pkey);
    X509_NAME* name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
    X509_set_issuer_name(x, name);
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, x, x, nullptr, nullptr, 0);
    X509_EXTENSION* san = X509V3_EXT_conf_nid(nullptr, &v3, NID_subject_alt_name, "IP:127.0.0.1");
    REQUIRE(san != nullptr);
    X509_add_ext(x, san, -1);
    X509_EXTENSION_free(san);
    REQUIRE(X509_sign(x, pkey, EVP_sha256()) > 0);
    FILE* f = std::fopen(cert.c_str(), "w");
    REQUIRE(f != nullptr);
    REQUIRE(PEM_write_X509(f, x) == 1);
    std::fclose(f);
    const int fd = ::open(key.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);  // private, or refused
    REQUIRE(fd >= 0);
    f = ::fdopen(fd, "w");
    REQUIRE(f != nullptr);
    REQUIRE(PEM_write_PrivateKey(f, pkey, nullptr, nullptr, 0, nullptr, nullptr) == 1);
    std::fclose(f);
    X509_free(x);
    EVP_PKEY_free(pkey);
  }
  ~Certs() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

// Two ends of one loopback TCP connection, non-blocking; -1 on a failure.
void connected_pair(int* client, int* server) {
  *client = *server = -1;
  const int lst = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (lst < 0 || ::bind(lst, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(lst, 1) != 0 || ::getsockname(lst, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (lst >= 0) ::close(lst);
    return;
  }
  *client = ::socket(AF_INET, SOCK_STREAM, 0);
  if (*client >= 0 && ::connect(*client, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0)
    *server = ::accept(lst, nullptr, nullptr);
  ::close(lst);
  for (int fd : {*client, *server})
    if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

bool handshake(tls::Stream& c, tls::Stream& s, int cfd, int sfd) {
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (!c.established() || !s.established()) {
    if (Clock::now() > until) return false;
    for (tls::Stream* t : {&c, &s}) {
      const tls::Io io = t->handshake().io;
      if (io == tls::Io::failed || io == tls::Io::closed) return false;
    }
    pollfd p[2] = {{cfd, POLLIN, 0}, {sfd, POLLIN, 0}};
    (void)::poll(p, 2, 10);
  }
  return true;
}

// After the handshake the peer resets the connection; the one left writes
// three times, reads and sends close_notify. "" when each failed as it
// should and SIGPIPE is neither pending nor blocked; else what went wrong.
// openssl_bio: the one left uses OpenSSL's own socket BIO (write(2)).
std::string peer_gone(const Certs& certs, bool server_left, bool openssl_bio) {
  std::shared_ptr<tls::ServerContext> server_context;
  std::shared_ptr<tls::ClientContext> client_context;
  if (!tls::ServerContext::open({certs.cert, certs.key, ""}, &server_context).ok() ||
      !tls::ClientContext::open({certs.cert, "", "", ""}, &client_context).ok())
    return "cannot open the TLS contexts";
  int cfd = -1;
  int sfd = -1;
  connected_pair(&cfd, &sfd);
  if (cfd < 0 || sfd < 0) return "no loopback connection";
  ssl_st* server_ssl = server_context->accept_on(sfd);
  ssl_st* client_ssl = client_context->connect_on(cfd, "127.0.0.1");
  if (server_ssl == nullptr || client_ssl == nullptr) return "no SSL objects";
  if (openssl_bio) SSL_set_fd(server_left ? server_ssl : client_ssl, server_left ? sfd : cfd);
  auto server = std::make_unique<tls::Stream>(server_ssl);
  auto client = std::make_unique<tls::Stream>(client_ssl);
  if (!handshake(*client, *server, cfd, sfd)) return "the handshake failed";

  const int fd = server_left ? sfd : cfd;
  tls::Stream& left = server_left ? *server : *client;
  const int gone_fd = server_left ? cfd : sfd;
  (server_left ? client : server).reset();
  const linger reset{1, 0};  // a reset at once, not a FIN and a reset later
  ::setsockopt(gone_fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  ::close(gone_fd);
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 5000) != 1) return "the reset did not arrive";

  std::string wrong;
  const uint8_t bytes[64] = {};
  for (int i = 0; i < 3; ++i) {
    short events = 0;
    errno = 0;
    const ssize_t n = tls::send_some(fd, &left, bytes, sizeof bytes, &events);
    if (n != -1 || errno != ECONNRESET)
      wrong += "write " + std::to_string(i) + ": " + std::to_string(n) + ", errno " +
               std::to_string(errno) + "; ";
  }
  uint8_t in[64];
  short events = 0;
  const ssize_t n = tls::recv_some(fd, &left, in, sizeof in, &events);
  if (n != 0) wrong += "read: " + std::to_string(n) + ", errno " + std::to_string(errno) + "; ";
  left.close_notify();

  sigset_t set;
  sigemptyset(&set);
  if (sigpending(&set) == 0 && sigismember(&set, SIGPIPE) == 1) wrong += "SIGPIPE pending; ";
  if (pthread_sigmask(SIG_BLOCK, nullptr, &set) == 0 && sigismember(&set, SIGPIPE) == 1)
    wrong += "SIGPIPE blocked; ";
  server.reset();
  client.reset();
  ::close(fd);
  return wrong;
}

void sigpipe_default() {
  REQUIRE(::signal(SIGPIPE, SIG_DFL) != SIG_ERR);
  sigset_t pipe_only;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  REQUIRE(pthread_sigmask(SIG_UNBLOCK, &pipe_only, nullptr) == 0);
}

}  // namespace

TEST_CASE("a client writing to a connection its server reset gets an error and lives") {
  const Certs certs;
  sigpipe_default();
  CHECK(peer_gone(certs, false, false) == "");
  CHECK(::signal(SIGPIPE, SIG_DFL) == SIG_DFL);  // cc changed no disposition
}

TEST_CASE("a server writing to a connection its client reset gets an error and lives") {
  const Certs certs;
  sigpipe_default();
  CHECK(peer_gone(certs, true, false) == "");
  CHECK(::signal(SIGPIPE, SIG_DFL) == SIG_DFL);
}

TEST_CASE("OpenSSL's own socket BIO dies of SIGPIPE in the same case") {
  const Certs certs;
  for (bool server_left : {false, true}) {
    CAPTURE(server_left);
    std::fflush(nullptr);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      ::signal(SIGPIPE, SIG_DFL);
      sigset_t none;
      sigemptyset(&none);
      pthread_sigmask(SIG_SETMASK, &none, nullptr);
      (void)peer_gone(certs, server_left, true);
      ::_exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGPIPE);
  }
}
