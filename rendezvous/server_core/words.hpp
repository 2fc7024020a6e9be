// The pieces of text the rendezvous server's messages are built from: a
// quoted name, who a rank is (spelled by common/who.hpp, as the library
// spells it), an NCCL version code as "2.18.1", a sorted list of ranks as
// "2, 3, 5-9", a shortened list of keys, and the notice for a rank whose
// connection arrives from another address than the one it says NCCL will
// use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/protocol.hpp"

namespace cc::rv::server_core {

// 'name', printable (common/printable.hpp): names come from clients.
std::string quote(const std::string& s);

// Who a rank that sent a Join is: "rank 3 (host gpu-a, pid 4242)".
std::string member_who(const MemberInfo& i);

// "2.18.1" for 21801, "unknown" for 0.
std::string nccl_text(int32_t code);

// "2, 3, 5-9" for a sorted list of ranks.
std::string rank_ranges(const std::vector<int32_t>& ranks);

// The first 16 names, then "and N more".
std::string named_list(const std::vector<std::string>& names);

// The first 16 keys quoted, then "and N more".
std::string key_list(const std::vector<std::string>& keys);

// A recovery's call: "cc_comm_shrink", "cc_comm_regrow"; with its argument:
// "cc_comm_regrow(nranks=4)".
const char* recover_call_name(RecoverKind k);
std::string recover_call_words(RecoverKind k, int32_t nranks);

// "job 'j', communicator 1, generation 2": a generation of a communicator.
std::string lineage_where(const std::string& job, uint32_t g, uint32_t epoch);

// Why a recovery is not decided at its deadline: the members alive that did
// not call, and the ranks of a regrow no replacement came for (`settings`:
// what a replacement must be given, "MASTER_ADDR, MASTER_PORT and job id").
// Empty when neither.
std::string recovery_missing_words(const std::vector<std::string>& silent, RecoverKind kind,
                                   const std::vector<int32_t>& holes,
                                   const std::string& settings);

// The largest size a regrow may ask for: its decision walks every rank.
inline constexpr int32_t kMaxRegrowRanks = 1 << 16;

// The address part of a connection's peer: "1.2.3.4" of "1.2.3.4:5", "::1" of "[::1]:5".
std::string peer_address(const std::string& peer);

// 127.0.0.0/8 or ::1.
bool is_loopback(const std::string& addr);

// Empty, or the warning for a rank behind NAT (see words.cpp).
std::string nat_notice(const MemberInfo& in, const std::string& peer);

}  // namespace cc::rv::server_core
