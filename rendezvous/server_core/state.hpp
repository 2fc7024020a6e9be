// What the rendezvous server's state machine holds, and the declaration of
// ServerCore::Impl that works on it. A connection (Conn) enters one job
// (Job) after its handshake; a job holds its keys, the requests parked on
// them (Parked) and its communicator generations (Generation), each with one
// slot per joined rank (Slot). A connection that completed a join holds a
// Membership per generation. Every deadline is one entry of a single ordered
// map (Deadlines); an armed Timer is an iterator into it. A job's keys and
// its communicator state have separate lives (retention.cpp). A communicator
// that completed its join has a Lineage (recovery.hpp): its current
// generation's members and any shrink or regrow in progress. The members of
// Impl are defined in the files of this folder, one section each:
// deadlines.cpp, output.cpp, connections.cpp, parked.cpp, kv.cpp,
// retention.cpp, joins.cpp, heartbeats.cpp, recovery.cpp, status.cpp (the
// operator's status report), call_ends.cpp (the ranks' calls compared as
// their communicator ends), metrics.cpp (counters and the snapshot the
// metrics endpoint shows), init_failures.cpp and preflight.cpp (whose plan,
// verdict and messages are rendezvous/rules/preflight_rules.hpp's).
// Only the files of this folder include this header.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cc/cc_version.h"
#include "rendezvous/protocol.hpp"
#include "rendezvous/rules/call_check.hpp"
#include "rendezvous/rules/join_rules.hpp"
#include "rendezvous/server_core.hpp"
#include "rendezvous/server_core/preflight_state.hpp"
#include "rendezvous/server_core/recovery.hpp"
#include "rendezvous/server_metrics.hpp"

