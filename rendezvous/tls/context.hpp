// TLS 1.3 for cc's own protocol (OpenSSL 3): the server's context (its
// certificate and key, and the CA its clients' certificates must come from
// under mTLS) and a client's (the CA the server is checked against, and its
// own certificate under mTLS). Each gives the SSL object of one connection
// (stream.hpp). A server's context can be reloaded from its files while
// connections use it: new handshakes take the new certificate, connections
// already made keep theirs.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "common/status.hpp"

struct ssl_st;
struct ssl_ctx_st;

namespace cc::rv::tls {

struct ServerFiles {
  std::string cert;       // PEM, the chain after the server's own certificate
  std::string key;        // PEM; not readable by others
  std::string client_ca;  // not empty: clients must show a certificate from this CA (mTLS)
  bool on() const { return !cert.empty(); }
};

struct ClientFiles {
  std::string ca;           // not empty: TLS on, the server checked against this CA
  std::string cert;         // with key: this client's certificate, for mTLS
  std::string key;
  std::string server_name;  // the name the server's certificate must carry; empty: the host dialled
  bool on() const { return !ca.empty(); }
};

class ServerContext {
 public:
  // Reads and checks the files. Errors (CC_ERR_INVALID_ARGUMENT) name the
  // file, the cause and the fix.
  static Status open(const ServerFiles& files, std::shared_ptr<ServerContext>* out);
  ~ServerContext();
  ServerContext(const ServerContext&) = delete;
  ServerContext& operator=(const ServerContext&) = delete;

  // Reads the files again; on an error the context in force stays. Any thread.
  Status reload();
  // A new server-side SSL object on a connected socket; null when OpenSSL
  // has no memory for it.
  ssl_st* accept_on(int fd);
  bool mutual() const { return !files_.client_ca.empty(); }
  const ServerFiles& files() const { return files_; }

 private:
  explicit ServerContext(ServerFiles files) : files_(std::move(files)) {}
  ServerFiles files_;
  std::mutex mu_;
  ssl_ctx_st* ctx_ = nullptr;  // under mu_; each SSL object holds its own reference
};

class ClientContext {
 public:
  static Status open(const ClientFiles& files, std::shared_ptr<ClientContext>* out);
  ~ClientContext();
  ClientContext(const ClientContext&) = delete;
  ClientContext& operator=(const ClientContext&) = delete;

  // A new client-side SSL object on a connected socket, checking that the
  // server's certificate names `host` (files.server_name when set): a DNS
  // name, or an IP address. Null when OpenSSL fails to make it.
  ssl_st* connect_on(int fd, const std::string& host);
  const ClientFiles& files() const { return files_; }
  // The name the server's certificate must carry when `host` was dialled.
  std::string expected_name(const std::string& host) const;

 private:
  explicit ClientContext(ClientFiles files) : files_(std::move(files)) {}
  ClientFiles files_;
  ssl_ctx_st* ctx_ = nullptr;
};

// What OpenSSL's error queue holds, in one line (and the queue cleared).
std::string openssl_errors();

}  // namespace cc::rv::tls
