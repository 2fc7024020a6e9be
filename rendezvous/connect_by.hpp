// Connecting a TCP socket with a deadline, on Asio: the one way cc connects
// to a rendezvous, to a peer in the reachability test, and to what answers
// at an address in cc-doctor.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <functional>
#include <system_error>

#include <asio/ip/tcp.hpp>

#include "common/unique_fd.hpp"

namespace cc::rv {

using ConnectClock = std::chrono::steady_clock;

// Starts connecting the open `socket` to `endpoint`; `done` is called once,
// from the socket's executor, with the outcome: success, the connect's error,
// or asio::error::timed_out (ETIMEDOUT) when `deadline` came first. The
// socket must outlive the call of `done`.
void async_connect_by(asio::ip::tcp::socket& socket, const asio::ip::tcp::endpoint& endpoint,
                      ConnectClock::time_point deadline, std::function<void(std::error_code)> done);

// Connects a new socket to `endpoint` by `deadline`, blocking the caller.
// Returns 0 with the socket in *out (non-blocking, close-on-exec,
// TCP_NODELAY), else an errno: ETIMEDOUT when the deadline came first.
int connect_by(const asio::ip::tcp::endpoint& endpoint, ConnectClock::time_point deadline,
               UniqueFd* out);

// A socket address (from getaddrinfo, say) as an Asio endpoint.
asio::ip::tcp::endpoint endpoint_of(const sockaddr* address, socklen_t length);

}  // namespace cc::rv