namespace cc::rv::server_core {

enum class Phase : uint8_t { hello, auth, ready };
// wake: a Set's answers to its key's waiters that did not fit the turn it
// came in; reap: the parked Gets and Waits of closed connections that did
// not fit the turn of the close (parked.cpp).
enum class DeadlineKind : uint8_t {
  handshake,
  frame,
  heartbeat,
  parked,
  idle,
  job_ttl,
  wake,
  reap,
  input,  // a connection's frames left for the next turn (ServerCore::kValueBytesPerTurn)
  resume_grace  // a successor's grace period for resumes ended (resume.cpp)
};

struct DeadlineRef {
  DeadlineKind kind;
  uint64_t id;  // ConnId, a parked request's id, a job's serial (job_ttl) or a wake's id
};
using Deadlines = std::multimap<Clock::time_point, DeadlineRef>;
using Timer = std::optional<Deadlines::iterator>;

struct Job;

// A parked Get or Wait listed on one key it waits for (Job::waiters), and the
// request's handle on that entry, so either end removes it in O(1).
struct Waiter {
  uint64_t parked = 0;  // the request's id
  uint64_t seq = 0;     // listing order: a Set answers those listed before it
  uint32_t slot = 0;    // the request's Listing of this key
};
using WaiterList = std::list<Waiter>;
struct Listing {
  bool active = false;
  WaiterList::iterator at;
};

struct Membership {
  uint32_t comm_number = 0;  // the communicator (its join number)
  int32_t rank = -1;         // in generation `generation` of it
  std::string host;          // as the rank said in its Join
  uint32_t pid = 0;
  uint64_t last_completed = 0;
  uint32_t generation = 0;  // 0: its join; one more for each shrink or regrow
  int32_t job_rank = -1;    // the rank it joined generation 0 with (or was started with)
};

// The ranks one node agent may carry (relay.cpp): far more than a node's GPUs.
inline constexpr size_t kMaxChannelsPerAgent = 4096;

// A node agent's connection (relay.cpp): its ranks by channel, and what the
// core has for them that is not yet handed to the Sink (one Relay a turn).
// What it was handed and has not written yet is kept per frame, with each
// channel's share, so the replies waiting for one rank are bounded as a
// connection's are (ServerCore::kMaxQueuedReplies): a rank that asks too
// much ends its own channel, not its node's link.
struct AgentLink {
  std::unordered_map<uint32_t, ConnId> channels;
  std::vector<RelayEntry> out;
  size_t out_bytes = 0;
  bool pending = false;  // listed in Impl::relays_pending
  struct Unwritten {
    size_t bytes = 0;  // the frame's, on the wire
    std::vector<std::pair<uint32_t, size_t>> shares;  // (channel, bytes of its entries)
  };
  std::deque<Unwritten> unwritten;  // oldest first
  size_t front_written = 0;         // of unwritten.front()
  std::unordered_map<uint32_t, size_t> queued;  // by channel: its bytes in unwritten
};

struct Conn {
  ConnId id = 0;
  std::string peer;
  FrameReader reader;
  Phase phase = Phase::hello;
  Hello hello;
  std::vector<uint8_t> nonce;
  Job* job = nullptr;
  // A connection that names no job and proved a job prefix's token (not the
  // admin's): status shows it the jobs of that prefix alone.
  std::optional<std::string> status_prefix;
  std::vector<Membership> memberships;
  bool announced = false;        // its failure or abort was told to the job
  size_t incomplete = 0;         // bytes of its frame not yet complete, as last counted
  std::list<uint64_t> parked;    // ids of its parked joins, recoveries and test steps
  std::list<uint64_t> waiting;   // ids of its parked Gets and Waits
  size_t parked_bytes = 0;       // what its parked Gets and Waits cost (Parked::cost)
  bool refused_parking = false;  // a Get or Wait past a parked limit was logged
  Timer handshake_timer, frame_timer, heartbeat_timer;
  Timer input_timer;                          // armed while complete frames wait for the next turn
  std::chrono::milliseconds asked_window{0};  // from HeartbeatWindow: silence allowed before a drop
  Clock::time_point last_heartbeat{};         // or the join, for Progress's silent_ms
  Timer idle_timer;                           // see ServerOptions::idle_timeout
  Clock::time_point last_frame{};
  bool heartbeat_lost = false;  // dropped for silence (the failure's cause, for metrics)
  // A rank behind a node agent: the agent's connection and its channel there
  // (agent 0: a connection of its own). Its liveness is the agent's: it has
  // no heartbeat deadline of its own, and the agent answers its heartbeats.
  ConnId agent = 0;
  uint32_t channel = 0;
  std::unique_ptr<AgentLink> link;  // set once the connection relays for ranks

  Conn(ConnId i, std::string p, const Limits& l) : id(i), peer(std::move(p)), reader(l) {}
  // Who is at the other end, for messages (words.cpp).
  std::string who() const;
};

inline std::string session_of(const Conn& c) {
  return std::string(c.hello.session.begin(), c.hello.session.end());
}

struct Parked {
  // recover: a survivor's Recover or RecoverId, or a replacement's Join
  // (recovery.cpp). preflight: a PreflightReady waiting for the plan, or a
  // PreflightReport waiting for the verdict (preflight.cpp).
  enum class Kind : uint8_t { get, wait, join, recover, preflight } kind = Kind::get;
  ConnId conn = 0;
  uint32_t request_id = 0;
  Job* job = nullptr;
  uint32_t timeout_ms = 0;
  std::string key;                // get
  std::vector<std::string> keys;  // wait, each key once
  size_t missing = 0;             // wait: keys listed on, not yet set
  uint32_t comm_number = 0;       // join, recover, preflight
  int32_t rank = -1;              // join, preflight; recover: the job rank
  bool replacement = false;       // recover: a replacement's Join
  Timer timer;
  // get: its one key's listing; wait: one per key of keys, active while unset.
  std::vector<Listing> listed;
  // Its entry in Conn::parked or Conn::waiting, or in orphans once its
  // connection is gone.
  std::list<uint64_t>::iterator conn_at;
  size_t cost = 0;  // get and wait: counted against the parked limits

