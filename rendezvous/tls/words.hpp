// What a failed TLS handshake means, with a message that names the address, the
// cause and the fix.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/tls/context.hpp"
#include "rendezvous/tls/stream.hpp"

namespace cc::rv::tls {

// A client's message for a handshake with the server at `endpoint` that
// failed; `name` is the name the server's certificate had to carry.
std::string client_failure_words(const Failure& failure, const std::string& endpoint,
                                 const std::string& name, const ClientFiles& files);

// The server's message, for its log, about a peer whose handshake failed.
std::string server_failure_words(const Failure& failure, const std::string& peer);

// What a TLS server answers, in clear, to a client that speaks cc's
// protocol in clear; `where` is the server's address as the client reached it.
std::string clear_client_refusal(const std::string& where);

// The frame that carries it: an Error (CC_ERR_RENDEZVOUS) for request 0, which
// a clear client reads as its first answer.
std::vector<uint8_t> clear_client_refusal_frame(const std::string& where);

}  // namespace cc::rv::tls
