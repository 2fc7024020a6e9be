// The values the rendezvous keeps in etcd (see keys.hpp), as JSON text, so an
// operator can read them with etcdctl. Decoding never throws: a value that is
// not ours decodes to false.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/protocol.hpp"

namespace cc::rv::etcd {

// member/<rank>: who the rank is; rank 0's carries the unique id. In a
// generation made by a recovery, what the process asked for: a survivor's
// call (kind, nranks, whether its communicator can serve ncclCommShrink), or
// a replacement's wish to fill its rank at the next regrow.
struct MemberRecord {
  MemberInfo info;
  std::string nonce;  // this join attempt's own id (a retried write finds itself)
  std::vector<uint8_t> unique_id;
  // Behind a node agent: the agent, for words when the node's lease ends
  // ("cc-run, pid 777, on host node-3"); empty for a rank on its own lease.
  std::string node{};
  bool recovering = false;  // the fields below are set
  RecoverKind kind = RecoverKind::shrink;
  int32_t nranks = 0;  // regrow
  bool can_shrink = false;
  bool replacement = false;
};

// result: how the generation's join ended, for every rank. Small, since
// every rank receives it.
struct ResultRecord {
  bool ok = false;
  uint32_t code = 0;  // a cc_result_t, when !ok
  std::string words;  // when !ok
  std::vector<uint8_t> unique_id;
  int32_t world_size = 0;
  // The revision at which every member was seen: watching the members from
  // the one after it misses no departure.
  int64_t checked_revision = 0;
  // A generation made by a recovery: its members' job ranks by rank, the
  // previous generation's ranks it leaves out or replaces, and how NCCL
  // makes it (method: a RecoverMethod).
  std::vector<int32_t> members;
  std::vector<int32_t> failed;
  uint8_t method = 0;
};

// roster: every member's host and pid by rank, read only when a rank needs
// another's (for words).
struct RosterRecord {
  std::vector<MemberSummary> members;
};

// events: a rank that went, as every other rank is told, the very peer event
// they get: failed (its lease expired, or it went without leaving), aborted,
// or init_failed (its communicator's init failed after the join; reason
// holds its words).
using Departure = PeerEvent;

std::string encode(const MemberRecord& r);
bool decode(const std::string& text, MemberRecord* out);
std::string encode(const ResultRecord& r);
bool decode(const std::string& text, ResultRecord* out);
// Hosts are kept once each, so a large job's roster stays small.
std::string encode(const RosterRecord& r);
bool decode(const std::string& text, RosterRecord* out);
// "failed", "aborted" or "init_failed": a departure's kind as kept in etcd.
const char* departure_word(PeerEventKind kind);
std::string encode(const Departure& d);
bool decode(const std::string& text, Departure* out);

}  // namespace cc::rv::etcd
