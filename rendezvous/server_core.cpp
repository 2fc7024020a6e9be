#include "rendezvous/server_core.hpp"

#include <algorithm>
#include <charconv>
#include <limits>

#include "cc/cc_version.h"
#include "common/log.hpp"
#include "rendezvous/auth.hpp"

namespace cc::rv {
namespace {

enum class Phase : uint8_t { hello, auth, ready };
enum class DeadlineKind : uint8_t { handshake, frame, heartbeat, parked, idle };

struct DeadlineRef {
  DeadlineKind kind;
  uint64_t id;  // ConnId, or a parked request's id
};
using Deadlines = std::multimap<Clock::time_point, DeadlineRef>;
using Timer = std::optional<Deadlines::iterator>;

struct Job;

struct Membership {
  uint32_t generation = 0;
  int32_t rank = -1;
  std::string host;  // as the rank said in its Join
  uint32_t pid = 0;
  uint64_t last_completed = 0;
};

struct Conn {
  ConnId id = 0;
  std::string peer;
  FrameReader reader;
  Phase phase = Phase::hello;
  Hello hello;
  std::vector<uint8_t> nonce;
  Job* job = nullptr;
  std::vector<Membership> memberships;
  bool announced = false;        // its failure or abort was told to the job
  std::vector<uint64_t> parked;  // ids of its parked requests (some may be done)
  Timer handshake_timer, frame_timer, heartbeat_timer;
  std::chrono::milliseconds watch_window{0};  // from Watch: silence allowed before a drop
  Clock::time_point last_heartbeat{};         // or the join, for Progress's silent_ms
  Timer idle_timer;                           // see ServerOptions::idle_timeout
  Clock::time_point last_frame{};

