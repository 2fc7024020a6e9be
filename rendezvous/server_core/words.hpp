// The pieces of text only cc's server builds its messages from: the address
// of a connection's peer, and the notice for a rank whose connection arrives
// from another address than the one it says NCCL will use. The pieces every
// backend shares (a quoted name, who a rank is, ranks as "2, 3, 5-9", ...)
// are rendezvous/rules/words.hpp's, named here as well.
#pragma once

#include <string>

#include "rendezvous/protocol.hpp"
#include "rendezvous/rules/words.hpp"

namespace cc::rv::server_core {

using rules::is_loopback;
using rules::key_list;
using rules::lineage_where;
using rules::member_who;
using rules::named_list;
using rules::nccl_text;
using rules::quote;
using rules::rank_ranges;
using rules::recover_call_name;
using rules::recover_call_words;

// The address part of a connection's peer: "1.2.3.4" of "1.2.3.4:5", "::1" of "[::1]:5".
std::string peer_address(const std::string& peer);

// Empty, or the warning for a rank behind NAT (see words.cpp).
std::string nat_notice(const MemberInfo& in, const std::string& peer);

}  // namespace cc::rv::server_core
