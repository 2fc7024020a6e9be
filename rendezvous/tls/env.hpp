// The TLS files named by the CC_TLS_* settings (common/settings.cpp).
#pragma once

#include "common/settings.hpp"
#include "rendezvous/tls/context.hpp"

namespace cc::rv::tls {

// A client's: CC_TLS_CA (TLS on when set), CC_TLS_SERVER_NAME, CC_TLS_CERT
// and CC_TLS_KEY (mTLS).
ClientFiles client_files_from(const settings::Getenv& getenv);

// A server's: CC_TLS_CERT and CC_TLS_KEY (TLS on when the certificate is
// set), CC_TLS_CLIENT_CA (mTLS).
ServerFiles server_files_from(const settings::Getenv& getenv);

// The server's context when files.cert is set, else null (in *out). A
// client CA without a certificate is CC_ERR_INVALID_ARGUMENT.
Status server_context_for(const ServerFiles& files, std::shared_ptr<ServerContext>* out);

// server_context_for(server_files_from(getenv), out).
Status server_context_from(const settings::Getenv& getenv, std::shared_ptr<ServerContext>* out);

}  // namespace cc::rv::tls
