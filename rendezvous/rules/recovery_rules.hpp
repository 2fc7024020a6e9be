// The rules of a communicator's recovery (cc_comm_shrink, cc_comm_regrow),
// with their messages, for every backend: every survivor must make the same
// call as the first (RecoveryAgreement); a regrow must hold every survivor's
// job rank; a replacement comes only for a rank that failed, one a rank,
// with the regrow's world size; a stale process cannot come back; at a
// deadline the message names who did not call and which ranks never got a
// replacement. Pure: cc's server (server_core/recovery.cpp, which lists
// the rules in full) and the etcd backend's coordinator
// (etcd/recovery_decision.cpp) decide by these and say this message.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/protocol.hpp"
#include "rendezvous/rules/join_rules.hpp"

namespace cc::rv::rules {

// The largest size a regrow may ask for: its decision walks every rank.
inline constexpr int32_t kMaxRegrowRanks = 1 << 16;

// Whether the survivors agree on how a communicator goes on. Each call is
// compared with the first one only: O(1) a call.
class RecoveryAgreement {
 public:
  // Survivor `who` (seat text: "rank 2 (host h, pid 7, generation 1)")
  // calls `kind` (to `nranks`, a regrow). The first call sets what the
  // others must call; a call that differs is refused, with a message that names
  // both. `where`: lineage_where() of the generation it recovers from.
  std::optional<Refusal> call(const std::string& who, RecoverKind kind, int32_t nranks,
                              const std::string& where);
  // The recovery ended (decided, failed, or nobody left asking).
  void reset() { first_.reset(); }
  bool started() const { return first_.has_value(); }
  RecoverKind kind() const { return first_ ? first_->kind : RecoverKind::shrink; }
  int32_t nranks() const { return first_ ? first_->nranks : 0; }

 private:
  struct First {
    RecoverKind kind;
    int32_t nranks;
    std::string words;  // "rank 1 (...) called cc_comm_shrink"
  };
  std::optional<First> first_;
};

// The refusal of a regrow to `nranks` by the survivor of job rank
// `job_rank`, which it cannot hold; nullopt when it can.
std::optional<Refusal> regrow_holds(const std::string& who, int32_t job_rank, int32_t nranks,
                                    const std::string& where);

// A replacement whose world size is not the regrow's.
std::string replacement_world_words(const MemberInfo& replacement, int32_t nranks,
                                    const std::string& where);

// A process that is no living member of the generation it recovers from
// (`why`: "it was declared failed (...)", "its rank is held by ...").
std::string stale_rank_words(const MemberInfo& in, const std::string& where,
                             const std::string& why);

// A Join after the join completed for a rank that is alive (`late`:
// late_join_words(); `holder`: the living seat, as text).
std::string alive_rank_words(const std::string& late, int32_t rank, const std::string& where,
                             const std::string& holder);

// A second replacement for one rank (`waiting`: the first one).
std::string replacement_waiting_words(const std::string& late, int32_t rank,
                                      const MemberInfo& waiting);

// A replacement's own deadline passed before a regrow took it.
std::string replacement_late_words(int32_t rank, uint32_t timeout_ms, const std::string& where);

// A recovery asked on a connection that is a member or recovering.
std::string own_connection_words(RecoverKind kind, const MemberInfo& in);

// Why a recovery is not decided at its deadline: the members alive that did
// not call, and the ranks of a regrow no replacement came for (`settings`:
// what a replacement must be given, "MASTER_ADDR, MASTER_PORT and job id").
// Empty when neither.
std::string recovery_missing_words(const std::vector<std::string>& silent, RecoverKind kind,
                                   const std::vector<int32_t>& holes,
                                   const std::string& settings);

// The recovery's deadline: "cc_comm_shrink on WHERE did not complete within
// T ms: PARTS" (`parts`: recovery_missing_words(), or what else held it).
std::string recovery_late_words(RecoverKind kind, int32_t nranks, const std::string& where,
                                uint32_t timeout_ms, const std::string& parts);

// The job ranks of a recovery's new generation, by new rank, as each member
// works them out from the generation it recovered from (`previous`: its job
// ranks by rank; generation 0's are 0..W-1) and the Joined it was handed: a
// shrink keeps, in order, the ranks not in joined.failed; a regrow holds
// every job rank below world_size_of(joined) (rank = job rank). The server
// sends no list: one in every member's Joined would cost O(W^2) bytes.
std::vector<int32_t> next_generation_members(const std::vector<int32_t>& previous, RecoverKind kind,
                                             const Joined& joined);

}  // namespace cc::rv::rules
