// The message of a member's departure, for every backend: what the other
// members of its generation read in the peer event that tells them of it
// (an abort, a failed init, a member gone without leaving), and what the
// ranks of a generation still joining get when one of them gives up. cc's
// server (server_core/heartbeats.cpp, init_failures.cpp, connections.cpp)
// and the etcd backend (etcd/backend.cpp) both say these, so a rank reads
// the same event whichever rendezvous its job uses.
//
// The event itself (kind, rank in the member's generation, host, pid) is the
// member's own, on both; only how a backend learns of a death it was not
// told of differs: cc's server sees the connection end, etcd the member's
// lease expire (etcd/backend.cpp says so with its own message).
#pragma once

#include <string>

namespace cc::rv::rules {

// An abort's reason as the others read it: its own message, or "the rank
// called abort" when it gave none.
std::string abort_reason(const std::string& reason);

// A failed init's reason as the others read it: its own message, or "no
// reason given".
std::string init_failed_reason(const std::string& reason);

// A member whose connection ended without a leave, where the backend saw it
// close (cc's server: the end of its stream; etcd: the connection destroyed
// without leave()).
std::string closed_without_leaving_words();

// A rank that reported its init failed while its join was pending fails the
// generation: "rank 1 (host h, pid 7) could not start while joining
// communicator 1 of job 'j': REASON". `who`: member_who() of its join,
// `where`: communicator_where(), `reason`: init_failed_reason().
std::string init_failed_while_joining_words(const std::string& who, const std::string& where,
                                            const std::string& reason);

}  // namespace cc::rv::rules
