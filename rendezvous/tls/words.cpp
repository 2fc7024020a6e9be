#include "rendezvous/tls/words.hpp"

#include <openssl/x509_vfy.h>

#include "cc/cc.h"
#include "rendezvous/protocol.hpp"

namespace cc::rv::tls {

std::string client_failure_words(const Failure& f, const std::string& endpoint,
                                 const std::string& name, const ClientFiles& files) {
  const std::string at = "the rendezvous at " + endpoint;
  switch (f.kind) {
    case FailureKind::not_tls:
      return at + " does not speak TLS (it answered in clear text: " + f.detail +
             "): unset CC_TLS_CA (and the config's tls_ca) to reach it in clear, or start that "
             "server with a certificate (--tls-cert and --tls-key, or CC_TLS_CERT and "
             "CC_TLS_KEY)";
    case FailureKind::closed_early:
      return at + " closed the connection during the TLS handshake (" + f.detail +
             "): it may not speak TLS (then unset CC_TLS_CA), or it refused this client (see "
             "its log)";
    case FailureKind::cert_required:
      return at +
             " requires a client certificate (mTLS): set CC_TLS_CERT and CC_TLS_KEY (or "
             "the config's tls_cert and tls_key) to a certificate signed by the CA the "
             "server was given (--tls-client-ca)";
    case FailureKind::cert_refused:
      return at + " refused this client's certificate '" + files.cert + "' (" + f.detail +
             "): use one signed by the CA the server was given (--tls-client-ca), and valid now";
    case FailureKind::verify:
      switch (f.verify_code) {
        case X509_V_ERR_CERT_HAS_EXPIRED:
          return at + " showed a certificate that has expired: renew the server's certificate "
                      "(cc-rendezvous rereads it on SIGHUP)";
        case X509_V_ERR_CERT_NOT_YET_VALID:
          return at + " showed a certificate that is not valid yet: check the clocks of this "
                      "host and the server's, and the certificate's dates";
        case X509_V_ERR_HOSTNAME_MISMATCH:
        case X509_V_ERR_IP_ADDRESS_MISMATCH:
          return at + " showed a certificate that does not name '" + name +
                 "': dial the server by a name or address its certificate carries, or set "
                 "CC_TLS_SERVER_NAME to one it carries";
        default:
          return at + " showed a certificate that the CA in CC_TLS_CA ('" + files.ca +
                 "') does not vouch for (" + f.detail +
                 "): set CC_TLS_CA (or the config's tls_ca) to the CA that signed the server's "
                 "certificate";
      }
    case FailureKind::clear_peer:
    case FailureKind::other:
    case FailureKind::none:
      break;
  }
  return "TLS with " + at + " failed (" + f.detail +
         "): check CC_TLS_CA, CC_TLS_CERT and CC_TLS_KEY against the server's --tls-* files, "
         "and that nothing between alters the stream";
}

std::string server_failure_words(const Failure& f, const std::string& peer) {
  switch (f.kind) {
    case FailureKind::clear_peer:
      return peer + " spoke cc's protocol in clear to this TLS server; it was told to set "
                    "CC_TLS_CA";
    case FailureKind::verify:
      return peer + " showed a client certificate that the client CA does not vouch for (" +
             f.detail + ")";
    case FailureKind::cert_required:
      return peer + " showed no client certificate, which this server requires (mTLS)";
    default:
      return "TLS with " + peer + " failed (" + f.detail + ")";
  }
}

std::string clear_client_refusal(const std::string& where) {
  return "the rendezvous server at " + where +
         " speaks TLS and this client connected in clear text: set CC_TLS_CA (or the "
         "config's tls_ca) to the CA that signed the server's certificate (and CC_TLS_CERT "
         "and CC_TLS_KEY, or tls_cert and tls_key, if the server requires client "
         "certificates)";
}

std::vector<uint8_t> clear_client_refusal_frame(const std::string& where) {
  return encode_frame(0,
                      Error{static_cast<uint32_t>(CC_ERR_RENDEZVOUS), clear_client_refusal(where)});
}

}  // namespace cc::rv::tls