  Conn(ConnId i, std::string p, const Limits& l) : id(i), peer(std::move(p)), reader(l) {}
  // "rank 3 (host-a pid 42, 10.0.0.3:5555)" or "10.0.0.3:5555" before joining
  std::string who() const {
    if (!memberships.empty())
      return "rank " + std::to_string(memberships.back().rank) + " (" + memberships.back().host +
             " pid " + std::to_string(memberships.back().pid) + ", " + peer + ")";
    if (phase == Phase::ready)
      return hello.host + " pid " + std::to_string(hello.pid) + " (" + peer + ")";
    return peer;
  }
};

struct Parked {
  enum class Kind : uint8_t { get, wait, join } kind = Kind::get;
  ConnId conn = 0;
  uint32_t request_id = 0;
  Job* job = nullptr;
  uint32_t timeout_ms = 0;
  std::string key;                // get
  std::vector<std::string> keys;  // wait
  size_t missing = 0;             // wait
  uint32_t generation = 0;        // join
  int32_t rank = -1;              // join
  Timer timer;
};

struct Slot {
  ConnId conn = 0;
  uint64_t parked = 0;  // the pending Join while the generation is joining
  MemberInfo info;
};

struct Generation {
  enum class State : uint8_t { joining, complete, failed } state = State::joining;
  int32_t world_size = 0;
  std::string first;  // who set the world size, for mismatch words
  int32_t nccl_major_minor = 0;
  int32_t nccl_version = 0;  // the full code of nccl_rank, for words
  int32_t nccl_rank = -1;
  // By rank; only joined ranks, so a claimed world size costs no memory.
  std::unordered_map<int32_t, Slot> slots;
  int32_t joined = 0;
  std::vector<uint8_t> unique_id;
  std::unordered_map<std::string, int32_t> gpu_owner;  // host '\n' uuid -> rank
  std::string failure;
  std::string notice;  // lines every rank is told with Joined
};

struct Job {
  std::string id;
  std::unordered_map<std::string, std::vector<uint8_t>> keys;
  std::unordered_map<std::string, std::vector<uint64_t>> waiters;  // key -> parked ids
  std::unordered_set<ConnId> conns;
  std::unordered_set<ConnId> members;
  std::map<uint32_t, Generation> generations;
  size_t joiners = 0;
  size_t announced = 0;
};

std::string quote(const std::string& s) { return "'" + s + "'"; }

std::string slot_who(const MemberInfo& i) {
  return "rank " + std::to_string(i.rank) + " on " + (i.host.empty() ? "?" : i.host) + " (pid " +
         std::to_string(i.pid) + ")";
}

std::string nccl_text(int32_t code) {
  if (code <= 0) return "unknown";
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

// "2, 3, 5-9" for a sorted list of ranks.
std::string rank_ranges(const std::vector<int32_t>& ranks) {
  std::string out;
  size_t i = 0;
  while (i < ranks.size()) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string key_list(const std::vector<std::string>& keys) {
  constexpr size_t kShown = 16;
  std::string out;
  for (size_t i = 0; i < keys.size() && i < kShown; ++i) out += (i ? ", " : "") + quote(keys[i]);
  if (keys.size() > kShown) out += " and " + std::to_string(keys.size() - kShown) + " more";
  return out;
}

// The address part of "1.2.3.4:5" or "[::1]:5".
std::string peer_address(const std::string& peer) {
  if (!peer.empty() && peer.front() == '[') {
    const size_t end = peer.find(']');
    return end == std::string::npos ? peer : peer.substr(1, end - 1);
  }
  const size_t colon = peer.rfind(':');
  return colon == std::string::npos ? peer : peer.substr(0, colon);
}

bool is_loopback(const std::string& addr) { return addr.rfind("127.", 0) == 0 || addr == "::1"; }

// A rank whose connection arrives from another address than the one it says
// NCCL will use sits behind NAT (a Docker bridge, say): the others will try
// an address they may not reach. Loopback connections are the server's own
// host and prove nothing.
std::string nat_notice(const MemberInfo& in, const std::string& peer) {
  const std::string from = peer_address(peer);
  if (in.nccl_addr.empty() || from.empty() || is_loopback(from) || from == in.nccl_addr) return {};
  return slot_who(in) + " will have NCCL use the address " + in.nccl_addr +
         ", but its connection to the rendezvous came from " + from +
         ": a NAT or a Docker bridge sits between them, and the other ranks may not reach " +
         in.nccl_addr +
         ". Run the containers with --network host, or set NCCL_SOCKET_IFNAME to an "
         "interface the other hosts can reach";
}

std::optional<int64_t> parse_int64(const std::vector<uint8_t>& v) {
  const char* b = reinterpret_cast<const char*>(v.data());
  const char* e = b + v.size();
  int64_t out = 0;
  auto [p, ec] = std::from_chars(b, e, out);
  if (ec != std::errc() || p != e || v.empty()) return std::nullopt;
  return out;
}

}  // namespace

struct ServerCore::Impl {
  ServerOptions opt;
  Sink& sink;
  std::string server_name = std::string("cc-rendezvous ") + CC_VERSION_STRING;
  std::unordered_map<ConnId, std::unique_ptr<Conn>> conns;
  std::unordered_map<std::string, std::unique_ptr<Job>> jobs;
  std::unordered_map<uint64_t, Parked> parked;
  uint64_t next_parked = 1;
  Deadlines deadlines;
  bool stopped = false;

  Impl(const ServerOptions& o, Sink& s) : opt(o), sink(s) {}

  // ---- deadlines -------------------------------------------------------

  void arm(Timer& t, Clock::time_point at, DeadlineKind kind, uint64_t id) {
    disarm(t);
    t = deadlines.emplace(at, DeadlineRef{kind, id});
  }
  void disarm(Timer& t) {
    if (t) deadlines.erase(*t);
    t.reset();
  }

  // ---- output ------------------------------------------------------------

  void send(ConnId c, uint32_t rid, const Message& m) { sink.send(c, rid, m); }
  void send_error(ConnId c, uint32_t rid, cc_result_t code, std::string words) {
    sink.send(c, rid, Error{static_cast<uint32_t>(code), std::move(words)});
  }

  // Sends Error (when code != success), logs and forgets the connection.
  void drop(Conn& c, uint32_t rid, cc_result_t code, const std::string& reason) {
    if (code != CC_SUCCESS) send_error(c.id, rid, code, reason);
    log().warn("dropping {}: {}", c.who(), reason);
    forget(c, reason, true);
  }

  // Removes every trace of the connection; `failed` when it ended without a
  // clean Leave (then its memberships are announced as failures).
  void forget(Conn& c, const std::string& reason, bool failed) {
    const ConnId id = c.id;
    disarm(c.handshake_timer);
    disarm(c.frame_timer);
    disarm(c.heartbeat_timer);
    disarm(c.idle_timer);
    for (uint64_t pid : c.parked) cancel_parked(pid);
    Job* job = c.job;
    if (job != nullptr) {
      if (!c.memberships.empty()) {
        if (failed && !c.announced) announce(*job, c, PeerEventKind::failed, reason);
        end_memberships(*job, c);
      }
      job->conns.erase(id);
    }
    sink.close(id, reason);
    conns.erase(id);  // c is gone from here on
    if (job != nullptr) {
      maybe_idle(*job);
      if (job->conns.empty()) {
        log().info("job {} forgotten (its last connection is gone)", quote(job->id));
        jobs.erase(job->id);
      }
    }
  }

  void end_memberships(Job& job, Conn& c) {
    for (const Membership& m : c.memberships) {
      auto g = job.generations.find(m.generation);
      if (g == job.generations.end()) continue;
      auto s = g->second.slots.find(m.rank);
      if (s != g->second.slots.end()) s->second.conn = 0;
    }
    c.memberships.clear();
    job.members.erase(c.id);
    disarm(c.heartbeat_timer);
  }

  void maybe_idle(Job& job) {
    if (job.members.empty() && job.joiners == 0) sink.job_idle(job.id);
  }

  void announce(Job& job, Conn& c, PeerEventKind kind, const std::string& reason) {
    c.announced = true;
    const char* what = kind == PeerEventKind::aborted ? "aborted" : "failed";
    if (job.announced >= ServerCore::kMaxAnnouncedFailures) {
      log().warn("job {}: {} {}: {} (not announced: the job already had {} failures)",
                 quote(job.id), c.who(), what, reason, job.announced);
      return;
    }
    ++job.announced;
    log().warn("job {}: {} {}: {}; telling {} other members", quote(job.id), c.who(), what, reason,
               job.members.size() - (job.members.count(c.id) ? 1 : 0));
    for (const Membership& m : c.memberships) {
      PeerEvent ev{kind, m.rank, m.host, m.pid, reason};
      for (ConnId other : job.members)
        if (other != c.id) send(other, 0, ev);
    }
  }

  // ---- parked requests ---------------------------------------------------

  uint64_t park(Conn& c, Parked p, Clock::time_point now) {
    const uint64_t id = next_parked++;
    p.conn = c.id;
    auto& slot = parked.emplace(id, std::move(p)).first->second;
    if (slot.timeout_ms > 0)
      arm(slot.timer, now + std::chrono::milliseconds(slot.timeout_ms), DeadlineKind::parked, id);
    c.parked.push_back(id);
    return id;
  }

  // Finishes a parked request without answering it.
  void finish_parked(uint64_t id) {
    auto it = parked.find(id);
    if (it == parked.end()) return;
    disarm(it->second.timer);
    auto cit = conns.find(it->second.conn);
    if (cit != conns.end()) {
      auto& v = cit->second->parked;
      v.erase(std::remove(v.begin(), v.end(), id), v.end());
    }
    parked.erase(it);
  }

  // The connection is going: a pending join gives up its slot.
  void cancel_parked(uint64_t id) {
    auto it = parked.find(id);
    if (it == parked.end()) return;
    Parked& p = it->second;
    if (p.kind == Parked::Kind::join) release_join_slot(p);
    disarm(p.timer);
    parked.erase(it);
  }

  void release_join_slot(const Parked& p) {
    Job& job = *p.job;
    auto g = job.generations.find(p.generation);
    if (g == job.generations.end()) return;
    Generation& gen = g->second;
    auto s = gen.slots.find(p.rank);
    if (gen.state == Generation::State::joining && s != gen.slots.end() &&
        s->second.conn == p.conn) {
      const MemberInfo& info = s->second.info;
      if (!info.gpu_uuid.empty()) gen.gpu_owner.erase(info.host + "\n" + info.gpu_uuid);
      gen.slots.erase(s);
      --gen.joined;
    }
    --job.joiners;
    maybe_idle(job);
  }

  void expire_parked(uint64_t id) {
    auto it = parked.find(id);
    if (it == parked.end()) return;
    Parked& p = it->second;
    p.timer.reset();  // already erased by expire()
    Job& job = *p.job;
    if (p.kind == Parked::Kind::get) {
      send_error(p.conn, p.request_id, CC_ERR_TIMEOUT,
                 "key " + quote(p.key) + " of job " + quote(job.id) + " was not set within " +
                     std::to_string(p.timeout_ms) +
                     " ms; check that the rank that sets it is running and uses the same job id "
                     "and rendezvous server");
      finish_parked(id);
    } else if (p.kind == Parked::Kind::wait) {
      std::vector<std::string> missing;
      for (const auto& k : p.keys)
        if (!job.keys.count(k) && std::find(missing.begin(), missing.end(), k) == missing.end())
          missing.push_back(k);
      send_error(p.conn, p.request_id, CC_ERR_TIMEOUT,
                 "wait on job " + quote(job.id) + " timed out after " +
                     std::to_string(p.timeout_ms) + " ms; still missing: " + key_list(missing) +
                     "; check that the ranks that set them are running and use the same job id");
      finish_parked(id);
    } else {
      join_timeout(job, p);
    }
  }

  void wake(Job& job, const std::string& key) {
    auto w = job.waiters.find(key);
    if (w == job.waiters.end()) return;
    std::vector<uint64_t> ids = std::move(w->second);
    job.waiters.erase(w);
    const std::vector<uint8_t>& value = job.keys[key];
    for (uint64_t id : ids) {
      auto it = parked.find(id);
      if (it == parked.end()) continue;  // timed out or its connection went
      Parked& p = it->second;
      if (p.kind == Parked::Kind::get) {
        send(p.conn, p.request_id, Value{value});
        finish_parked(id);
      } else if (p.kind == Parked::Kind::wait && --p.missing == 0) {
        send(p.conn, p.request_id, Ok{});
        finish_parked(id);
      }
    }
  }

  // ---- connection events -------------------------------------------------

  bool on_connect(ConnId id, const std::string& peer, Clock::time_point now) {
    if (stopped || conns.size() >= opt.max_connections) {
      const std::string why =
          stopped
              ? "the rendezvous server is stopping"
              : "the rendezvous server is at its limit of " + std::to_string(opt.max_connections) +
                    " connections; try again later or raise the server's connection limit";
      send_error(id, 0, CC_ERR_RENDEZVOUS, why);
      log().warn("refusing {}: {}", peer, why);
      sink.close(id, why);
      return false;
    }
    auto c = std::make_unique<Conn>(id, peer, opt.limits);
    c->last_frame = now;
    arm(c->handshake_timer, now + opt.handshake_timeout, DeadlineKind::handshake, id);
    conns.emplace(id, std::move(c));
    log().info("connection from {}", peer);
    return true;
  }

  void on_bytes(ConnId id, std::span<const uint8_t> bytes, Clock::time_point now) {
    auto it = conns.find(id);
    if (it == conns.end()) return;
    Conn& c = *it->second;
    c.reader.feed(bytes);
    while (auto f = c.reader.next()) {
      c.last_frame = now;
      if (!handle(c, f->request_id, f->message, now)) return;  // c was dropped
    }
    if (c.reader.error() != DecodeError::none) {
      drop(c, 0, CC_ERR_RENDEZVOUS, describe(c.reader.error()));
      return;
    }
    if (c.reader.mid_frame()) {
      if (!c.frame_timer) arm(c.frame_timer, now + opt.frame_timeout, DeadlineKind::frame, id);
    } else {
      disarm(c.frame_timer);
    }
  }

  void on_disconnect(ConnId id, const std::string& reason) {
    auto it = conns.find(id);
    if (it == conns.end()) return;
    Conn& c = *it->second;
    std::string why = reason;
    if (c.reader.mid_frame())
      why += " in the middle of a frame (" + std::to_string(c.reader.buffered()) +
             " bytes of a truncated frame)";
    if (!c.memberships.empty() || c.reader.mid_frame())
      log().warn("{} disconnected: {}", c.who(), why);
    else
      log().info("{} disconnected: {}", c.who(), why);
    forget(c, why, true);
  }

  void expire(Clock::time_point now) {
    while (!deadlines.empty() && deadlines.begin()->first <= now) {
      const DeadlineRef ref = deadlines.begin()->second;
      deadlines.erase(deadlines.begin());
      if (ref.kind == DeadlineKind::parked) {
        expire_parked(ref.id);
        continue;
      }
      auto it = conns.find(ref.id);
      if (it == conns.end()) continue;
      Conn& c = *it->second;
      if (ref.kind == DeadlineKind::handshake) {
        c.handshake_timer.reset();
        drop(c, 0, CC_ERR_RENDEZVOUS,
             "no " + std::string(c.phase == Phase::auth ? "authentication" : "hello") + " within " +
                 std::to_string(opt.handshake_timeout.count()) +
                 " ms of connecting (handshake deadline)");
      } else if (ref.kind == DeadlineKind::idle) {
        c.idle_timer.reset();
        expire_idle(c, now);
      } else if (ref.kind == DeadlineKind::frame) {
        c.frame_timer.reset();
        drop(c, 0, CC_ERR_RENDEZVOUS,
             "a frame stalled: " + std::to_string(c.reader.buffered()) +
                 " bytes of an incomplete frame for " + std::to_string(opt.frame_timeout.count()) +
                 " ms (frame deadline)");
      } else {
        c.heartbeat_timer.reset();
        drop(c, 0, CC_SUCCESS,
             "no heartbeat for " + std::to_string(heartbeat_window(c).count()) +
                 " ms (host down, process stopped or network cut)");
      }
    }
  }

  // An idle connection holds nothing (no membership, pending join or parked
  // request) and sent no frame for idle_timeout; one that holds something is
  // looked at again later.
  void expire_idle(Conn& c, Clock::time_point now) {
    const auto silent_until = c.last_frame + opt.idle_timeout;
    if (!c.memberships.empty() || !c.parked.empty() || now < silent_until) {
      arm(c.idle_timer, now < silent_until ? silent_until : now + opt.idle_timeout,
          DeadlineKind::idle, c.id);
      return;
    }
    drop(c, 0, CC_ERR_RENDEZVOUS,
         "idle for " + std::to_string(opt.idle_timeout.count()) +
             " ms without a request, membership or pending wait (idle deadline); reconnect when "
             "needed");
  }

  void stop() {
    if (stopped) return;
    stopped = true;
    const std::string why =
        "the rendezvous server is stopping; the job cannot continue through it (restart the server "
        "or the job)";
    std::vector<uint64_t> ids;
    ids.reserve(parked.size());
    for (const auto& [id, p] : parked) ids.push_back(id);
    for (uint64_t id : ids) {
      auto it = parked.find(id);
      if (it == parked.end()) continue;
      send_error(it->second.conn, it->second.request_id, CC_ERR_RENDEZVOUS, why);
      finish_parked(id);
    }
    for (auto& [id, c] : conns)
      if (!c->memberships.empty())
        send(id, 0, PeerEvent{PeerEventKind::server_stopping, -1, "", 0, why});
    std::vector<ConnId> all;
    all.reserve(conns.size());
    for (const auto& [id, c] : conns) all.push_back(id);
    for (ConnId id : all) {
      auto it = conns.find(id);
      if (it == conns.end()) continue;
      it->second->announced = true;  // the server is going, not the rank
      forget(*it->second, "the rendezvous server is stopping", false);
    }
    parked.clear();
    deadlines.clear();
  }

  // ---- requests ----------------------------------------------------------

  // Handles one frame; false when the connection was dropped.
  bool handle(Conn& c, uint32_t rid, const Message& m, Clock::time_point now) {
    const MsgType type = type_of(m);
    if (c.phase == Phase::hello) {
      if (type != MsgType::hello) {
        drop(c, rid, CC_ERR_RENDEZVOUS,
             std::string("the first message must be hello, not ") + type_name(type) +
                 " (a client of another protocol, or a bug)");
        return false;
      }
      return on_hello(c, rid, std::get<Hello>(m));
    }
    if (c.phase == Phase::auth) {
      if (type != MsgType::auth) {
        drop(c, rid, CC_ERR_AUTH,
             "the rendezvous server requires a token: set CC_RENDEZVOUS_TOKEN (or "
             "CC_RENDEZVOUS_TOKEN_FILE) to the job's token");
        return false;
      }
      return on_auth(c, rid, std::get<Auth>(m));
    }
    Job& job = *c.job;
    switch (type) {
      case MsgType::set:
        return on_set(c, rid, std::get<Set>(m));
      case MsgType::get:
        return on_get(c, rid, std::get<Get>(m), now);
      case MsgType::add:
        return on_add(c, rid, std::get<Add>(m));
      case MsgType::wait:
        return on_wait(c, rid, std::get<Wait>(m), now);
      case MsgType::del:
        job.keys.erase(std::get<Del>(m).key);
        send(c.id, rid, Ok{});
        return true;
      case MsgType::join:
        return on_join(c, rid, std::get<Join>(m), now);
      case MsgType::leave:
        if (!c.memberships.empty()) {
          log().debug("job {}: {} left", quote(job.id), c.who());
          end_memberships(job, c);
          maybe_idle(job);
        }
        send(c.id, rid, Ok{});
        return true;
      case MsgType::heartbeat:
        for (Membership& ms : c.memberships)
          ms.last_completed = std::get<Heartbeat>(m).last_completed;
        c.last_heartbeat = now;
        if (c.heartbeat_timer)
          arm(c.heartbeat_timer, now + heartbeat_window(c), DeadlineKind::heartbeat, c.id);
        send(c.id, rid, HeartbeatAck{});
        return true;
      case MsgType::watch:
        c.watch_window = std::chrono::milliseconds(std::get<Watch>(m).window_ms);
        c.last_heartbeat = now;
        if (c.watch_window.count() > 0)
          arm(c.heartbeat_timer, now + c.watch_window, DeadlineKind::heartbeat, c.id);
        else
          disarm(c.heartbeat_timer);
        send(c.id, rid, Ok{});
        return true;
      case MsgType::progress_query:
        return on_progress(c, rid, std::get<ProgressQuery>(m), now);
      case MsgType::abort:
        return on_abort(c, rid, std::get<Abort>(m));
      default:
        drop(c, rid, CC_ERR_RENDEZVOUS,
             std::string("unexpected message ") + type_name(type) +
                 " from a client (after the handshake)");
        return false;
    }
  }

  bool on_hello(Conn& c, uint32_t rid, const Hello& h) {
    c.hello = h;
    Challenge ch;
    ch.server = server_name;
    if (!opt.token.empty()) {
      ch.auth_required = true;
      c.nonce = make_nonce();
      ch.nonce = c.nonce;
      c.phase = Phase::auth;
      send(c.id, rid, ch);
      return true;
    }
    send(c.id, rid, ch);
    return enter_job(c, rid);
  }

  bool on_auth(Conn& c, uint32_t rid, const Auth& a) {
    if (!auth_check(opt.token, c.nonce, c.hello.job_id, a.mac)) {
      drop(
          c, rid, CC_ERR_AUTH,
          "the rendezvous token was refused by the server; give every rank and the server the same "
          "token (CC_RENDEZVOUS_TOKEN or CC_RENDEZVOUS_TOKEN_FILE, cc-rendezvous --token-file)");
      return false;
    }
    c.nonce.clear();
    if (!enter_job(c, rid)) return false;
    send(c.id, rid, Ok{});
    return true;
  }

  bool enter_job(Conn& c, uint32_t rid) {
    auto it = jobs.find(c.hello.job_id);
    if (it == jobs.end()) {
      if (jobs.size() >= opt.max_jobs) {
        drop(c, rid, CC_ERR_RENDEZVOUS,
             "the rendezvous server is at its limit of " + std::to_string(opt.max_jobs) +
                 " jobs; wait for other jobs to end or raise the server's job limit");
        return false;
      }
      auto job = std::make_unique<Job>();
      job->id = c.hello.job_id;
      log().info("job {} created (first connection {} from {})", quote(job->id), c.hello.host,
                 c.peer);
      it = jobs.emplace(job->id, std::move(job)).first;
    }
    c.job = it->second.get();
    c.job->conns.insert(c.id);
    c.phase = Phase::ready;
    disarm(c.handshake_timer);
    if (opt.idle_timeout.count() > 0)
      arm(c.idle_timer, c.last_frame + opt.idle_timeout, DeadlineKind::idle, c.id);
    return true;
  }

  bool key_room(Conn& c, uint32_t rid, const std::string& key) {
    Job& job = *c.job;
    if (job.keys.size() < opt.max_keys_per_job || job.keys.count(key)) return true;
    send_error(c.id, rid, CC_ERR_RENDEZVOUS,
               "job " + quote(job.id) + " holds the server's limit of " +
                   std::to_string(opt.max_keys_per_job) + " keys; key " + quote(key) +
                   " was not stored (delete keys or raise the limit)");
    return false;
  }

  bool on_set(Conn& c, uint32_t rid, const Set& s) {
    if (!key_room(c, rid, s.key)) return true;
    c.job->keys[s.key] = s.value;
    send(c.id, rid, Ok{});
    wake(*c.job, s.key);
    return true;
  }

  bool on_get(Conn& c, uint32_t rid, const Get& g, Clock::time_point now) {
    Job& job = *c.job;
    auto it = job.keys.find(g.key);
    if (it != job.keys.end()) {
      send(c.id, rid, Value{it->second});
      return true;
    }
    if (g.timeout_ms == 0) {
      send_error(
          c.id, rid, CC_ERR_TIMEOUT,
          "key " + quote(g.key) + " is not set in job " + quote(job.id) + " (get without waiting)");
      return true;
    }
    Parked p;
    p.kind = Parked::Kind::get;
    p.request_id = rid;
    p.job = &job;
    p.timeout_ms = g.timeout_ms;
    p.key = g.key;
    const uint64_t id = park(c, std::move(p), now);
    job.waiters[g.key].push_back(id);
    return true;
  }

  bool on_add(Conn& c, uint32_t rid, const Add& a) {
    Job& job = *c.job;
    int64_t current = 0;
    auto it = job.keys.find(a.key);
    if (it != job.keys.end()) {
      auto v = parse_int64(it->second);
      if (!v) {
        send_error(c.id, rid, CC_ERR_INVALID_ARGUMENT,
                   "add on key " + quote(a.key) + " of job " + quote(job.id) +
                       ": its value is not a decimal integer (it was set by set, not add); use "
                       "another key");
        return true;
      }
      current = *v;
    } else if (!key_room(c, rid, a.key)) {
      return true;
    }
    int64_t result = 0;
    if (__builtin_add_overflow(current, a.delta, &result)) {
      send_error(c.id, rid, CC_ERR_INVALID_ARGUMENT,
                 "add on key " + quote(a.key) + " of job " + quote(job.id) + ": " +
                     std::to_string(current) + " + " + std::to_string(a.delta) +
                     " overflows a 64-bit integer");
      return true;
    }
    const std::string text = std::to_string(result);
    job.keys[a.key].assign(text.begin(), text.end());
    send(c.id, rid, Integer{result});
    wake(job, a.key);
    return true;
  }

  bool on_wait(Conn& c, uint32_t rid, const Wait& w, Clock::time_point now) {
    Job& job = *c.job;
    std::vector<const std::string*> missing;
    for (const auto& k : w.keys)
      if (!job.keys.count(k)) missing.push_back(&k);
    if (missing.empty()) {
      send(c.id, rid, Ok{});
      return true;
    }
    if (w.timeout_ms == 0) {
      std::vector<std::string> names;
      for (const auto* k : missing) names.push_back(*k);
      send_error(c.id, rid, CC_ERR_TIMEOUT,
                 "wait on job " + quote(job.id) + " without waiting: not set: " + key_list(names));
      return true;
    }
    Parked p;
    p.kind = Parked::Kind::wait;
    p.request_id = rid;
    p.job = &job;
    p.timeout_ms = w.timeout_ms;
    p.keys = w.keys;
    p.missing = missing.size();
    const uint64_t id = park(c, std::move(p), now);
    for (const auto* k : missing) job.waiters[*k].push_back(id);
    return true;
  }

  // The silence a member may keep: what it asked for in Watch, else the server's option.
  std::chrono::milliseconds heartbeat_window(const Conn& c) const {
    return c.watch_window.count() > 0 ? c.watch_window : opt.heartbeat_timeout;
  }

  // One rank, or the others furthest behind: O(members) work, a small answer.
  bool on_progress(Conn& c, uint32_t rid, const ProgressQuery& q, Clock::time_point now) {
    Progress out;
    uint64_t lowest = std::numeric_limits<uint64_t>::max();
    for (ConnId id : c.job->members) {
      auto it = conns.find(id);
      if (it == conns.end() || (q.rank < 0 && id == c.id)) continue;
      const Conn& member = *it->second;
      const auto silent =
          std::chrono::duration_cast<std::chrono::milliseconds>(now - member.last_heartbeat);
      for (const Membership& m : member.memberships) {
        if (m.generation != q.generation || (q.rank >= 0 && m.rank != q.rank)) continue;
        if (q.rank < 0) {
          if (m.last_completed > lowest) continue;
          if (m.last_completed < lowest) out.members.clear();
          lowest = m.last_completed;
          if (out.members.size() >= kMaxProgressMembers) continue;
        }
        out.members.push_back({m.rank, m.host, m.pid, m.last_completed,
                               static_cast<uint32_t>(std::clamp<int64_t>(
                                   silent.count(), 0, std::numeric_limits<uint32_t>::max()))});
      }
    }
    std::sort(out.members.begin(), out.members.end(),
              [](const MemberProgress& a, const MemberProgress& b) { return a.rank < b.rank; });
    send(c.id, rid, out);
    return true;
  }

  bool on_abort(Conn& c, uint32_t rid, const Abort& a) {
    Job& job = *c.job;
    const std::string reason = a.reason.empty() ? "the rank called abort" : a.reason;
    if (!c.memberships.empty() && !c.announced) announce(job, c, PeerEventKind::aborted, reason);
    // A pending join fails its whole generation: nobody waits for an aborted rank.
    std::vector<uint64_t> ids = c.parked;
    for (uint64_t id : ids) {
      auto it = parked.find(id);
      if (it != parked.end() && it->second.kind == Parked::Kind::join) {
        const uint32_t generation = it->second.generation;
        const int32_t rank = it->second.rank;
        Generation& gen = job.generations[generation];
        std::string who = "rank " + std::to_string(rank);
        if (auto slot = gen.slots.find(rank); slot != gen.slots.end())
          who = slot_who(slot->second.info);
        fail_generation(job, generation, gen, CC_ERR_ABORTED,
                        who + " aborted while joining job " + quote(job.id) + " (generation " +
                            std::to_string(generation) + "): " + reason);
      }
    }
    send(c.id, rid, Ok{});
    return true;
  }

  // ---- joins -------------------------------------------------------------

  bool on_join(Conn& c, uint32_t rid, const Join& j, Clock::time_point now) {
    Job& job = *c.job;
    const MemberInfo& in = j.info;
    const std::string where =
        "job " + quote(job.id) + " (generation " + std::to_string(in.generation) + ")";
    const std::string me = slot_who(in);
    if (static_cast<size_t>(in.world_size) > opt.max_connections) {
      send_error(c.id, rid, CC_ERR_INVALID_ARGUMENT,
                 me + " of " + where + " asks for a world of " + std::to_string(in.world_size) +
                     " ranks, more than the server's limit of " +
                     std::to_string(opt.max_connections) + " connections; check WORLD_SIZE");
      return true;
    }
    auto [git, fresh] = job.generations.try_emplace(in.generation);
    Generation& gen = git->second;
    if (!fresh && gen.state == Generation::State::complete) {
      send_error(c.id, rid, CC_ERR_MISMATCH,
                 me + " joined " + where +
                     " after it had completed; a rank restarted late or two communicators use one "
                     "generation: restart the whole job");
      return true;
    }
    if (!fresh && gen.state == Generation::State::failed) {
      send_error(c.id, rid, CC_ERR_MISMATCH, where + " already failed: " + gen.failure);
      return true;
    }
    if (fresh) {
      gen.world_size = in.world_size;
      gen.first = me;
      gen.nccl_major_minor = in.nccl_version / 100;
      gen.nccl_version = in.nccl_version;
      gen.nccl_rank = in.rank;
    }
    // The joiner is parked first so a failure below reaches it with the others.
    Parked p;
    p.kind = Parked::Kind::join;
    p.request_id = rid;
    p.job = &job;
    p.timeout_ms = j.timeout_ms;
    p.generation = in.generation;
    p.rank = in.rank;
    const uint64_t id = park(c, std::move(p), now);
    ++job.joiners;

    if (in.world_size != gen.world_size) {
      fail_generation(job, in.generation, gen, CC_ERR_MISMATCH,
                      "ranks disagree on the world size of " + where + ": " + gen.first + " said " +
                          std::to_string(gen.world_size) + ", " + me + " said " +
                          std::to_string(in.world_size) + "; give every rank the same WORLD_SIZE");
      return true;
    }
    if (in.rank < 0 || in.rank >= gen.world_size) {
      fail_generation(job, in.generation, gen, CC_ERR_INVALID_ARGUMENT,
                      me + " is out of range for " + where + " of " +
                          std::to_string(gen.world_size) + " ranks (valid: 0-" +
                          std::to_string(gen.world_size - 1) + "); check RANK and WORLD_SIZE");
      return true;
    }
    if (auto taken = gen.slots.find(in.rank); taken != gen.slots.end()) {
      const Slot& slot = taken->second;
      fail_generation(job, in.generation, gen, CC_ERR_MISMATCH,
                      "rank " + std::to_string(in.rank) + " of " + where +
                          " was claimed twice: by " + slot_who(slot.info) + " and by " + me +
                          "; give every process its own RANK");
      return true;
    }
    if (in.nccl_version / 100 != gen.nccl_major_minor) {
      auto r = gen.slots.find(gen.nccl_rank);
      const MemberInfo ref = r != gen.slots.end() ? r->second.info : MemberInfo{};
      fail_generation(job, in.generation, gen, CC_ERR_MISMATCH,
                      "ranks of " + where + " load different NCCL versions: rank " +
                          std::to_string(gen.nccl_rank) + " has " + nccl_text(gen.nccl_version) +
                          (ref.host.empty() ? "" : " on " + ref.host) + ", " + me + " has " +
                          nccl_text(in.nccl_version) +
                          "; install the same NCCL major.minor everywhere");
      return true;
    }
    if (!in.gpu_uuid.empty()) {
      auto [owner, added] = gen.gpu_owner.try_emplace(in.host + "\n" + in.gpu_uuid, in.rank);
      if (!added) {
        const MemberInfo& other = gen.slots.at(owner->second).info;
        fail_generation(job, in.generation, gen, CC_ERR_MISMATCH,
                        slot_who(other) + " and " + me + " of " + where + " use the same GPU " +
                            in.gpu_uuid +
                            "; give each local rank its own device (LOCAL_RANK, CC_DEVICE)");
        return true;
      }
    }
    Slot& slot = gen.slots[in.rank];
    slot.conn = c.id;
    slot.parked = id;
    slot.info = in;
    if (in.rank == 0) gen.unique_id = j.unique_id;
    if (std::string note = nat_notice(in, c.peer); !note.empty()) {
      log().warn("{}: {}", where, note);
      gen.notice += (gen.notice.empty() ? "" : "\n") + note;
    }
    ++gen.joined;
    log().debug("{}: {} joined ({} of {})", where, me, gen.joined, gen.world_size);
    if (gen.joined == gen.world_size) complete(job, in.generation, gen, now);
    return true;
  }

  void complete(Job& job, uint32_t generation, Generation& gen, Clock::time_point now) {
    gen.state = Generation::State::complete;
    Joined joined;
    joined.unique_id = gen.unique_id;
    joined.notice = gen.notice;
    joined.members.reserve(gen.slots.size());
    for (int32_t r = 0; r < gen.world_size; ++r) {
      const MemberInfo& i = gen.slots.at(r).info;
      joined.members.push_back({i.rank, i.host, i.pid});
    }
    for (auto& [rank, s] : gen.slots) {
      auto pit = parked.find(s.parked);
      const uint32_t rid = pit != parked.end() ? pit->second.request_id : 0;
      finish_parked(s.parked);
      --job.joiners;
      s.parked = 0;
      Conn& c = *conns.at(s.conn);
      c.memberships.push_back({generation, s.info.rank, s.info.host, s.info.pid, 0});
      job.members.insert(c.id);
      c.last_heartbeat = now;
      if (heartbeat_window(c).count() > 0)
        arm(c.heartbeat_timer, now + heartbeat_window(c), DeadlineKind::heartbeat, c.id);
      send(c.id, rid, joined);
    }
    gen.gpu_owner.clear();
    log().info("job {} (generation {}): all {} ranks joined", quote(job.id), generation,
               gen.world_size);
  }

  void fail_generation(Job& job, uint32_t generation, Generation& gen, cc_result_t code,
                       const std::string& words) {
    gen.state = Generation::State::failed;
    gen.failure = words;
    log().warn("job {} (generation {}) failed: {}", quote(job.id), generation, words);
    std::vector<uint64_t> ids;
    for (const auto& [id, p] : parked)
      if (p.kind == Parked::Kind::join && p.job == &job && p.generation == generation)
        ids.push_back(id);
    for (uint64_t id : ids) {
      send_error(parked.at(id).conn, parked.at(id).request_id, code, words);
      finish_parked(id);
      --job.joiners;
    }
    gen.slots.clear();
    gen.gpu_owner.clear();
    maybe_idle(job);
  }

  void join_timeout(Job& job, const Parked& p) {
    Generation& gen = job.generations[p.generation];
    std::vector<int32_t> missing;
    for (int32_t r = 0; r < gen.world_size; ++r)
      if (!gen.slots.count(r)) missing.push_back(r);
    const std::string words =
        std::string(missing.size() == 1 ? "rank " : "ranks ") + rank_ranges(missing) + " of " +
        std::to_string(gen.world_size) + " never joined job " + quote(job.id) + " (generation " +
        std::to_string(p.generation) + ") within " + std::to_string(p.timeout_ms) + " ms (" +
        std::to_string(gen.joined) + " joined); check that " +
        (missing.size() == 1 ? "it" : "they") +
        " started, use the same MASTER_ADDR, MASTER_PORT and job id, and can reach the server";
    fail_generation(job, p.generation, gen, CC_ERR_TIMEOUT, words);
  }
};

ServerCore::ServerCore(const ServerOptions& options, Sink& sink)
    : impl_(std::make_unique<Impl>(options, sink)) {}
ServerCore::~ServerCore() = default;

bool ServerCore::on_connect(ConnId conn, const std::string& peer, Clock::time_point now) {
  return impl_->on_connect(conn, peer, now);
}
void ServerCore::on_bytes(ConnId conn, std::span<const uint8_t> bytes, Clock::time_point now) {
  impl_->on_bytes(conn, bytes, now);
}
void ServerCore::on_disconnect(ConnId conn, const std::string& reason) {
  impl_->on_disconnect(conn, reason);
}
void ServerCore::expire(Clock::time_point now) { impl_->expire(now); }
std::optional<Clock::time_point> ServerCore::next_deadline() const {
  if (impl_->deadlines.empty()) return std::nullopt;
  return impl_->deadlines.begin()->first;
}
void ServerCore::stop() { impl_->stop(); }
size_t ServerCore::connection_count() const { return impl_->conns.size(); }
size_t ServerCore::job_count() const { return impl_->jobs.size(); }
bool ServerCore::job_exists(const std::string& job_id) const {
  return impl_->jobs.count(job_id) != 0;
}
bool ServerCore::job_busy(const std::string& job_id) const {
  auto it = impl_->jobs.find(job_id);
  return it != impl_->jobs.end() && (!it->second->members.empty() || it->second->joiners > 0);
}
std::map<int32_t, uint64_t> ServerCore::member_progress(const std::string& job_id,
                                                        uint32_t generation) const {
  std::map<int32_t, uint64_t> out;
  auto it = impl_->jobs.find(job_id);
  if (it == impl_->jobs.end()) return out;
  for (ConnId id : it->second->members) {
    auto c = impl_->conns.find(id);
    if (c == impl_->conns.end()) continue;
    for (const Membership& m : c->second->memberships)
      if (m.generation == generation) out[m.rank] = m.last_completed;
  }
  return out;
}

}  // namespace cc::rv
