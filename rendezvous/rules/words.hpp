// The pieces of text every rendezvous backend builds its message from, so cc's
// server and the etcd backend say the same thing the same way: a quoted
// name, who a rank is (spelled by common/who.hpp, as the library spells it),
// whether an address is loopback, an NCCL version code as "2.18.1", a sorted list of ranks as "2,
// 3, 5-9", shortened lists of names and keys, a recovery's call, and where a generation is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/protocol.hpp"

namespace cc::rv::rules {

// 'name', printable (common/printable.hpp): names come from clients.
std::string quote(const std::string& s);

// Who a rank that sent a Join is: "rank 3 (host gpu-a, pid 4242)".
std::string member_who(const MemberInfo& i);

// 127.0.0.0/8 or ::1.
bool is_loopback(const std::string& addr);

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

// "communicator 1 of job 'j'": the communicator a job's ranks join as its
// number g (its generation 0, while it joins).
std::string communicator_where(const std::string& job, uint32_t g);

// "job 'j', communicator 1, generation 2": a generation of a communicator.
std::string lineage_where(const std::string& job, uint32_t g, uint32_t generation);

}  // namespace cc::rv::rules
