// send() and recv() on a socket, through a TLS stream when there is one, with
// the socket calls' own results, so a client written for POSIX sockets takes
// TLS with one changed call; and a client's handshake, polled to a deadline.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.hpp"
#include "rendezvous/tls/context.hpp"
#include "rendezvous/tls/stream.hpp"

namespace cc::rv::tls {

// As ::send and ::recv (MSG_NOSIGNAL): > 0 bytes, 0 end of stream (recv), or
// -1 with errno; EAGAIN means: poll for *events (POLLIN or POLLOUT), then
// call again with the same bytes. A TLS failure is EPROTO. tls null: the
// socket in clear.
ssize_t send_some(int fd, Stream* tls, const uint8_t* data, size_t size, short* events);
ssize_t recv_some(int fd, Stream* tls, uint8_t* data, size_t size, short* events);

// Bytes already decrypted (recv_some returns them without the socket).
inline size_t buffered(const Stream* tls) { return tls == nullptr ? 0 : tls->pending(); }

// A client's handshake on a connected non-blocking socket, with the server
// dialled as `host` (shown as `endpoint`), until `deadline`. Errors:
// CC_ERR_RENDEZVOUS with a message (tls/words.hpp), CC_ERR_TIMEOUT.
Status client_handshake(int fd, ClientContext& context, const std::string& host,
                        const std::string& endpoint, std::chrono::steady_clock::time_point deadline,
                        std::unique_ptr<Stream>* out);

}  // namespace cc::rv::tls
