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

// The server's context when CC_TLS_CERT is set, else null (in *out).
Status server_context_from(const settings::Getenv& getenv, std::shared_ptr<ServerContext>* out);

}  // namespace cc::rv::tls
