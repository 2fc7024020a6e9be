#include "rendezvous/protocol.hpp"

#include <algorithm>
#include <concepts>
#include <cstring>
#include <iterator>
#include <tuple>
#include <type_traits>
#include <utility>

namespace cc::rv {
namespace {

// ---- primitive writer / reader -------------------------------------------
//
// A message's fields are listed once, in wire order, by `fields(io, m)` below:
// with a Writer it appends them, with a Reader it reads them into m. The two
// classes have the same calls. Bounds (the `max` of a string, bytes or list)
// and io.valid() checks matter to the Reader only: a Writer writes every
// field and returns true.

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}
  bool u8(uint8_t v) { return le(v); }
  bool u32(uint32_t v) { return le(v); }
  bool u64(uint64_t v) { return le(v); }
  bool i32(int32_t v) { return le(static_cast<uint32_t>(v)); }
  bool i64(int64_t v) { return le(static_cast<uint64_t>(v)); }
  bool boolean(bool v) { return u8(v ? 1 : 0); }
  template <typename E>
  bool enum8(E v) {
    return u8(static_cast<uint8_t>(v));
  }
  bool bytes(std::span<const uint8_t> b, uint32_t /*max*/) { return raw(b); }
  bool str(std::string_view s, uint32_t /*max*/) {
    return raw(std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
  }
  bool key(std::string_view s) { return str(s, 0); }
  bool text(std::string_view s) { return str(s, 0); }
  // A list: its count, then each element as `each` writes it.
  template <typename T>
  bool count(const std::vector<T>& v, uint32_t /*max*/) {
    return u32(static_cast<uint32_t>(v.size()));
  }
  template <typename T, typename F>
  bool items(const std::vector<T>& v, F each) {
    for (const T& x : v) each(x);
    return true;
  }
  template <typename T, typename F>
  bool list(const std::vector<T>& v, uint32_t max, F each) {
    return count(v, max) && items(v, each);
  }
  static bool valid(bool) { return true; }
  static bool at_end() { return false; }  // fields appended later are written too
  const Limits& limits() const { return limits_; }
  static uint32_t remaining() { return 0; }

 private:
  template <typename T>
  bool le(T v) {
    for (size_t i = 0; i < sizeof(T); ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return true;
  }
  bool raw(std::span<const uint8_t> b) {
    u32(static_cast<uint32_t>(b.size()));
    out_.insert(out_.end(), b.begin(), b.end());
    return true;
  }
  std::vector<uint8_t>& out_;
  const Limits limits_{};
};

class Reader {
 public:
  Reader(std::span<const uint8_t> in, const Limits& limits) : in_(in), limits_(limits) {}

  bool u8(uint8_t& v) { return le(v); }
  bool u32(uint32_t& v) { return le(v); }
  bool u64(uint64_t& v) { return le(v); }
  bool i32(int32_t& v) {
    uint32_t u = 0;
    if (!le(u)) return false;
    v = static_cast<int32_t>(u);
    return true;
  }
  bool i64(int64_t& v) {
    uint64_t u = 0;
    if (!le(u)) return false;
    v = static_cast<int64_t>(u);
    return true;
  }
  bool boolean(bool& v) {
    uint8_t b = 0;
    if (!le(b)) return false;
    if (b > 1) return fail(DecodeError::bad_field);
    v = b != 0;
    return true;
  }
  // Any byte: io.valid() checks the range where the message's fields say.
  template <typename E>
  bool enum8(E& v) {
    uint8_t b = 0;
    if (!le(b)) return false;
    v = static_cast<E>(b);
    return true;
  }
  bool bytes(std::vector<uint8_t>& v, uint32_t max) {
    uint32_t n = 0;
    if (!length(n, max)) return false;
    v.assign(in_.begin() + static_cast<std::ptrdiff_t>(pos_),
             in_.begin() + static_cast<std::ptrdiff_t>(pos_ + n));
    pos_ += n;
    return true;
  }
  bool str(std::string& v, uint32_t max) {
    uint32_t n = 0;
    if (!length(n, max)) return false;
    v.assign(reinterpret_cast<const char*>(in_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  bool key(std::string& v) {
    if (!str(v, limits_.max_key)) return false;
    if (v.empty()) return fail(DecodeError::bad_field);
    return true;
  }
  bool text(std::string& v) { return str(v, limits_.max_string); }
  // A list of at most `max` elements, each as `each` reads it.
  template <typename T>
  bool count(std::vector<T>& v, uint32_t max) {
    uint32_t n = 0;
    if (!u32(n)) return false;
    if (n > max) return fail(DecodeError::field_too_large);
    v.resize(n);
    return true;
  }
  template <typename T, typename F>
  bool items(std::vector<T>& v, F each) {
    for (T& x : v)
      if (!each(x)) return false;
    return true;
  }
  template <typename T, typename F>
  bool list(std::vector<T>& v, uint32_t max, F each) {
    return count(v, max) && items(v, each);
  }
  bool valid(bool ok) { return ok || fail(DecodeError::bad_field); }

  bool fail(DecodeError e) {
    if (error_ == DecodeError::none) error_ = e;
    return false;
  }
  // True when every byte was read: fields appended to a message later are
  // read only when present, so older frames still decode.
  bool at_end() const { return error_ == DecodeError::none && pos_ == in_.size(); }
  DecodeError finish() {
    if (error_ == DecodeError::none && pos_ != in_.size()) error_ = DecodeError::trailing_bytes;
    return error_;
  }
  const Limits& limits() const { return limits_; }
  // Bytes not read yet: a list of n elements of at least k bytes each needs
  // n <= remaining() / k, checked before anything is allocated for it.
  uint32_t remaining() const { return static_cast<uint32_t>(in_.size() - pos_); }

 private:
  template <typename T>
  bool le(T& v) {
    if (in_.size() - pos_ < sizeof(T)) return fail(DecodeError::truncated);
    T r = 0;
    for (size_t i = 0; i < sizeof(T); ++i)
      r |= static_cast<T>(static_cast<T>(in_[pos_ + i]) << (8 * i));
    pos_ += sizeof(T);
    v = r;
    return true;
  }
  bool length(uint32_t& n, uint32_t max) {
    if (!u32(n)) return false;
    if (n > max) return fail(DecodeError::field_too_large);
    if (in_.size() - pos_ < n) return fail(DecodeError::truncated);
    return true;
  }

  std::span<const uint8_t> in_;
  const Limits& limits_;
  size_t pos_ = 0;
  DecodeError error_ = DecodeError::none;
};

// ---- each message's fields -------------------------------------------------

// M is T, or const T when a Writer writes it.
template <typename M, typename T>
concept Is = std::same_as<std::remove_const_t<M>, T>;

template <typename E>
constexpr bool in_range(E v, E lo, E hi) {
  return lo <= v && v <= hi;
}

// A message without fields: its type is all there is.
template <typename M>
requires std::is_empty_v<M>
bool fields(auto&, M&) { return true; }
bool fields(auto& io, Is<Hello> auto& m) {
  return io.str(m.job_id, io.limits().max_key) && io.text(m.host) && io.u32(m.pid) &&
         io.text(m.client) &&
         (io.at_end() || io.bytes(m.session, kMaxSessionBytes));  // an older client: none
}
bool fields(auto& io, Is<Challenge> auto& m) {
  return io.boolean(m.auth_required) && io.bytes(m.nonce, 256) && io.text(m.server);
}
bool fields(auto& io, Is<Auth> auto& m) { return io.bytes(m.mac, 256); }
bool fields(auto& io, Is<Set> auto& m) {
  return io.key(m.key) && io.bytes(m.value, io.limits().max_value);
}
bool fields(auto& io, Is<Get> auto& m) { return io.key(m.key) && io.u32(m.timeout_ms); }
bool fields(auto& io, Is<Add> auto& m) { return io.key(m.key) && io.i64(m.delta); }
bool fields(auto& io, Is<Wait> auto& m) {
  return io.list(m.keys, io.limits().max_wait_keys, [&](auto& k) { return io.key(k); }) &&
         io.u32(m.timeout_ms);
}
bool fields(auto& io, Is<Del> auto& m) { return io.key(m.key); }
bool fields(auto& io, Is<MemberInfo> auto& i) {
  return io.i32(i.rank) && io.i32(i.world_size) && io.u32(i.comm_number) && io.text(i.host) &&
         io.u32(i.pid) && io.i32(i.nccl_version) && io.i32(i.cuda_driver) &&
         io.i32(i.cuda_runtime) && io.text(i.gpu_uuid) && io.text(i.nccl_addr) &&
         io.text(i.host_key);
}
bool fields(auto& io, Is<Join> auto& m) {
  return fields(io, m.info) && io.bytes(m.unique_id, kMaxUniqueIdBytes) && io.u32(m.timeout_ms) &&
         io.valid(m.info.world_size > 0 && m.info.rank >= 0);
}
bool fields(auto& io, Is<CallPoint> auto& p) {
  return io.enum8(p.line) && io.i32(p.peer) && io.u64(p.seq) && io.u64(p.fingerprint) &&
         io.enum8(p.call.kind) && io.u64(p.call.count) && io.i32(p.call.dtype) &&
         io.i32(p.call.op) && io.i32(p.call.root) && io.boolean(p.call.in_place) &&
         io.valid(p.line <= CallPoint::Line::replay &&
                  static_cast<uint8_t>(p.call.kind) <= kLastCallKind);
}
bool fields(auto& io, Is<Heartbeat> auto& m) {
  return io.u64(m.last_completed) &&
         (io.at_end() ||  // an older client
          (io.u32(m.comm_number) && io.u32(m.generation) &&
           io.list(m.calls, kMaxHeartbeatCalls, [&](auto& p) { return fields(io, p); }))) &&
         (io.at_end() ||  // a client without split lines
          (io.u32(m.split) && io.i32(m.split_color) && io.i32(m.split_rank) &&
           io.valid(m.split == 0 || m.split_rank >= 0))) &&
         (io.at_end() || io.u64(m.answers));  // a client that answers no CallsWanted
}
bool fields(auto& io, Is<CallsEnd> auto& m) {
  return io.u32(m.comm_number) && io.u32(m.generation) && io.u64(m.last) &&
         io.list(m.calls, kMaxHeartbeatCalls, [&](auto& p) { return fields(io, p); }) &&
         io.u64(m.answers) && io.u32(m.timeout_ms) &&
         (io.at_end() ||  // a client without split lines
          (io.u32(m.split) && io.i32(m.split_color) && io.i32(m.split_rank) &&
           io.i32(m.split_ranks) &&
           io.valid(m.split == 0 || (m.split_rank >= 0 && m.split_rank < m.split_ranks)))) &&
         (io.at_end() || io.u64(m.last_replay));  // a client that counts no graph replays
}
bool fields(auto& io, Is<CallsWanted> auto& m) {
  return io.u32(m.comm_number) && io.u32(m.generation) && io.u32(m.split) &&
         io.i32(m.split_color) && io.u64(m.id) && io.u64(m.after) && io.u64(m.through) &&
         io.valid(m.after <= m.through);
}
bool fields(auto& io, Is<Abort> auto& m) { return io.text(m.reason); }
// Error texts may be long (they list missing ranks): allow a whole frame.
bool fields(auto& io, Is<Error> auto& m) {
  return io.u32(m.code) && io.str(m.message, io.limits().max_frame);
}
bool fields(auto& io, Is<Value> auto& m) { return io.bytes(m.value, io.limits().max_value); }
bool fields(auto& io, Is<Integer> auto& m) { return io.i64(m.value); }
bool fields(auto& io, Is<Joined> auto& m) {
  const Limits& l = io.limits();
  auto member = [&](auto& s) { return io.i32(s.rank) && io.text(s.host) && io.u32(s.pid); };
  auto rank = [&](auto& f) { return io.i32(f); };
  return io.bytes(m.unique_id, kMaxUniqueIdBytes) && io.list(m.members, l.max_frame / 9, member) &&
         io.str(m.notice, l.max_frame) &&
         (io.at_end() ||  // a server without recovery
          (io.u32(m.generation) && io.i32(m.rank) && io.list(m.failed, l.max_frame / 4, rank) &&
           io.enum8(m.method) && io.valid(m.method <= RecoverMethod::nccl_shrink))) &&
         (io.at_end() || io.u32(m.world_size)) &&  // an older server: 0
         (io.at_end() || io.bytes(m.seat, kMaxSeatBytes));  // an older server: none
}
bool fields(auto& io, Is<PeerEvent> auto& m) {
  return io.enum8(m.kind) && io.i32(m.rank) && io.text(m.host) && io.u32(m.pid) &&
         io.text(m.reason) &&
         io.valid(in_range(m.kind, PeerEventKind::failed, PeerEventKind::mismatch)) &&
         (io.at_end() || (io.u32(m.split) && io.i32(m.split_color))) &&  // an older server: 0
         (io.at_end() || io.list(m.with, static_cast<uint32_t>(kMaxPeerEventWith),
                                 [&](auto& rank) { return io.i32(rank); }));
}
bool fields(auto& io, Is<HeartbeatWindow> auto& m) { return io.u32(m.window_ms); }
bool fields(auto& io, Is<ProgressQuery> auto& m) {
  return io.u32(m.comm_number) && io.i32(m.rank) &&
         (io.at_end() || io.u32(m.generation)) &&  // older clients send no generation
         (io.at_end() || io.boolean(m.with_calls));
}
bool fields(auto& io, Is<Progress> auto& m) {
  return io.list(m.members, io.limits().max_frame / 24, [&](auto& p) {
    return io.i32(p.rank) && io.text(p.host) && io.u32(p.pid) && io.u64(p.last_completed) &&
           io.u32(p.silent_ms);
  }) && (io.at_end() || io.str(m.calls, io.limits().max_frame));
}
bool fields(auto& io, Is<CompareSet> auto& m) {
  const uint32_t max = io.limits().max_value;
  return io.key(m.key) && io.boolean(m.has_expected) && io.bytes(m.expected, max) &&
         io.bytes(m.value, max) && io.valid(m.has_expected || m.expected.empty());
}
bool fields(auto& io, Is<CompareSetResult> auto& m) { return io.boolean(m.swapped); }
bool fields(auto& io, Is<Recover> auto& m) {
  return fields(io, m.info) && io.u32(m.generation) && io.enum8(m.kind) && io.i32(m.nranks) &&
         io.boolean(m.can_shrink) && io.u32(m.timeout_ms) &&
         (io.at_end() || io.bytes(m.seat, kMaxSeatBytes)) &&  // an older client: none
         io.valid(in_range(m.kind, RecoverKind::shrink, RecoverKind::regrow) && m.info.rank >= 0 &&
                  m.info.world_size > 0) &&
         io.valid(m.kind != RecoverKind::regrow || m.nranks > 0);
}
bool fields(auto& io, Is<Resume> auto& m) {
  return fields(io, m.info) && io.u32(m.generation) && io.i32(m.rank) && io.i32(m.world_size) &&
         io.u32(m.heartbeat_window_ms) && io.u64(m.last_completed) &&
         io.bytes(m.unique_id, kMaxUniqueIdBytes) &&
         (io.at_end() || io.bytes(m.seat, kMaxSeatBytes)) &&  // an older client: none
         io.valid(m.info.rank >= 0 && m.world_size > 0 && m.rank >= 0 && m.rank < m.world_size);
}
bool fields(auto& io, Is<RecoverId> auto& m) {
  return io.u32(m.generation) && io.bytes(m.unique_id, kMaxUniqueIdBytes) && io.u32(m.timeout_ms);
}
bool fields(auto& io, Is<RecoverIdWanted> auto& m) { return io.u32(m.generation); }
bool fields(auto& io, Is<StatusQuery> auto& m) { return io.str(m.job_id, io.limits().max_key); }
bool fields(auto& io, Is<MemberStatus> auto& m) {
  return io.i32(m.rank) && io.enum8(m.state) && io.text(m.host) && io.u32(m.pid) &&
         io.text(m.peer) && io.text(m.nccl_addr) && io.u64(m.last_completed) &&
         io.u32(m.heartbeat_age_ms) && io.u32(m.heartbeat_window_ms) && io.text(m.reason) &&
         io.valid(in_range(m.state, MemberState::joining, MemberState::aborted));
}
// The state is checked once the count of missing ranks is read, before them.
bool fields(auto& io, Is<CommStatus> auto& g) {
  return io.u32(g.comm_number) && io.enum8(g.state) && io.i32(g.world_size) && io.i32(g.joined) &&
         io.text(g.failure) && io.count(g.missing, io.remaining() / 4) &&
         io.valid(in_range(g.state, JoinState::joining, JoinState::failed)) &&
         io.items(g.missing, [&](auto& rank) { return io.i32(rank); }) &&
         io.list(g.members, io.remaining() / 41, [&](auto& s) { return fields(io, s); });
}
bool fields(auto& io, Is<JobStatus> auto& j) {
  return io.str(j.id, io.limits().max_key) && io.u32(j.connections) && io.u32(j.keys) &&
         io.u64(j.bytes) && io.u64(j.expires_in_ms) &&
         io.list(j.comms, io.remaining() / 25, [&](auto& g) { return fields(io, g); });
}
bool fields(auto& io, Is<StatusReport> auto& m) {
  return io.text(m.server) && io.u64(m.uptime_ms) && io.u32(m.jobs_total) &&
         io.u32(m.members_omitted) && io.u64(m.store_bytes) && io.u64(m.store_bytes_limit) &&
         io.list(m.jobs, io.remaining() / 32, [&](auto& j) { return fields(io, j); });
}
// A rank's own message may be long (NCCL's last error): allow a whole frame.
bool fields(auto& io, Is<InitFailed> auto& m) {
  return io.u32(m.comm_number) && io.str(m.reason, io.limits().max_frame);
}
bool fields(auto& io, Is<PreflightReady> auto& m) {
  return io.u32(m.comm_number) && io.boolean(m.enabled) && io.text(m.host_key) && io.text(m.addr) &&
         io.u32(m.port) && io.text(m.ifname) && io.text(m.user_ifname) && io.text(m.route_ifname) &&
         io.text(m.route_addr) && io.u32(m.timeout_ms) && io.valid(m.port <= 65535);
}
bool fields(auto& io, Is<PreflightReport> auto& m) {
  return io.u32(m.comm_number) &&
         io.list(m.results, static_cast<uint32_t>(kMaxProbeTargets),
                 [&](auto& p) {
                   return io.i32(p.rank) && io.boolean(p.reached) && io.i32(p.error) &&
                          io.text(p.words);
                 }) &&
         io.u32(m.timeout_ms);
}
// The step is checked once the count of targets is read, before them.
bool fields(auto& io, Is<PreflightPlan> auto& m) {
  return io.enum8(m.step) && io.str(m.note, io.limits().max_frame) &&
         io.count(m.targets, static_cast<uint32_t>(kMaxProbeTargets)) &&
         io.valid(in_range(m.step, PreflightStep::probe, PreflightStep::skipped)) &&
         io.items(m.targets, [&](auto& t) {
           return io.i32(t.rank) && io.text(t.host) && io.u32(t.pid) && io.text(t.addr) &&
                  io.u32(t.port);
         });
}

// Each entry is at least kRelayEntryOverhead bytes: the count is bounded by
// what is left of the frame before anything is allocated.
bool fields(auto& io, Is<Relay> auto& m) {
  return io.list(m.entries, io.remaining() / static_cast<uint32_t>(kRelayEntryOverhead),
                 [&](auto& e) {
                   return io.u32(e.channel) && io.enum8(e.op) &&
                          io.valid(in_range(e.op, RelayOp::open, RelayOp::close)) &&
                          io.bytes(e.data, io.limits().max_frame);
                 });
}

// ---- message types -------------------------------------------------------

// A message's name as a template argument.
template <size_t N>
struct Name {
  constexpr Name(const char (&s)[N]) { std::copy_n(s, N, text); }
  char text[N];
};
template <MsgType Type, typename T, Name N>
struct Kind {
  static constexpr MsgType type = Type;
  static constexpr const char* name = N.text;
  using message = T;
};
// Every message: its type on the wire, its struct and its name in logs.
// clang-format off
using Kinds = std::tuple<
    Kind<MsgType::hello, Hello, "hello">,
    Kind<MsgType::auth, Auth, "auth">,
    Kind<MsgType::set, Set, "set">,
    Kind<MsgType::get, Get, "get">,
    Kind<MsgType::add, Add, "add">,
    Kind<MsgType::wait, Wait, "wait">,
    Kind<MsgType::del, Del, "delete">,
    Kind<MsgType::join, Join, "join">,
    Kind<MsgType::leave, Leave, "leave">,
    Kind<MsgType::heartbeat, Heartbeat, "heartbeat">,
    Kind<MsgType::abort, Abort, "abort">,
    Kind<MsgType::challenge, Challenge, "challenge">,
    Kind<MsgType::ok, Ok, "ok">,
    Kind<MsgType::error, Error, "error">,
    Kind<MsgType::value, Value, "value">,
    Kind<MsgType::integer, Integer, "integer">,
    Kind<MsgType::joined, Joined, "joined">,
    Kind<MsgType::peer_event, PeerEvent, "peer-event">,
    Kind<MsgType::heartbeat_ack, HeartbeatAck, "heartbeat-ack">,
    Kind<MsgType::heartbeat_window, HeartbeatWindow, "heartbeat-window">,
    Kind<MsgType::progress_query, ProgressQuery, "progress-query">,
    Kind<MsgType::progress, Progress, "progress">,
    Kind<MsgType::compare_set, CompareSet, "compare-set">,
    Kind<MsgType::compare_set_result, CompareSetResult, "compare-set-result">,
    Kind<MsgType::recover, Recover, "recover">,
    Kind<MsgType::recover_id, RecoverId, "recover-id">,
    Kind<MsgType::recover_id_wanted, RecoverIdWanted, "recover-id-wanted">,
    Kind<MsgType::status_query, StatusQuery, "status-query">,
    Kind<MsgType::status_report, StatusReport, "status-report">,
    Kind<MsgType::init_failed, InitFailed, "init-failed">,
    Kind<MsgType::preflight_ready, PreflightReady, "preflight-ready">,
    Kind<MsgType::preflight_report, PreflightReport, "preflight-report">,
    Kind<MsgType::preflight_plan, PreflightPlan, "preflight-plan">,
    Kind<MsgType::relay, Relay, "relay">,
    Kind<MsgType::resume, Resume, "resume">,
    Kind<MsgType::calls_end, CallsEnd, "calls-end">,
    Kind<MsgType::calls_wanted, CallsWanted, "calls-wanted">>;
// clang-format on
static_assert(std::tuple_size_v<Kinds> == std::variant_size_v<Message>);

template <typename T, typename... K>
constexpr MsgType type_in(std::tuple<K...>*) {
  static_assert((std::is_same_v<T, typename K::message> + ...) == 1, "each message has one Kind");
  MsgType t{};
  (void)((std::is_same_v<T, typename K::message> && (t = K::type, true)) || ...);
  return t;
}
template <typename T>
constexpr MsgType kType = type_in<T>(static_cast<Kinds*>(nullptr));

// Calls f with the Kind of type t, if there is one.
template <typename F>
void with_kind(MsgType t, F f) {
  [&]<typename... K>(std::tuple<K...>*) {
    (void)((t == K::type && (f(K{}), true)) || ...);
  }(static_cast<Kinds*>(nullptr));
}

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}
uint16_t get_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }

template <typename T>
DecodeError decode_as(std::span<const uint8_t> payload, const Limits& limits, Message* out) {
  Reader r(payload, limits);
  T m{};
  fields(r, m);
  DecodeError e = r.finish();
  if (e == DecodeError::none) *out = std::move(m);
  return e;
}

}  // namespace

MsgType type_of(const Message& m) {
  return std::visit([](const auto& v) { return kType<std::decay_t<decltype(v)>>; }, m);
}

const char* type_name(MsgType t) {
  const char* name = "unknown";
  with_kind(t, [&](auto k) { name = k.name; });
  return name;
}

const char* describe(DecodeError e) {
  static constexpr std::pair<DecodeError, const char*> kWords[] = {
      {DecodeError::none, "no error"},
      {DecodeError::bad_magic,
       "bad magic (not a cc rendezvous frame: is another program using this port?)"},
      {DecodeError::bad_version,
       "unsupported protocol version (client and server are different cc versions)"},
      {DecodeError::frame_too_large, "frame length over the maximum frame size"},
      {DecodeError::truncated, "truncated message (a field runs past the end of the frame)"},
      {DecodeError::trailing_bytes, "trailing bytes after the message"},
      {DecodeError::unknown_type, "unknown message type"},
      {DecodeError::field_too_large, "a key, value, string or list over its size limit"},
      {DecodeError::bad_field, "a field with an invalid value"},
  };
  static_assert(std::size(kWords) == static_cast<size_t>(DecodeError::bad_field) + 1);
  for (const auto& [error, words] : kWords)
    if (error == e) return words;
  return "unknown decode error";
}

DecodeError parse_header(std::span<const uint8_t> b, const Limits& limits, FrameHeader* out) {
  if (b.size() < kHeaderSize) return DecodeError::truncated;
  FrameHeader h;
  h.magic = get_u32(b.data());
  h.version = get_u16(b.data() + 4);
  h.type = get_u16(b.data() + 6);
  h.request_id = get_u32(b.data() + 8);
  h.length = get_u32(b.data() + 12);
  *out = h;
  if (h.magic != kMagic) return DecodeError::bad_magic;
  if (h.version != kProtocolVersion) return DecodeError::bad_version;
  if (h.length > limits.max_frame) return DecodeError::frame_too_large;
  return DecodeError::none;
}

namespace {

// Writes the header of the frame whose payload runs from start +
// kHeaderSize to the end of out.
void finish_header(std::vector<uint8_t>& out, size_t start, MsgType type, uint32_t request_id) {
  uint8_t* h = out.data() + start;
  put_u32(h, kMagic);
  h[4] = static_cast<uint8_t>(kProtocolVersion);
  h[5] = static_cast<uint8_t>(kProtocolVersion >> 8);
  const auto t = static_cast<uint16_t>(type);
  h[6] = static_cast<uint8_t>(t);
  h[7] = static_cast<uint8_t>(t >> 8);
  put_u32(h + 8, request_id);
  put_u32(h + 12, static_cast<uint32_t>(out.size() - start - kHeaderSize));
}

}  // namespace

void append_frame(std::vector<uint8_t>& out, uint32_t request_id, const Message& m) {
  const size_t start = out.size();
  out.resize(start + kHeaderSize);
  Writer w(out);
  std::visit([&](const auto& v) { fields(w, v); }, m);
  finish_header(out, start, type_of(m), request_id);
}

void append_value_frame(std::vector<uint8_t>& out, uint32_t request_id,
                        std::span<const uint8_t> value) {
  const size_t start = out.size();
  out.resize(start + kHeaderSize);
  Writer w(out);
  w.bytes(value, 0);
  finish_header(out, start, MsgType::value, request_id);
}

std::vector<uint8_t> encode_frame(uint32_t request_id, const Message& m) {
  std::vector<uint8_t> out;
  append_frame(out, request_id, m);
  return out;
}

DecodeError decode_message(uint16_t type, std::span<const uint8_t> payload, const Limits& limits,
                           Message* out) {
  DecodeError e = DecodeError::unknown_type;
  with_kind(static_cast<MsgType>(type),
            [&](auto k) { e = decode_as<typename decltype(k)::message>(payload, limits, out); });
  return e;
}

void FrameReader::feed(std::span<const uint8_t> bytes) {
  if (error_ != DecodeError::none) return;
  // Drop consumed bytes before growing, so the buffer never exceeds one frame
  // plus what arrived with it.
  if (pos_ > 0 && (pos_ == buf_.size() || pos_ > 64 * 1024)) {
    buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(pos_));
    pos_ = 0;
  }
  // A large frame's room is given back once it is taken, so a connection
  // that sent one holds no more than any other.
  if (buf_.empty() && buf_.capacity() > 64 * 1024) std::vector<uint8_t>().swap(buf_);
  buf_.insert(buf_.end(), bytes.begin(), bytes.end());
}

std::optional<FrameReader::Frame> FrameReader::next() {
  if (error_ != DecodeError::none) return std::nullopt;
  const size_t avail = buf_.size() - pos_;
  if (avail < kHeaderSize) {
    // Check the magic as soon as its bytes are here, so a stranger talking
    // another protocol is refused at once rather than at the deadline.
    const size_t n = avail < 4 ? avail : 4;
    for (size_t i = 0; i < n; ++i) {
      if (buf_[pos_ + i] != static_cast<uint8_t>(kMagic >> (8 * i))) {
        error_ = DecodeError::bad_magic;
        return std::nullopt;
      }
    }
    return std::nullopt;
  }
  FrameHeader h;
  std::span<const uint8_t> all(buf_.data() + pos_, avail);
  DecodeError e = parse_header(all.first(kHeaderSize), limits_, &h);
  if (e != DecodeError::none) {
    error_ = e;
    return std::nullopt;
  }
  if (avail < kHeaderSize + h.length) return std::nullopt;
  Frame f;
  f.request_id = h.request_id;
  e = decode_message(h.type, all.subspan(kHeaderSize, h.length), limits_, &f.message);
  if (e != DecodeError::none) {
    error_ = e;
    return std::nullopt;
  }
  pos_ += kHeaderSize + h.length;
  return f;
}

}  // namespace cc::rv
