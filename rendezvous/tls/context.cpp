#include "rendezvous/tls/context.hpp"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "common/log.hpp"
#include "rendezvous/tls/socket_bio.hpp"

namespace cc::rv::tls {
namespace {

Status invalid(std::string words) { return make_status(CC_ERR_INVALID_ARGUMENT, std::move(words)); }

// A file that must exist and be readable; `what` names it in the message.
Status check_readable(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return invalid("cannot read " + what + " '" + path + "': " + std::strerror(errno) +
                   "; check the path");
  if (!S_ISREG(st.st_mode)) return invalid(what + " '" + path + "' is not a regular file");
  return Status::success();
}

// A private key no other user may read, as ssh wants of its keys.
Status check_key_file(const std::string& path) {
  if (Status s = check_readable(path, "the TLS key"); !s.ok()) return s;
  struct stat st {};
  ::stat(path.c_str(), &st);
  if ((st.st_mode & S_IROTH) != 0)
    return invalid("the TLS key '" + path +
                   "' can be read by every user of this machine: chmod 600 it (or 640 for a "
                   "group) and keep it private");
  return Status::success();
}

// Warns of a certificate outside its validity now: clients will refuse it.
void warn_if_not_valid_now(SSL_CTX* ctx, const std::string& path) {
  X509* cert = SSL_CTX_get0_certificate(ctx);
  if (cert == nullptr) return;
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0)
    log().warn("the TLS certificate '{}' has expired: clients will refuse it; renew it", path);
  else if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0)
    log().warn("the TLS certificate '{}' is not valid yet: clients will refuse it; check the "
               "clocks or its notBefore date",
               path);
}

// TLS 1.3 only, no renegotiation, writes that may be partial and may be
// retried from a moved buffer, buffers released while a connection idles.
void set_common(SSL_CTX* ctx) {
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
}

Status use_cert_and_key(SSL_CTX* ctx, const std::string& cert, const std::string& key,
                        const std::string& whose) {
  if (Status s = check_readable(cert, whose + " TLS certificate"); !s.ok()) return s;
  if (Status s = check_key_file(key); !s.ok()) return s;
  if (SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) != 1)
    return invalid("cannot load the TLS certificate '" + cert + "' (" + openssl_errors() +
                   "): is it a PEM certificate?");
  if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1)
    return invalid("cannot load the TLS key '" + key + "' (" + openssl_errors() +
                   "): is it an unencrypted PEM private key?");
  if (SSL_CTX_check_private_key(ctx) != 1)
    return invalid("the TLS key '" + key + "' does not belong to the certificate '" + cert +
                   "' (" + openssl_errors() + "): give the key the certificate was made for");
  warn_if_not_valid_now(ctx, cert);
  return Status::success();
}

Status load_ca(SSL_CTX* ctx, const std::string& ca, const std::string& what) {
  if (Status s = check_readable(ca, what); !s.ok()) return s;
  if (SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr) != 1)
    return invalid("cannot load " + what + " '" + ca + "' (" + openssl_errors() +
                   "): is it a PEM certificate?");
  return Status::success();
}

bool is_ip_address(const std::string& host) {
  in6_addr a6{};
  in_addr a4{};
  return ::inet_pton(AF_INET, host.c_str(), &a4) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), &a6) == 1;
}

// Builds a server context from the files.
Status make_server_ctx(const ServerFiles& files, SSL_CTX** out) {
  if (files.key.empty())
    return invalid("a TLS certificate was given without its key: give both (--tls-key, "
                   "CC_TLS_KEY)");
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return invalid("cannot make a TLS context: " + openssl_errors());
  set_common(ctx);
  // No session tickets: cc's clients keep one connection and do not resume,
  // and two tickets a handshake cost both ends CPU for nothing.
  SSL_CTX_set_num_tickets(ctx, 0);
  Status s = use_cert_and_key(ctx, files.cert, files.key, "the server's");
  if (s.ok() && !files.client_ca.empty()) {
    s = load_ca(ctx, files.client_ca, "the client CA");
    if (s.ok()) {
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
      if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.client_ca.c_str()))
        SSL_CTX_set_client_CA_list(ctx, names);
    }
  }
  if (!s.ok()) {
    SSL_CTX_free(ctx);
    return s;
  }
  *out = ctx;
  return Status::success();
}

}  // namespace

std::string openssl_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "no detail from OpenSSL" : out;
}

// ---- server ----------------------------------------------------------------

Status ServerContext::open(const ServerFiles& files, std::shared_ptr<ServerContext>* out) {
  std::shared_ptr<ServerContext> context(new ServerContext(files));
  if (Status s = make_server_ctx(files, &context->ctx_); !s.ok()) return s;
  *out = std::move(context);
  return Status::success();
}

ServerContext::~ServerContext() { SSL_CTX_free(ctx_); }

Status ServerContext::reload() {
  SSL_CTX* fresh = nullptr;
  if (Status s = make_server_ctx(files_, &fresh); !s.ok()) return s;
  SSL_CTX* old = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old = ctx_;
    ctx_ = fresh;
  }
  SSL_CTX_free(old);  // connections made with it hold their own reference
  return Status::success();
}

ssl_st* ServerContext::accept_on(int fd) {
  SSL* ssl = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ssl = SSL_new(ctx_);
  }
  if (ssl == nullptr) return nullptr;
  if (!set_socket(ssl, fd)) {
    SSL_free(ssl);
    return nullptr;
  }
  SSL_set_accept_state(ssl);
  return ssl;
}

// ---- client ----------------------------------------------------------------

Status ClientContext::open(const ClientFiles& files, std::shared_ptr<ClientContext>* out) {
  if (files.cert.empty() != files.key.empty())
    return invalid("a TLS client certificate needs its key and a key its certificate: set both "
                   "CC_TLS_CERT and CC_TLS_KEY, or neither");
  std::shared_ptr<ClientContext> context(new ClientContext(files));
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return invalid("cannot make a TLS context: " + openssl_errors());
  context->ctx_ = ctx;
  set_common(ctx);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  if (Status s = load_ca(ctx, files.ca, "the rendezvous CA (CC_TLS_CA)"); !s.ok()) return s;
  if (!files.cert.empty()) {
    if (Status s = use_cert_and_key(ctx, files.cert, files.key, "the client's"); !s.ok())
      return s;
  }
  *out = std::move(context);
  return Status::success();
}

ClientContext::~ClientContext() { SSL_CTX_free(ctx_); }

std::string ClientContext::expected_name(const std::string& host) const {
  return files_.server_name.empty() ? host : files_.server_name;
}

ssl_st* ClientContext::connect_on(int fd, const std::string& host) {
  SSL* ssl = SSL_new(ctx_);
  if (ssl == nullptr) return nullptr;
  if (!set_socket(ssl, fd)) {
    SSL_free(ssl);
    return nullptr;
  }
  SSL_set_connect_state(ssl);
  const std::string name = expected_name(host);
  bool named = false;
  if (is_ip_address(name)) {
    named = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str()) == 1;
  } else {
    named = SSL_set1_host(ssl, name.c_str()) == 1 &&
            SSL_set_tlsext_host_name(ssl, const_cast<char*>(name.c_str())) == 1;
  }
  if (!named) {
    SSL_free(ssl);
    return nullptr;
  }
  return ssl;
}

}  // namespace cc::rv::tls
