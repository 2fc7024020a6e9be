// The rules of a communicator's join, with their messages, for every backend:
// each rank that arrives is checked against the ranks already in (the same
// world size and NCCL major.minor as the first to arrive, a rank in range
// and not claimed twice, no GPU of one host twice); at the deadline the
// ranks that never came are named; a rank that aborts or comes late is told
// why. Pure: cc's server feeds JoinCheck from its connections' Joins
// (server_core/joins.cpp), the etcd backend's rank 0 from the member keys
// it watches arrive (etcd/backend_join.cpp). Either fails the whole
// generation with the refusal's message, telling every rank that joins it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cc/cc.h"
#include "rendezvous/protocol.hpp"

namespace cc::rv::rules {

// Why a rule says no: the result every rank concerned gets, and its message.
struct Refusal {
  cc_result_t code = CC_SUCCESS;
  std::string words;
};

// The ranks of one generation that arrived while it joins. Each arrival
// costs O(1) on average (hash maps by rank and by GPU owner): nothing is
// walked but at the deadline (missing()).
//
// The NCCL ids: every rank may bring some (rank 0 always does; past the
// scalable-init threshold each rank that roots one of NCCL's bootstrap
// trees brings its own, so the roots' listening threads live on their own
// hosts, not all in rank 0's process). Every rank is handed the same bytes:
// those of the ranks that brought any, end to end in rank order, as many
// whole contributions as fit in kMaxUniqueIdBytes (rank 0's first). The
// bytes stay opaque: which rank brings what is lib/comm/nccl_ids.hpp's.
class JoinCheck {
 public:
  // Checks `in` against the ranks in; accepted, it is in (nullopt), else the
  // refusal that fails the generation. `where`: generation_where() of it.
  // `ids`: the NCCL id bytes it brought (empty: none).
  std::optional<Refusal> arrive(const MemberInfo& in, const std::string& where,
                                const std::vector<uint8_t>& ids = {});
  // A rank that arrived went before the generation completed (its
  // connection, or its lease): its rank and GPU are free again.
  void leave(int32_t rank);
  // The generation ended (complete or failed): what was kept goes.
  void clear();

  // The world size of the first to arrive (0 before).
  int32_t world() const { return first_ ? first_->world_size : 0; }
  // Its NCCL version code (0 before).
  int32_t nccl_version() const { return first_ ? first_->nccl_version : 0; }
  int32_t joined() const { return static_cast<int32_t>(in_.size()); }
  bool complete() const { return first_ && joined() == first_->world_size; }
  // The ranks below world() that are not in, sorted: O(world).
  std::vector<int32_t> missing() const;
  const MemberInfo* member(int32_t rank) const;
  // The ids every rank is handed (see above): O(ranks that brought any).
  std::vector<uint8_t> unique_ids() const;

 private:
  std::optional<MemberInfo> first_;                     // the first to arrive
  std::unordered_map<int32_t, MemberInfo> in_;          // by rank
  std::unordered_map<std::string, int32_t> gpu_owner_;  // gpu_owner_key -> rank
  std::map<int32_t, std::vector<uint8_t>> ids_;         // by rank, those that brought any
};

// The message of the rules that a backend checks on its own (etcd claims a
// rank in a transaction, and the claimer checks its own range):
std::string out_of_range_words(const MemberInfo& in, int32_t world, const std::string& where);
std::string claimed_twice_words(const MemberInfo& holder, const MemberInfo& in,
                                const std::string& where);

// The ranks below `world` not in `came` (any order, duplicates allowed), sorted.
std::vector<int32_t> absent_ranks(int32_t world, const std::vector<int32_t>& came);

// How a backend is reached, for the message of a join that did not complete:
// what every rank must share ("MASTER_ADDR, MASTER_PORT and job id") and
// what it must reach ("the server").
struct Reach {
  std::string settings;
  std::string what;
};

// At the join deadline: "ranks 1, 3 of 4 never joined job 'j' (generation
// 1) within 1500 ms (2 joined); check that they started, use the same ...".
std::string never_joined_words(const std::vector<int32_t>& missing, int32_t world, int32_t joined,
                               const std::string& where, uint32_t timeout_ms, const Reach& reach);

// A rank that called abort while its join was pending fails the generation.
std::string aborted_while_joining_words(const std::string& who, const std::string& where,
                                        const std::string& reason);

// A join of a generation that failed, with the failure's message.
std::string already_failed_words(const std::string& where, const std::string& failure);

// "rank 1 (host a, pid 7) joined job 'j' (generation 1) after it had
// completed": the start of every refusal of a late join.
std::string late_join_words(const MemberInfo& in, const std::string& where);

}  // namespace cc::rv::rules