  // A request waiting for its answer (park() sets the connection); a
  // member's waits name its generation and rank.
  static Parked of(Kind kind, uint32_t request_id, Job& job, uint32_t timeout_ms,
                   uint32_t comm_number = 0, int32_t rank = -1) {
    Parked p;
    p.kind = kind;
    p.request_id = request_id;
    p.job = &job;
    p.timeout_ms = timeout_ms;
    p.comm_number = comm_number;
    p.rank = rank;
    return p;
  }
};

struct Slot {
  ConnId conn = 0;
  uint64_t parked = 0;  // the pending Join while the generation is joining
  MemberInfo info;
  // How its membership ended (left, failed, aborted), for the status report;
  // empty while it lasts. An aborted member may still be connected.
  std::optional<MemberState> ended;
  std::string end_reason;
  std::string peer;             // its connection's address, kept once the connection is gone
  uint64_t last_completed = 0;  // its last heartbeat's, kept once the connection is gone
};

struct CommJoin {
  enum class State : uint8_t { joining, complete, failed } state = State::joining;
  int32_t world_size = 0;
  // By rank; only joined ranks, so a claimed world size costs no memory.
  std::unordered_map<int32_t, Slot> slots;
  int32_t joined = 0;
  // The join rules' state while it joins (the first rank's world size and
  // NCCL version, the ranks and GPUs taken); emptied when it ends.
  rules::JoinCheck check;
  std::string failure;
  std::string notice;       // lines every rank is told with Joined
  size_t notice_lines = 0;  // notices of its ranks, those beyond the notice counted only
  server_core::Preflight preflight;
};

// A Set's answers to the requests listed on its key before it, left for the
// next turns when they did not fit the turn of the Set (parked.cpp).
struct PendingWake {
  uint64_t job = 0;  // the job's serial
  std::string key;
  uint64_t before = 0;  // answers the waiters listed before this listing number
  std::shared_ptr<const std::vector<uint8_t>> value;  // as the Set left it
  Timer timer;
};

// A communicator generation rebuilt on a successor server from the Resumes
// of its members (resume.cpp), until its Lineage is made: once every rank
// resumed, or when the grace period ends.
struct Resumed {
  enum class State : uint8_t { live, failed, left } state = State::live;
  MemberInfo info;  // rank: the job rank
  std::vector<uint8_t> seat;  // Resume::seat
  ConnId conn = 0;
  std::string why;  // failed: how its connection ended
};
struct Resuming {
  bool known = false;  // a member resumed (else only recoveries wait)
  uint32_t generation = 0;
  int32_t world_size = 0;
  std::vector<uint8_t> unique_id;
  std::map<int32_t, Resumed> members;  // by rank in the generation
  // Recovers sent before the Lineage is made, handled once it is.
  struct Held {
    ConnId conn = 0;
    uint32_t request_id = 0;
    Recover request;
  };
  std::vector<Held> held;
  // Joins of a communicator that may be resuming (a replacement's, or one
  // sent again), handled as joins once it is rebuilt or the grace period
  // ends (resume.cpp, holds_join).
  struct HeldJoin {
    ConnId conn = 0;
    uint32_t request_id = 0;
    Join request;
  };
  std::vector<HeldJoin> held_joins;
};

// A job has two parts with separate lives. Its store (keys, and requests
// parked on them) outlives its connections: it is kept until the job has had
// no connection for the job TTL. Its communicator state (generations,
// announced failures) belongs to its ranks: it is forgotten when the last
// connection that joined or was joining has left or gone.
// A client session's last store write and its answer (kv.cpp).
struct SessionWrite {
  uint32_t request_id = 0;
  int64_t answer = 0;
};

struct Job {
  std::string id;
  uint64_t serial = 0;  // names the job in its TTL deadline
  std::unordered_map<std::string, std::vector<uint8_t>> keys;
  size_t bytes = 0;  // what its keys hold (kv.cpp), for the byte limits
  // By client session (Hello::session): its last write, so one sent again
  // after a failover is answered as before (kv.cpp).
  std::unordered_map<std::string, SessionWrite> sessions;
  // Per key, the Gets and Waits parked on it, in listing order.
  std::unordered_map<std::string, WaiterList> waiters;
  size_t parked_bytes = 0;  // what its parked Gets and Waits cost (Parked::cost)
  std::unordered_set<ConnId> conns;
  Timer ttl_timer;  // armed while the job has no connection and keeps keys
  // Connections that sent Join and have not left or gone since.
  std::unordered_set<ConnId> ranks;
  std::unordered_set<ConnId> members;
  std::map<uint32_t, CommJoin> comm_joins;
  // By communicator (join number), once its join completed.
  std::map<uint32_t, Lineage> lineages;
  std::set<uint32_t> unsettled;  // lineages whose pending recovery may move on
  std::map<uint32_t, Resuming> resuming;  // by communicator, on a successor (resume.cpp)
  size_t joiners = 0;            // pending joins and recoveries
  bool restored = false;  // its keys or sessions were read back: it may have members to resume
  // Failures announced per generation of a communicator: (comm_number, generation).
  std::map<std::pair<uint32_t, uint32_t>, size_t> announced;
  // The comparison of each generation's calls across its ranks (heartbeats.cpp).
  std::map<std::pair<uint32_t, uint32_t>, rules::CallCheck> call_checks;
  // The members of a generation whose communicator ends (CallsEnd), by
  // rank: where their request waits for the verdict (call_ends.cpp).
  struct CallEnder {
    ConnId conn = 0;
    uint32_t rid = 0;
    bool waiting = false;    // its request is not answered yet
    uint64_t sent_want = 0;  // the last CallsWant it was asked
  };
  std::map<std::pair<uint32_t, uint32_t>, std::map<int32_t, CallEnder>> call_enders;
  // The same for communicators made by cc_comm_split (split_calls.cpp), by
  // (comm_number, generation, split, color): compared among the members that
  // report to it, who alone are told.
  struct SplitCallCheck {
    rules::CallCheck check{true};
    std::set<ConnId> reporters;
    std::map<int32_t, ConnId> by_rank;  // in the child's numbering, to ask for points
    std::optional<PeerEvent> verdict;   // the first difference, for later reporters
    // As the child ends (split_ends.cpp): its size, as its members tell it;
    // each child rank's rank in the parent, to know it gone with its parent
    // membership; the ranks gone; those whose CallsEnd waits.
    int32_t nranks = 0;
    std::map<int32_t, int32_t> parent_rank;
    std::set<int32_t> gone;
    std::map<int32_t, CallEnder> enders;
  };
  static constexpr size_t kMaxSplitChecks = 64;  // the oldest splits go first
  std::map<std::tuple<uint32_t, uint32_t, uint32_t, int32_t>, SplitCallCheck> split_call_checks;
};

}  // namespace cc::rv::server_core

