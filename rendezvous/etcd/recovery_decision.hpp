// How one recovery on etcd is decided: what etcd holds of it (a snapshot
// kept current from a watch) fed to the recovery rules that cc's own server
// follows too (rendezvous/rules/recovery_state.hpp). Pure, so it tests
// without etcd; backend_recover.cpp reads, watches and acts on the decision.
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
#include "rendezvous/rules/recovery_state.hpp"

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

// A seat's state from its member key of `from` (and, having left it
// cleanly, its key of the generation before): alive on a lease, or through
// its earlier key of the same process; gone off its lease; dead when the
// key went with its lease.
rules::SeatState seat_state(const Snapshot& s, int32_t job_rank);

// The recovery rules (rendezvous/rules/recovery_state.hpp, as cc's server
// decides) fed from what etcd holds of one recovery: a snapshot once, then
// each watched change. Each change costs O(log n); only the snapshot, the
// decision and the deadline's words walk the members.
class Tracker {
 public:
  Tracker(std::string job, Gen from) : job_(std::move(job)), from_(from) {}

  // What a snapshot holds: `from`'s members and their states, then the
  // requests in the order they came.
  void load(const Snapshot& s);
  // One watched change, applied to `s` first.
  void on_event(const Keys& keys, const Snapshot& s, const WatchEvent& e);

  const rules::Recovery& rules() const { return rules_; }
  // Words that end this attempt at once (ranks that disagree, a regrow that
  // cannot hold a survivor), once one came.
  const std::optional<rules::Refusal>& refusal() const { return refusal_; }
  // Decided, refused, or ready to decide.
  bool settled(const Snapshot& s) const {
    return s.next_result.has_value() || refusal_.has_value() || rules_.ready();
  }
  // Replacements of a ready regrow with another world size, taken out.
  std::vector<std::pair<MemberInfo, rules::Refusal>> take_wrong_replacements() {
    return rules_.take_wrong_replacements();
  }
  // The next generation (when ready): its result, whether it needs a new
  // NCCL id, and its roster.
  ResultRecord decide(bool* need_id, RosterRecord* roster) const;
  // Why the recovery did not complete by a deadline of `timeout_ms`.
  std::string late_words(uint32_t timeout_ms) const;

 private:
  void seat_changed(const Snapshot& s, int32_t job_rank);
  void offer(const Snapshot& s, int32_t job_rank);  // a request, to the rules

  std::string job_;
  Gen from_;
  rules::Recovery rules_;
  std::optional<rules::Refusal> refusal_;
};

}  // namespace cc::rv::etcd
