#include "rendezvous/tls/env.hpp"

namespace cc::rv::tls {
namespace {

std::string text(settings::Id id, const settings::Getenv& getenv) {
  const settings::Found f = settings::find(id, getenv);
  return f.value == nullptr ? std::string() : std::string(f.value);
}

}  // namespace

ClientFiles client_files_from(const settings::Getenv& getenv) {
  ClientFiles files;
  files.ca = text(settings::Id::tls_ca, getenv);
  files.server_name = text(settings::Id::tls_server_name, getenv);
  files.cert = text(settings::Id::tls_cert, getenv);
  files.key = text(settings::Id::tls_key, getenv);
  return files;
}

ServerFiles server_files_from(const settings::Getenv& getenv) {
  ServerFiles files;
  files.cert = text(settings::Id::tls_cert, getenv);
  files.key = text(settings::Id::tls_key, getenv);
  files.client_ca = text(settings::Id::tls_client_ca, getenv);
  return files;
}

Status server_context_for(const ServerFiles& files, std::shared_ptr<ServerContext>* out) {
  out->reset();
  if (!files.on()) {
    if (!files.client_ca.empty())
      return make_status(CC_ERR_INVALID_ARGUMENT,
                         "CC_TLS_CLIENT_CA (or the config's tls_client_ca) is set but CC_TLS_CERT "
                         "(tls_cert) is not: a server needs its own certificate and key "
                         "(CC_TLS_CERT and CC_TLS_KEY, or tls_cert and tls_key) to require "
                         "clients'");
    return Status::success();
  }
  return ServerContext::open(files, out);
}

Status server_context_from(const settings::Getenv& getenv, std::shared_ptr<ServerContext>* out) {
  return server_context_for(server_files_from(getenv), out);
}

}  // namespace cc::rv::tls