namespace cc::rv {

struct ServerCore::Impl {
  using Phase = server_core::Phase;
  using DeadlineKind = server_core::DeadlineKind;
  using DeadlineRef = server_core::DeadlineRef;
  using Deadlines = server_core::Deadlines;
  using Timer = server_core::Timer;
  using Membership = server_core::Membership;
  using Conn = server_core::Conn;
  using Parked = server_core::Parked;
  using Slot = server_core::Slot;
  using CommJoin = server_core::CommJoin;
  using Job = server_core::Job;
  using Waiter = server_core::Waiter;
  using AgentLink = server_core::AgentLink;

  ServerOptions opt;
  Sink& sink;
  std::string server_name = std::string("cc-rendezvous ") + CC_VERSION_STRING;
  std::unordered_map<ConnId, std::unique_ptr<Conn>> conns;
  std::unordered_map<std::string, std::unique_ptr<Job>> jobs;
  std::unordered_map<uint64_t, Job*> jobs_by_serial;
  uint64_t next_job_serial = 1;
  size_t total_bytes = 0;  // Job::bytes over every job
  std::unordered_map<uint64_t, Parked> parked;
  uint64_t next_parked = 1;
  // Bounds on parked Gets and Waits, and on the answers one turn gives
  // (parked.cpp).
  size_t parked_bytes = 0;  // Parked::cost over every request
  uint64_t next_listing = 1;
  std::map<uint64_t, server_core::PendingWake> wakes;
  uint64_t next_wake = 1;
  size_t turn_budget = 0;       // answers this call into the core may still give
  size_t turn_value_bytes = 0;  // bytes of values this call into the core has answered
  std::list<uint64_t> orphans;  // parked Gets and Waits of closed connections
  Timer reap_timer;
  // Ranks behind node agents are connections of the core with ids of their
  // own (kChannelBit set), counted apart from the I/O layer's (relay.cpp).
  static constexpr ConnId kChannelBit = ConnId{1} << 63;
  uint64_t next_channel_conn = 1;
  size_t channel_conns = 0;
  std::vector<ConnId> relays_pending;  // agents whose AgentLink::out waits for flush_relays
  size_t incomplete_bytes = 0;  // Conn::incomplete over every connection
  Deadlines deadlines;
  Clock::time_point current_time{};  // the time of the call being handled
  bool stopped = false;
  ServerCounters counters;
  Clock::time_point started = Clock::now();

