// libFuzzer target: the first bytes a TLS server reads from a connection
// (rendezvous/tls): the peek that tells a TLS client from a clear one,
// OpenSSL's parsing of the ClientHello and what follows it through cc's
// socket BIO and Stream, the failure's words, and the refusal a clear client
// is sent. One socketpair per input, no network.
// The input:
//   byte 0: flags. bit 0: the server requires client certificates (mTLS);
//     bit 1: the client closes its side after its last byte.
//   byte 1: the piece size (1..256) the client's bytes are written in; the
//     server steps its handshake after each piece, as it would on each wake.
//   the rest: what the client sends.
// What must hold: the handshake never completes (a client's Finished needs
// the server's answer, which the input never saw); whatever the server
// sends during it is TLS records; a first byte that is not a handshake
// record fails as clear_peer before OpenSSL reads a byte, and the client then
// reads exactly one frame, the refusal, an Error; a client that closed does
// not leave the server waiting.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "cc/cc.h"
#include "rendezvous/protocol.hpp"
#include "rendezvous/tls/context.hpp"
#include "rendezvous/tls/stream.hpp"
#include "rendezvous/tls/words.hpp"

namespace rv = cc::rv;
namespace tls = cc::rv::tls;

namespace {

constexpr uint8_t kHandshakeRecord = 0x16;
constexpr uint8_t kAlertRecord = 0x15;
constexpr const char* kPeer = "10.0.0.1:4242";
constexpr const char* kHere = "10.0.0.2:29500";

[[noreturn]] void setup_failed(const char* what) {
  std::fprintf(stderr, "fuzz_tls_server: %s: %s\n", what, tls::openssl_errors().c_str());
  std::abort();
}

// The server's two contexts, as ServerContext::open makes them from files.
struct Contexts {
  std::shared_ptr<tls::ServerContext> plain;
  std::shared_ptr<tls::ServerContext> mutual;  // clients must show a certificate of its CA
};

// A self-signed P-256 certificate and its key, written to a private folder,
// loaded (the certificate is also the client CA of the mTLS context), removed.
Contexts make_contexts() {
  char tmpl[] = "/tmp/cc-fuzz-tls-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) setup_failed("mkdtemp");
  const std::string dir = tmpl;
  const std::string cert = dir + "/cert.pem";
  const std::string key = dir + "/key.pem";

  EVP_PKEY* pkey = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  X509* x = X509_new();
  if (pkey == nullptr || x == nullptr) setup_failed("key or certificate");
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 30L * 24 * 3600);
  X509_set_pubkey(x, pkey);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("fuzz.invalid"), -1, -1, 0);
  X509_set_issuer_name(x, name);
  X509V3_CTX v3;
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, x, x, nullptr, nullptr, 0);
  for (const auto& [nid, value] : {std::pair{NID_subject_alt_name, "DNS:fuzz.invalid"},
                                   std::pair{NID_basic_constraints, "critical,CA:TRUE"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &v3, nid, value);
    if (ext == nullptr) setup_failed("certificate extension");
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
  }
  if (X509_sign(x, pkey, EVP_sha256()) <= 0) setup_failed("signing");

  FILE* f = std::fopen(cert.c_str(), "w");
  if (f == nullptr || PEM_write_X509(f, x) != 1) setup_failed("writing the certificate");
  std::fclose(f);
  const int fd = ::open(key.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);  // private, or refused
  f = fd < 0 ? nullptr : ::fdopen(fd, "w");
  if (f == nullptr || PEM_write_PrivateKey(f, pkey, nullptr, nullptr, 0, nullptr, nullptr) != 1)
    setup_failed("writing the key");
  std::fclose(f);
  X509_free(x);
  EVP_PKEY_free(pkey);

  Contexts c;
  if (!tls::ServerContext::open({cert, key, ""}, &c.plain).ok() ||
      !tls::ServerContext::open({cert, key, cert}, &c.mutual).ok())
    setup_failed("opening the server contexts");
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return c;
}

Contexts& contexts() {
  static Contexts made = make_contexts();
  return made;
}

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// What is waiting on the client's end, appended to `out`.
void drain(int fd, std::vector<uint8_t>& out) {
  uint8_t buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return;
    out.insert(out.end(), buf, buf + n);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const bool mutual = (data[0] & 1) != 0;
  const bool closes = (data[0] & 2) != 0;
  const size_t piece = 1 + size_t{data[1]};
  const std::span<const uint8_t> in(data + 2, size - 2);

  Contexts& c = contexts();
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0)
    setup_failed("socketpair");
  const Fd client(fds[0]);
  const Fd server(fds[1]);
  ssl_st* ssl = (mutual ? c.mutual : c.plain)->accept_on(server.fd);
  if (ssl == nullptr) __builtin_trap();
  tls::Stream stream(ssl);

  std::vector<uint8_t> answer;  // what the server sent during its handshake
  tls::Result r{tls::Io::want_read, 0};
  auto step = [&] {
    for (int tries = 0;; ++tries) {
      r = stream.handshake();
      drain(client.fd, answer);
      if (r.io == tls::Io::done) __builtin_trap();  // completed without the server's answer
      if (r.io != tls::Io::want_write) return;
      if (tries == 8) __builtin_trap();  // the client end is drained: writing must go on
    }
  };

  step();  // nothing sent yet: the peek must wait
  if (r.io != tls::Io::want_read) __builtin_trap();
  size_t at = 0;
  int stalls = 0;
  while (at < in.size() && r.io == tls::Io::want_read && stalls < 2) {
    const size_t n = std::min(piece, in.size() - at);
    const ssize_t sent = ::send(client.fd, in.data() + at, n, MSG_NOSIGNAL);
    if (sent > 0) at += static_cast<size_t>(sent);
    stalls = sent > 0 ? 0 : stalls + 1;
    step();
  }
  if (closes && r.io == tls::Io::want_read) {
    ::shutdown(client.fd, SHUT_WR);
    step();
    if (r.io == tls::Io::want_read) __builtin_trap();  // a client gone, the server still waiting
  }

  // The server speaks TLS or nothing until it knows it has a TLS client.
  if (!answer.empty() && answer[0] != kHandshakeRecord && answer[0] != kAlertRecord)
    __builtin_trap();

  const tls::Failure& f = stream.failure();
  const bool clear_first = !in.empty() && in[0] != kHandshakeRecord;
  if (clear_first != (f.kind == tls::FailureKind::clear_peer)) __builtin_trap();
  if (r.io == tls::Io::failed) {
    const std::string words = tls::server_failure_words(f, kPeer);
    if (words.find(kPeer) == std::string::npos) __builtin_trap();
  }
  if (f.kind != tls::FailureKind::clear_peer) return 0;

  // A clear client: nothing reached it before its refusal, which it reads as
  // one frame, an Error.
  if (!answer.empty()) __builtin_trap();
  const std::vector<uint8_t> refusal = tls::clear_client_refusal_frame(kHere);
  if (::send(server.fd, refusal.data(), refusal.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(refusal.size()))
    setup_failed("sending the refusal");
  drain(client.fd, answer);
  rv::FrameReader reader;
  reader.feed(answer);
  const auto frame = reader.next();
  if (!frame || reader.buffered() != 0) __builtin_trap();
  const auto* error = std::get_if<rv::Error>(&frame->message);
  if (error == nullptr || error->code != static_cast<uint32_t>(CC_ERR_RENDEZVOUS) ||
      error->message.find(kHere) == std::string::npos)
    __builtin_trap();
  return 0;
}
