// The etcd backend's state, shared by backend.cpp (store, membership,
// events), backend_join.cpp (the join) and the others of this folder.
// Private to rendezvous/etcd.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "rendezvous/etcd/backend.hpp"
#include "rendezvous/etcd/client.hpp"
#include "rendezvous/etcd/keys.hpp"
#include "rendezvous/etcd/node_link.hpp"
#include "rendezvous/etcd/preflight_records.hpp"
#include "rendezvous/etcd/records.hpp"
#include "rendezvous/etcd/recovery_decision.hpp"
#include "rendezvous/rules/preflight_rules.hpp"
#include "rendezvous/rules/words.hpp"

namespace cc::rv::etcd {

// Inside Backend, "Client" names its base, cc::rv::Client.
using EtcdClient = Client;

// The backend says what it says in the words of the rules, as cc's own
// server does.
using rules::key_list;
using rules::member_who;
using rules::quote;
using rules::rank_ranges;

using std::chrono::milliseconds;

// The etcd client's options for a backend's (the address parsed, TLS and
// auth files, per-attempt timeouts). Errors: the address's.
Status client_options(const BackendOptions& options, ClientOptions* out);

struct Backend::Impl {
  static constexpr size_t kMaxAnnounced = 16;  // peer events per job, as cc's server

  BackendOptions opt;
  std::unique_ptr<EtcdClient> etcd;
  Keys keys;
  std::string endpoint_text;
  std::string id_base;  // random: this backend's writes are told apart from others'
  std::atomic<uint64_t> op_counter{0};

  // Membership, under mu.
  std::mutex mu;
  std::chrono::milliseconds window;
  int64_t lease = 0;
  int64_t lease_ttl = 0;  // seconds, as granted
  bool joining = false;   // a join is pending (for abort)
  uint32_t join_comm_number = 0;
  MemberInfo join_info;
  bool member = false;      // joined, not left
  bool leaving = false;     // its own member key's delete is expected
  bool lease_lost = false;  // the lease expired while joining (the join claims again)
  uint32_t comm_number = 0;
  uint32_t generation = 0;  // the generation of communicator `comm_number` this rank is a member of
  MemberInfo me;            // rank: the job rank (its member key's)
  int32_t position = 0;     // its rank in that generation (in peer events)
  int32_t world = 0;
  // Job ranks by rank in a generation made by a recovery (empty: the same).
  std::vector<int32_t> ring;
  std::vector<MemberSummary> members;
  std::atomic<uint64_t> last_completed{0};

  // Behind cc-run's node agent (node_link.hpp): the lease is the node's, kept
  // alive by the agent; the claim and the generation's watch go through it.
  std::unique_ptr<node::Link> node;
  std::string node_words;  // the agent, as the others name it
  Status claim_txn(const Txn& t, Deadline deadline, TxnResult* out) {
    return node ? node->claim(t, deadline, out) : etcd->txn(t, deadline, out);
  }
  // The agent is told this rank is a member of the generation it holds now.
  void tell_agent_member();
  // The node's lease expired, or the agent is gone (`how`).
  void node_lease_lost(int64_t old, const std::string& how);

  // The keepalive thread (also sends an abort asked without waiting).
  std::thread keeper;
  std::condition_variable keeper_cv;
  bool stopping = false;
  std::optional<std::string> pending_abort;

  // The generation follower: a thread on one etcd watch of the generation,
  // which takes the join's result, then departures.
  std::thread follower;
  std::unique_ptr<WatchCancel> follower_cancel;
  std::optional<ResultRecord> join_result;  // under mu
  Status follower_error;                    // the watch's last failure, under mu
  std::condition_variable result_cv;

  // Peer events for next_event().
  std::mutex ev_mu;
  std::condition_variable ev_cv;
  std::deque<PeerEvent> events;

  // The comparison of the ranks' calls (backend_calls.cpp): this rank's
  // reports written under the generation's calls/ prefix, and on the
  // generation's rank 0 the rule fed from a watch of that prefix. Made at
  // the first report; declared last, so its threads stop before anything
  // they use goes.
  struct CallChecking;
  struct CallCheckingEnd {
    void operator()(CallChecking* c) const;
  };
  std::unique_ptr<CallChecking, CallCheckingEnd> call_checking;  // under mu

  explicit Impl(const BackendOptions& o)
      : opt(o), keys(o.prefix, o.job_id), window(o.heartbeat_window) {
    std::random_device rd;
    const uint64_t r = (uint64_t(rd()) << 32) ^ rd();
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(r));
    id_base = buf;
  }

  static Deadline after(std::chrono::milliseconds d);
  // A request's deadline from its timeout_ms (0: none).
  static Deadline within(uint32_t timeout_ms) {
    return timeout_ms == 0 ? Deadline::max() : Clock::now() + milliseconds(timeout_ms);
  }
  static int64_t ttl_seconds(std::chrono::milliseconds window);
  std::string next_op_id();
  void push_event(PeerEvent e);
  void drop_events();  // the queue of events not yet taken