  Impl(const ServerOptions& o, Sink& s) : opt(o), sink(s) {}

  // ---- deadlines (deadlines.cpp) -------------------------------------------
  void arm(Timer& t, Clock::time_point at, DeadlineKind kind, uint64_t id);
  void disarm(Timer& t);
  void expire(Clock::time_point now);
  void expire_idle(Conn& c, Clock::time_point now);

  // ---- output (output.cpp) -------------------------------------------------
  void send(ConnId c, uint32_t rid, const Message& m);
  void send_value(ConnId c, uint32_t rid, std::span<const uint8_t> value);
  void close(ConnId c, const std::string& reason);
  void send_error(ConnId c, uint32_t rid, cc_result_t code, std::string words);
  void drop(Conn& c, uint32_t rid, cc_result_t code, const std::string& reason);
  void announce(Job& job, Conn& c, PeerEventKind kind, const std::string& reason);
  // A failure of several members at once (the ranks of a lost node agent):
  // one event per generation, naming the first rank and the others `with` it.
  void announce_together(Job& job, const std::vector<Conn*>& gone, const std::string& reason);
  void maybe_idle(Job& job);

  // ---- connections (connections.cpp) ---------------------------------------
  bool on_connect(ConnId id, const std::string& peer, Clock::time_point now, size_t closing);
  void on_bytes(ConnId id, std::span<const uint8_t> bytes, Clock::time_point now);
  // Handles c's complete frames while the turn's budgets last; false when c was dropped.
  bool take_frames(Conn& c, bool* frame_ended, Clock::time_point now);
  void start_turn(Clock::time_point now);
  bool turn_spent() const;
  // A Get's answer, counted in the turn's value bytes.
  void answer_value(ConnId c, uint32_t rid, const std::vector<uint8_t>& value);
  // After c's frames of this call: decode errors, the incomplete bytes' bound, the frame deadline.
  void after_frames(Conn& c, bool frame_ended, Clock::time_point now);
  void handshake_frame_too_large(Conn& c, const std::string& size);
  void on_disconnect(ConnId id, const std::string& reason, Clock::time_point now);
  bool handle(Conn& c, uint32_t rid, const Message& m, Clock::time_point now);
  bool on_hello(Conn& c, uint32_t rid, const Hello& h);
  bool on_auth(Conn& c, uint32_t rid, const Auth& a);
  bool enter_job(Conn& c, uint32_t rid);
  void forget(Conn& c, const std::string& reason, bool failed);
  void stop(StopMode mode);

