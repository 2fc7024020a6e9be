// The etcd node agent's state (node_agent.hpp), shared by node_agent.cpp
// (the lease and its keeper, the worker, what ranks tell of themselves),
// node_claims.cpp (the claims' batches) and node_watch.cpp (the one watch
// stream). Private
// to rendezvous/etcd.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

#include "rendezvous/etcd/node_agent.hpp"

namespace cc::rv::etcd::node {

using std::chrono::milliseconds;

struct Agent::Impl {
  AgentOptions opt;
  std::unique_ptr<Client> etcd;
  std::string node;

  mutable std::mutex mu;
  std::condition_variable work_cv;
  bool stopping = false;
  bool frozen = false;
  int64_t lease = 0;
  int64_t ttl = 0;
  Clock::time_point kept_at{};  // the lease's grant or its last keepalive etcd answered
  std::function<void(int64_t)> lease_lost;
  std::function<void()> lease_kept;
  Counts counts;
  // The newest store revision any answer from etcd brought (keepalives,
  // claims, reads, the stream): how far behind a watcher's resume lies.
  int64_t latest_revision = 0;
  void saw_revision(int64_t revision) {  // under mu
    latest_revision = std::max(latest_revision, revision);
  }

  struct Claim {
    json request;
    ClaimDone done;
  };
  std::deque<Claim> claims;
  std::deque<std::function<void()>> tasks;  // announcements, deletions

  struct Rank {
    std::optional<Membership> membership;
    std::set<std::string> keys;  // put on the node's lease
  };
  std::unordered_map<RankId, Rank> ranks;

  // The watch: ranges by watcher_id, each rank's subscription to some.
  struct Watcher {
    WatchSpec spec;
    int64_t resume = 0;         // where the stream opens again
    int64_t complete_from = 0;  // every event from here on is in `recent`
    std::map<std::pair<int64_t, std::string>, WatchEvent> recent;
    std::vector<std::pair<uint64_t, size_t>> subs;  // subscription, its spec index
    bool fresh = false;                             // new: see kCatchUpGap before its stream opens
  };
  // Events for each subscription, gathered under mu, then told.
  struct Routed {
    std::unordered_map<uint64_t, std::vector<WatchEvent>> events;
    std::unordered_map<uint64_t, std::vector<std::pair<size_t, int64_t>>> seen;
  };
  void route(Watcher& w, const WatchEvent& e, Routed* out);
  void tell(Routed* out);  // under mu
  void catch_up(std::unique_lock<std::mutex>& lock);
  struct Subscription {
    Sink sink;
    std::vector<std::string> watchers;
    std::vector<int64_t> next;
  };
  std::map<std::string, Watcher> watchers;
  std::unordered_map<uint64_t, Subscription> subs;
  uint64_t next_sub = 1;
  std::shared_ptr<WatchCancel> stream_cancel;  // of the running stream
  std::condition_variable watch_cv;

  std::condition_variable keep_cv;  // wakes the keeper to stop
  std::thread keeper, worker, watcher;

  explicit Impl(const AgentOptions& o) : opt(o) {
    node = "cc-run, pid " + std::to_string(o.pid) + ", on host " + o.host;
  }

  static Deadline after(milliseconds d) { return Clock::now() + d; }
  // A key one of this node's ranks put on the lease (under mu).
  bool owned_here(const std::string& key) const {
    for (const auto& [id, r] : ranks)
      if (r.keys.count(key) != 0) return true;
    return false;
  }

  void keep_loop();
  void work();
  bool keepalive(std::unique_lock<std::mutex>& lock);  // false: not answered, try again soon
  std::vector<Claim> take_batch();  // under mu
  void run_claims(std::vector<Claim> batch);
  void run_alone(Claim& c);
  void watch_loop();
  void deliver(const std::vector<std::string>& ids, const std::vector<WatchEvent>& evs,
               int64_t revision);
  Status delete_keys(const Membership* m, const std::set<std::string>& keys,
                     const std::string& words);
};

}  // namespace cc::rv::etcd::node
