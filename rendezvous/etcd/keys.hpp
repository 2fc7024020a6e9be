// Where a job's rendezvous lives in etcd's key space. Pure: no I/O.
//
//   <prefix>/<job>/kv/<key>               the store's keys (cc_store_*)
//   <prefix>/<job>/writer/<key>           the id of the last compare-set that wrote <key>
//   <prefix>/<job>/add/<key>/one/<op>     an add of 1 to <key> (key escaped as a job id is)
//   <prefix>/<job>/add/<key>/any/<op>     an add of any other delta: the delta, in decimal
//   <prefix>/<job>/gen/<g>/member/<rank>  who the rank is; on the rank's lease (its membership)
//   <prefix>/<job>/gen/<g>/news/result    the outcome: the id, or the failure's words
//   <prefix>/<job>/gen/<g>/news/events    each departure (abort, failure), put once per rank
//   <prefix>/<job>/gen/<g>/news/mismatch  the first difference in the ranks' calls, put once
//   <prefix>/<job>/gen/<g>/news/mismatch/s<n>.<color>  the same for a split child
//   <prefix>/<job>/gen/<g>/roster         every member's host and pid, put with the result
//   <prefix>/<job>/gen/<g>/closing        taken by the first rank whose join deadline passed
//   <prefix>/<job>/gen/<g>/gone/<rank>    that rank's departure was announced
//   <prefix>/<job>/gen/<g>/leaves         one put per clean leave: the last one removes gen/<g>/
//   <prefix>/<job>/gen/<g>/coordinator    a recovery's coordinator, on its lease (gen/<g>.<e>/)
//   <prefix>/<job>/gen/<g>/refused/<op>   a replacement a recovery refused (gen/<g>.<e>/)
//   <prefix>/<job>/gen/<g>/calls/<rank>   the rank's latest points of its calls, on its lease
//   <prefix>/<job>/gen/<g>/calls/s<n>.<color>/<rank>  the same for its n-th split child
//   <prefix>/<job>/gen/<g>/preflight/ready/<rank>   a member's test endpoint, on its lease
//   <prefix>/<job>/gen/<g>/preflight/plan/<rank>    its targets, put by the generation's rank 0
//   <prefix>/<job>/gen/<g>/preflight/report/<rank>  what its connections found, on its lease
//   <prefix>/<job>/gen/<g>/preflight/verdict        the reachability test's verdict, put once
//   <prefix>/<job>/latest/<g>             the newest generation a recovery made of join g
//
// news/ holds what every member follows for the life of a generation, each
// key written rarely: one watcher a member covers them all.
//
// Generation e > 0 of join g (made by cc_comm_shrink or cc_comm_regrow) has
// the same keys under gen/<g>.<e>/, with member keys by job rank: a
// survivor's or replacement's request to take part, on its lease, which
// becomes its membership once the coordinator put the result.
//
// The job id is escaped ('%' and '/' as %25 and %2F), so no job's keys can
// fall under another's prefix. Generations keep each communicator of a job
// (and later each regrouping after a failure) apart.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace cc::rv::etcd {

// A generation of a communicator: its join number g and its generation (0:
// made by the join; each recovery adds one).
struct Gen {
  uint32_t g = 0;
  uint32_t generation = 0;
  Gen(uint32_t join) : g(join) {}  // a join number alone names its first generation
  Gen(uint32_t join, uint32_t e) : g(join), generation(e) {}
};

class Keys {
 public:
  Keys(const std::string& prefix, const std::string& job_id);

  const std::string& root() const { return root_; }  // "<prefix>/<job>/"
  std::string kv(const std::string& key) const;
  std::string writer(const std::string& key) const;
  std::string kv_prefix() const { return root_ + "kv/"; }
  // Every add made to `key` since it was last set or deleted: one key per add.
  std::string adds(const std::string& key) const;
  std::string adds_of_one(const std::string& key) const { return adds(key) + "one/"; }
  std::string adds_of_any(const std::string& key) const { return adds(key) + "any/"; }

  std::string generation(Gen g) const;  // "<root>gen/<g>/"
  std::string member_prefix(Gen g) const;
  std::string member(Gen g, int32_t rank) const;
  // The keys a member follows for the life of the generation (result,
  // events, mismatch), under one prefix: one watcher covers them.
  std::string news(Gen g) const;  // "<root>gen/<g>/news/"
  std::string result(Gen g) const;
  std::string roster(Gen g) const;
  std::string closing(Gen g) const;
  std::string events(Gen g) const;
  std::string gone(Gen g, int32_t rank) const;
  std::string leaves(Gen g) const;
  std::string coordinator(Gen g) const;
  // A replacement's refusal by a recovery's coordinator (`nonce`: its request's).
  std::string refused(Gen g, const std::string& nonce) const;
  std::string calls_prefix(Gen g) const;  // "<root>gen/<g>/calls/"
  // split 0: the communicator itself; n > 0: its n-th split child of `color`.
  std::string calls(Gen g, uint32_t split, int32_t color, int32_t rank) const;
  std::string mismatch(Gen g, uint32_t split, int32_t color) const;
  // The split and color of a key made by calls(); nullopt for any other key.
  std::optional<std::pair<uint32_t, int32_t>> calls_line(Gen g, const std::string& key) const;
  std::string latest(uint32_t join) const;
  // The reachability test (backend_preflight.cpp): rank in the generation.
  std::string preflight_ready_prefix(Gen g) const;  // "<root>gen/<g>/preflight/ready/"
  std::string preflight_ready(Gen g, int32_t rank) const;
  std::string preflight_plan(Gen g, int32_t rank) const;
  std::string preflight_report_prefix(Gen g) const;
  std::string preflight_report(Gen g, int32_t rank) const;
  std::string preflight_verdict(Gen g) const;
  // The rank of a key under `prefix` ("<prefix><rank>"); nullopt for any other key.
  static std::optional<int32_t> rank_under(const std::string& prefix, const std::string& key);

  // The rank of a key made by member(g, rank); nullopt for any other key.
  std::optional<int32_t> member_rank(Gen g, const std::string& key) const;

 private:
  std::string root_;
};

// "a%2Fb" for "a/b": a job id as one path component.
std::string escape_component(const std::string& s);

}  // namespace cc::rv::etcd