  // ---- ranks behind node agents (relay.cpp) -------------------------------
  static bool is_channel(ConnId id) { return (id & kChannelBit) != 0; }
  bool on_relay(Conn& agent, uint32_t rid, const Relay& r, Clock::time_point now);
  void open_channel(Conn& agent, uint32_t channel, std::span<const uint8_t> hello);
  void relay_frames(Conn& rank, std::span<const uint8_t> frames, Clock::time_point now);
  // The core's output to a rank behind an agent, gathered for the agent.
  AgentLink* relay_of(ConnId rank, uint32_t* channel);
  void relay_append(ConnId agent, AgentLink& link, uint32_t channel, RelayOp op,
                    const std::function<void(std::vector<uint8_t>&)>& write);
  void relay_close(ConnId rank, const std::string& reason);
  // Every rank of a lost agent fails together (one announcement per generation).
  void end_channels(Conn& agent, const std::string& reason, bool failed);
  void flush_relays();
  // The ranks of one agent past the bound on replies waiting for them.
  void end_flooded_channels(Conn& agent);
  // The I/O layer wrote `bytes` of what it was handed for conn.
  void on_written(ConnId conn, size_t bytes);
  // An agent's own frames, counted among what waits for it.
  void count_unwritten(Conn& agent, const Message& m, uint32_t rid);
  size_t agent_links = 0;  // connections with an AgentLink
  size_t socket_conns() const { return conns.size() - channel_conns; }

  // ---- parked requests (parked.cpp) ----------------------------------------
  uint64_t park(Conn& c, Parked p, Clock::time_point now);
  bool parked_room(Conn& c, uint32_t rid, size_t cost, const std::string& what);
  uint64_t park_on_keys(Conn& c, Parked p, Clock::time_point now);
  void list_waiter(Job& job, uint64_t id, Parked& p, uint32_t slot);
  void unlist_waiter(Parked& p);
  void unpark(std::unordered_map<uint64_t, Parked>::iterator it);
  void finish_parked(uint64_t id);
  void cancel_parked(uint64_t id);
  void release_join_slot(const Parked& p);
  void expire_parked(uint64_t id);
  void wake(Job& job, const std::string& key);
  bool wake_listed(Job& job, const std::string& key, uint64_t before,
                   const std::vector<uint8_t>& value);
  void continue_wake(uint64_t id);
  void cancel_all_parked(Conn& c);
  void reap_orphans();
  void orphan_gone(Job& job);

  // ---- keys (kv.cpp) -------------------------------------------------------
  bool store_room(Conn& c, uint32_t rid, const std::string& key, size_t value_size);
  void put_key(Job& job, const std::string& key, std::vector<uint8_t> value);
  void erase_key(Job& job, const std::string& key);
  bool on_set(Conn& c, uint32_t rid, const Set& s);
  bool on_get(Conn& c, uint32_t rid, const Get& g, Clock::time_point now);
  bool on_add(Conn& c, uint32_t rid, const Add& a);
  bool on_wait(Conn& c, uint32_t rid, const Wait& w, Clock::time_point now);
  bool on_del(Conn& c, uint32_t rid, const Del& d);
  bool on_compare_set(Conn& c, uint32_t rid, const CompareSet& m);
  std::optional<int64_t> answered_before(const Conn& c, uint32_t rid) const;
  bool keep_write(Conn& c, uint32_t rid, const std::string& key, const std::vector<uint8_t>* value,
                  int64_t answer);

  // ---- what a job keeps, and for how long (retention.cpp) -------------------
  Job* job_for(Conn& c, uint32_t rid);
  Job& restored_job(const std::string& id);
  void rank_gone(Job& job, ConnId id);
  void forget_communicators(Job& job);
  void job_unused(Job& job);
  void expire_job(uint64_t serial);
  void forget_job(Job& job, const std::string& why);