  Status ensure_lease(Deadline deadline);
  int64_t current_lease() {
    std::lock_guard<std::mutex> lock(mu);
    return lease;
  }
  void keep_alive();
  void lost_membership(const std::string& how);
  // What the generation follower follows: `position` of `world` ranks; ring as above.
  struct Followed {
    Gen at{0};
    int32_t position = 0;
    int32_t world = 0;
    std::vector<int32_t> ring;
  };
  void follow_generation(const Followed& w, int64_t from);
  void on_result(Gen at, const WatchEvent& e, std::vector<WatchEvent>* early);
  void on_departure(const WatchEvent& e, std::vector<bool>* told, size_t* announced);
  void neighbour_gone(Gen at, int32_t rank, const WatchEvent& e);
  std::vector<int32_t> lost_with(Gen at, int32_t rank, const WatchEvent& e);
  Status announce(Gen at, const Departure& d, Deadline deadline);
  // known: the generation's result, when it came before the follower (a recovery).
  void start_follower(Followed w, int64_t from, std::optional<ResultRecord> known = std::nullopt);
  void stop_follower();
  Gen current() const { return Gen{comm_number, generation}; }            // under mu
  int32_t key_rank() const { return ring.empty() ? position : me.rank; }  // under mu
  // Tells the others why this rank goes (failed, aborted or init_failed). A
  // failure or init failure ends its membership (the lease is revoked); an
  // aborted rank stays a member, as on cc's server: it may take part in the
  // recovery, and its lease still tells whether it lives.
  Status announce_departure(PeerEventKind kind, const std::string& reason, Deadline deadline);
  Status do_abort(const std::string& reason);

  // A join (or recovery) in progress on this connection, from its start to
  // its return; started() is false when the connection is already joining
  // or a member (*busy_with: the generation it holds).
  class Joining {
   public:
    Joining(Impl& impl, const MemberInfo& in, uint32_t* busy_with = nullptr) : impl_(impl) {
      std::lock_guard<std::mutex> lock(impl_.mu);
      if (impl_.joining || impl_.member) {
        if (busy_with != nullptr)
          *busy_with = impl_.joining ? impl_.join_comm_number : impl_.comm_number;
        return;
      }
      impl_.joining = started_ = true;
      impl_.join_comm_number = in.comm_number;
      impl_.join_info = in;
      impl_.me = in;
    }
    ~Joining() {
      if (!started_) return;
      std::lock_guard<std::mutex> lock(impl_.mu);
      impl_.joining = false;
    }
    Joining(const Joining&) = delete;
    Joining& operator=(const Joining&) = delete;
    bool started() const { return started_; }

   private:
    Impl& impl_;
    bool started_ = false;
  };

  // backend_calls.cpp
  Status report_calls(const Heartbeat& h);
  // A mismatch key of the generation was put: every rank's one mismatch
  // event per line (the communicator, each split child), `told` by line.
  void on_mismatch(const WatchEvent& e, std::set<std::pair<uint32_t, int32_t>>* told);
  // Stops writing and comparing (a leave, the end of the connection).
  void stop_call_check();

  // backend_join.cpp
  Status join(const Join& request, Joined* out);
  Status fail_generation(Gen g, cc_result_t code, const std::string& words, Deadline deadline);
  Status coordinate(uint32_t g, std::vector<KeyValue> before, int64_t revision, Deadline deadline,
                    const Join& request, const MemberRecord& self);
  Status renew_lease(int64_t old, Deadline deadline);
  bool take_lease_lost();
  Status reclaim(uint32_t g, const MemberRecord& rec, Deadline deadline);
  // The result from the watch thread, until the deadline; nullopt at it.
  // The result from the watch thread, until the deadline or until the lease
  // is lost while joining; nullopt then.
  std::optional<ResultRecord> wait_result(Deadline deadline);
  Status join_timed_out(uint32_t g, const Join& request, Joined* out);
  Status finish_join(uint32_t g, const MemberInfo& info, const ResultRecord& result, Joined* out);

  // backend_preflight.cpp: the reachability test; rank 0 keeps every
  // member's facts from its plan to its verdict (under mu).
  struct Preflighting;
  std::vector<rules::PreflightFacts> preflight_facts;
  Status preflighting(uint32_t comm_number, const std::string& did, Preflighting* out);
  Status put_preflight_verdict(const Preflighting& p, const PreflightVerdictRecord& v,
                               PreflightVerdictRecord* decided, Deadline deadline);
  Status watch_preflight(const Preflighting& p, std::vector<WatchSpec> extra, Deadline deadline,
                         const std::function<bool(const WatchEvent&)>& on_extra,
                         std::optional<PreflightVerdictRecord>* verdict);
  Status preflight_ready(const PreflightReady& request, PreflightPlan* out);
  Status preflight_report(const PreflightReport& request);

  // backend_recover.cpp
  Status recover(const Recover& request, const MakeId& make_id, Joined* out);
  Status join_as_replacement(const Join& request, Joined* out);
  Status wait_for_recovery(Gen from, const Recover& request, const MakeId& make_id,
                           Deadline deadline, std::optional<ResultRecord>* out);
  enum class ResultWait { result, cleared, coordinator_gone, refused, deadline };
  // follow_coordinator: also end (coordinator_gone) when nobody coordinates;
  // refused_key: also end (refused, *out its words) when it is put.
  Status await_result(Gen next, Deadline deadline, bool follow_coordinator, ResultWait* how,
                      std::optional<ResultRecord>* out, const std::string& refused_key = {});
  Status coordinate_recovery(Gen from, const Recover& request, const MakeId& make_id,
                             Deadline deadline);
  Status refuse_replacement(Gen next, const Snapshot& snap, int32_t rank,
                            const rules::Refusal& refusal, Deadline deadline);
  Status give_up_recovery(Gen from, uint32_t timeout_ms, std::optional<ResultRecord>* out);
  Status finish_recovery(Gen next, const MemberInfo& info, const ResultRecord& result, Joined* out);
};

}  // namespace cc::rv::etcd
