// How one recovery on etcd is decided, by the recovery rules
// (rendezvous/rules/recovery_rules.hpp, as cc's own server decides), over
// what etcd holds of it: pure, so the rules test without etcd. backend_recover.cpp reads the snapshot,
// keeps it current from a watch and acts on the decision.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cc/cc.h"
#include "rendezvous/etcd/client.hpp"
#include "rendezvous/etcd/keys.hpp"
#include "rendezvous/etcd/records.hpp"

namespace cc::rv::etcd {

// Two records of the same process (host and pid).
bool same_process(const MemberInfo& a, const MemberInfo& b);

// A member key as read, with its record decoded once (the coordinator
// evaluates the decision after every watched change).
struct Held {
  KeyValue kv;
  std::optional<MemberRecord> rec;
  explicit Held(KeyValue k);
};

// What etcd holds of one recovery, from generation `from` to the next, read
// in one transaction; the coordinator keeps it current from a watch.
struct Snapshot {
  int64_t revision = 0;
  std::optional<ResultRecord> from_result;  // generation `from`'s result
  std::optional<ResultRecord> next_result;  // the next one's, once decided (or failed)
  int64_t next_result_revision = 0;
  std::vector<int32_t> members;          // `from`'s job ranks by rank
  std::map<int32_t, Held> seats;         // `from`'s member keys by job rank
  std::map<int32_t, MemberRecord> asks;  // the next generation's requests by job rank
  std::map<int32_t, int64_t> ask_order;  // their create revisions (who asked first)
  // For a seat of `from` (> 0) that left it cleanly: its member key in the
  // generation before, through which its process may still be alive (a
  // survivor whose attempt failed after the decision let go of that
  // attempt, and holds the communicator it recovers from).
  std::map<int32_t, Held> parents;
};

// The decision, as cc's server makes it, over a snapshot (which must
// outlive it).
class Decision {
 public:
  Decision(const Snapshot& s, std::string job, Gen from);

  // alive: its member key of `from` is on a lease, or it left `from`
  // cleanly and its key of the generation before still is (the same
  // process); gone: it left; dead: its key went with its lease.
  enum class SeatState { alive, gone, dead };
  SeatState state(int32_t job_rank) const;
  const std::optional<MemberRecord>& seat_record(int32_t job_rank) const;
  // "rank 2 (host h, pid 7, generation 1)": its rank in generation `from`.
  std::string seat_who(int32_t job_rank) const;
  bool in_from(int32_t job_rank) const;
  // A request from the member of `from` that holds its rank, alive or gone
  // (left cleanly: a survivor whose earlier attempt failed after the
  // decision let go of that attempt's connection), not dead.
  bool survivor_ask(int32_t job_rank) const;
  // A replacement's request for a rank that no living member of `from` holds.
  bool replacement_ask(int32_t job_rank) const;
  std::vector<int32_t> survivors() const;
  // The first survivor's request, which the others must match.
  std::optional<MemberRecord> first() const;
  // Living members of `from` that have not asked, in words.
  std::vector<std::string> awaited() const;
  // Ranks of a regrow to `nranks` with neither a survivor nor a replacement.
  std::vector<int32_t> holes(int32_t nranks) const;

  // Words that end this recovery at once (ranks that disagree, a regrow
  // that cannot hold a survivor), or nullopt.
  std::optional<std::pair<cc_result_t, std::string>> refusal() const;

  // Every living member asked (and every rank of a regrow has a process).
  bool ready() const;

  // The next generation (call when ready() and no refusal()): its result,
  // whether it needs a new NCCL id, and its roster.
  ResultRecord decide(bool* need_id, RosterRecord* roster) const;

  // Why the recovery did not complete by a deadline of `timeout_ms`.
  std::string late_words(uint32_t timeout_ms) const;

 private:
  const Snapshot& s_;
  std::string job_;
  Gen from_;
};

}  // namespace cc::rv::etcd