  // ---- joins (joins.cpp) ---------------------------------------------------
  bool on_join(Conn& c, uint32_t rid, const Join& j, Clock::time_point now);
  void complete(Job& job, uint32_t comm_number, CommJoin& gen, Clock::time_point now);
  void fail_join(Job& job, uint32_t comm_number, CommJoin& gen, cc_result_t code,
                 const std::string& words, uint64_t joiner = 0);
  void join_timeout(Job& job, const Parked& p);
  bool on_leave(Conn& c, uint32_t rid);
  void end_memberships(Job& job, Conn& c);

  // ---- heartbeats and progress (heartbeats.cpp) ------------------------------
  std::chrono::milliseconds heartbeat_window(const Conn& c) const;
  bool on_heartbeat(Conn& c, uint32_t rid, const Heartbeat& h, Clock::time_point now);
  bool on_heartbeat_window(Conn& c, uint32_t rid, const HeartbeatWindow& w, Clock::time_point now);
  bool on_progress(Conn& c, uint32_t rid, const ProgressQuery& q, Clock::time_point now);
  bool on_abort(Conn& c, uint32_t rid, const Abort& a);
  void check_calls(Job& job, const Conn& c, const Heartbeat& h);
  void check_split_calls(Job& job, const Conn& c, const Membership& member, const Heartbeat& h);
  std::string where_calls_are(const Job& job, uint32_t comm_number, uint32_t generation) const;

  // ---- the ranks' calls as their communicator ends (call_ends.cpp) ---------
  using CallKey = std::pair<uint32_t, uint32_t>;  // (comm_number, generation)
  bool on_calls_end(Conn& c, uint32_t rid, const CallsEnd& e, Clock::time_point now);
  rules::CallCheck& call_check(Job& job, CallKey key);
  // The live member of a generation with that rank, or null.
  Conn* member_conn(Job& job, CallKey key, int32_t rank, const Membership** m = nullptr);
  // Where the comparison stands after a change: wants sent, the verdict told,
  // or every member that ended told that the calls agree.
  void settle_calls(Job& job, CallKey key);
  void tell_calls_differ(Job& job, CallKey key, const rules::CallMismatch& m);
  void send_wants(Job& job, CallKey key, rules::CallCheck& check);
  // A member left or is gone: it is waited for no more, nor its split
  // children's ranks.
  void calls_member_gone(Job& job, CallKey key, int32_t rank);

  // ---- a split child's calls as it ends (split_ends.cpp) -------------------
  using SplitKey = std::tuple<uint32_t, uint32_t, uint32_t, int32_t>;  // (comm, gen, split, color)
  Job::SplitCallCheck& split_check(Job& job, SplitKey key);
  bool on_split_calls_end(Job& job, Conn& c, uint32_t rid, const Membership& member,
                          const CallsEnd& e);
  void settle_split(Job& job, SplitKey key, Job::SplitCallCheck& s);
  void tell_split_differ(Job& job, SplitKey key, Job::SplitCallCheck& s,
                         const rules::CallMismatch& m, const Membership& named);
  void split_member_gone(Job& job, CallKey key, int32_t parent_rank);

  // ---- recovery: shrink, regrow, replacements (recovery.cpp) ---------------
  void start_lineage(Job& job, uint32_t comm_number, const CommJoin& gen);
  bool on_recover(Conn& c, uint32_t rid, const Recover& r, Clock::time_point now);
  // Why the caller of r may not act for the seat it names, if it may not.
  std::optional<rules::Refusal> not_the_holder(const Job& job, const server_core::Lineage& l,
                                               const Recover& r) const;
  bool on_recover_id(Conn& c, uint32_t rid, const RecoverId& m, Clock::time_point now);
  bool on_replacement(Conn& c, uint32_t rid, const Join& j, Clock::time_point now);
  void recovery_conn_ends(Job& job, const Conn& c, bool failed, const std::string& reason);
  void recovery_parked_gone(uint64_t id, const Parked& p);
  void recovery_parked_expired(uint64_t id, const Parked& p);
  void settle(Job& job);
  void evaluate(Job& job, uint32_t comm_number, server_core::Lineage& l);
  void commit(Job& job, uint32_t comm_number, server_core::Lineage& l,
              const rules::NextGeneration& next);
  void fail_recovery(Job& job, uint32_t comm_number, server_core::Lineage& l, cc_result_t code,
                     const std::string& words);

  // ---- failover: resumes on a successor server (resume.cpp) ----------------
  Timer resume_grace_timer;
  bool grace_armed = false;
  bool grace_over = false;
  // Arms the grace period at the first call into the core.
  void open_resume_grace(Clock::time_point now);
  bool taking_resumes() const { return opt.successor && !grace_over; }
  bool on_resume(Conn& c, uint32_t rid, const Resume& r, Clock::time_point now);
  // A Join of a generation 0 its members are resuming: the join it was
  // waiting for completed on the server that went away.
  bool resume_join(Conn& c, uint32_t rid, const Join& j, Clock::time_point now);
  // The seat of the member `r` names, taken by c; else why not.
  std::optional<rules::Refusal> take_seat(Conn& c, const Resume& r, Clock::time_point now);
  // A Recover of a communicator still resuming waits for its Lineage.
  void hold_recover(Conn& c, uint32_t rid, const Recover& r);
  // Whether a Join of communicator g waits (hold_join) until the resumes
  // tell what it is: during the grace period, in a job that was read back,
  // before g has a Lineage, unless g resumes as a generation 0 (resume_join).
  bool holds_join(const Job& job, uint32_t g) const;
  void hold_join(Conn& c, uint32_t rid, const Join& j);
  // The Joins held for g, each handled again as it came.
  void release_joins(Job& job, std::vector<server_core::Resuming::HeldJoin> joins);
  void resumed_conn_ends(Job& job, const Conn& c, bool failed, const std::string& reason);
  void end_resume_grace();
  // The Lineage of a resumed generation: those that never resumed are failed.
  void rebuild(Job& job, uint32_t comm_number);

  // ---- the operator's status report (status.cpp) ---------------------------
  bool on_status(Conn& c, uint32_t rid, const StatusQuery& q, Clock::time_point now);
  // Notes in the slots of c's memberships how they ended (failed or aborted).
  void record_end(Job& job, const Conn& c, MemberState how, const std::string& reason);

  // ---- counters and the metrics snapshot (metrics.cpp) ---------------------
  void count_failure(const Conn& c, PeerEventKind kind);
  ServerMetrics metrics(Clock::time_point now) const;
  // ---- init failures (init_failures.cpp) -----------------------------------
  bool on_init_failed(Conn& c, uint32_t rid, const InitFailed& m);
  void joiner_lost(Conn& c, const std::string& reason);
  void init_failure_spread(Job& job, Conn& c, PeerEventKind kind, const std::string& reason);

  // ---- the reachability test (preflight.cpp) -------------------------------
  bool on_preflight_ready(Conn& c, uint32_t rid, const PreflightReady& m, Clock::time_point now);
  bool on_preflight_report(Conn& c, uint32_t rid, const PreflightReport& m, Clock::time_point now);
  void preflight_plan(Job& job, uint32_t comm_number, CommJoin& gen);
  void preflight_verdict(Job& job, uint32_t comm_number, CommJoin& gen);
  void preflight_fail(Job& job, CommJoin& gen, cc_result_t code, const std::string& words);
  void preflight_expired(const Parked& p);
  const Membership* membership_of(const Conn& c, uint32_t comm_number) const;
  CommJoin* preflight_of(Conn& c, uint32_t rid, uint32_t comm_number, const std::string& did,
                         const std::string& advice, const Membership** ms);
};

}  // namespace cc::rv
