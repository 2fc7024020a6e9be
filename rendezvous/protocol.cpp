#include "rendezvous/protocol.hpp"

#include <cstring>
#include <type_traits>

namespace cc::rv {
namespace {

// ---- primitive writer / reader -------------------------------------------

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) { le(v); }
  void u32(uint32_t v) { le(v); }
  void u64(uint64_t v) { le(v); }
  void i32(int32_t v) { le(static_cast<uint32_t>(v)); }
  void i64(int64_t v) { le(static_cast<uint64_t>(v)); }
  void bytes(std::span<const uint8_t> b) {
    u32(static_cast<uint32_t>(b.size()));
    out_.insert(out_.end(), b.begin(), b.end());
  }
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
  }
  // A list: its count, then each element as put_one writes it.
  template <typename T, typename F>
  void list(const std::vector<T>& v, F put_one) {
    u32(static_cast<uint32_t>(v.size()));
    for (const T& x : v) put_one(x);
  }

 private:
  template <typename T>
  void le(T v) {
    for (size_t i = 0; i < sizeof(T); ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t>& out_;
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
  bool count(uint32_t& n, uint32_t max) {
    if (!u32(n)) return false;
    if (n > max) return fail(DecodeError::field_too_large);
    return true;
  }
  // A list of at most `max` elements, each as get_one reads it.
  template <typename T, typename F>
  bool list(std::vector<T>& v, uint32_t max, F get_one) {
    uint32_t n = 0;
    if (!count(n, max)) return false;
    v.resize(n);
    for (T& x : v)
      if (!get_one(x)) return false;
    return true;
  }

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

// ---- per-message encode/decode -------------------------------------------

template <typename T>
struct Codec;

// A message without fields: its type is all there is.
template <typename T, MsgType Type>
struct EmptyCodec {
  static constexpr MsgType type = Type;
  static void put(Writer&, const T&) {}
  static bool get(Reader&, T&) { return true; }
};

template <>
struct Codec<Hello> {
  static constexpr MsgType type = MsgType::hello;
  static void put(Writer& w, const Hello& m) {
    w.str(m.job_id);
    w.str(m.host);
    w.u32(m.pid);
    w.str(m.client);
  }
  static bool get(Reader& r, Hello& m) {
    return r.str(m.job_id, r.limits().max_key) && r.text(m.host) && r.u32(m.pid) &&
           r.text(m.client);
  }
};
template <>
struct Codec<Challenge> {
  static constexpr MsgType type = MsgType::challenge;
  static void put(Writer& w, const Challenge& m) {
    w.u8(m.auth_required ? 1 : 0);
    w.bytes(m.nonce);
    w.str(m.server);
  }
  static bool get(Reader& r, Challenge& m) {
    return r.boolean(m.auth_required) && r.bytes(m.nonce, 256) && r.text(m.server);
  }
};
template <>
struct Codec<Auth> {
  static constexpr MsgType type = MsgType::auth;
  static void put(Writer& w, const Auth& m) { w.bytes(m.mac); }
  static bool get(Reader& r, Auth& m) { return r.bytes(m.mac, 256); }
};
template <>
struct Codec<Set> {
  static constexpr MsgType type = MsgType::set;
  static void put(Writer& w, const Set& m) {
    w.str(m.key);
    w.bytes(m.value);
  }
  static bool get(Reader& r, Set& m) {
    return r.key(m.key) && r.bytes(m.value, r.limits().max_value);
  }
};
template <>
struct Codec<Get> {
  static constexpr MsgType type = MsgType::get;
  static void put(Writer& w, const Get& m) {
    w.str(m.key);
    w.u32(m.timeout_ms);
  }
  static bool get(Reader& r, Get& m) { return r.key(m.key) && r.u32(m.timeout_ms); }
};
template <>
struct Codec<Add> {
  static constexpr MsgType type = MsgType::add;
  static void put(Writer& w, const Add& m) {
    w.str(m.key);
    w.i64(m.delta);
  }
  static bool get(Reader& r, Add& m) { return r.key(m.key) && r.i64(m.delta); }
};
template <>
struct Codec<Wait> {
  static constexpr MsgType type = MsgType::wait;
  static void put(Writer& w, const Wait& m) {
    w.list(m.keys, [&](const std::string& k) { w.str(k); });
    w.u32(m.timeout_ms);
  }
  static bool get(Reader& r, Wait& m) {
    return r.list(m.keys, r.limits().max_wait_keys, [&](std::string& k) { return r.key(k); }) &&
           r.u32(m.timeout_ms);
  }
};
template <>
struct Codec<Del> {
  static constexpr MsgType type = MsgType::del;
  static void put(Writer& w, const Del& m) { w.str(m.key); }
  static bool get(Reader& r, Del& m) { return r.key(m.key); }
};
void put_info(Writer& w, const MemberInfo& i) {
  w.i32(i.rank);
  w.i32(i.world_size);
  w.u32(i.generation);
  w.str(i.host);
  w.u32(i.pid);
  w.i32(i.nccl_version);
  w.i32(i.cuda_driver);
  w.i32(i.cuda_runtime);
  w.str(i.gpu_uuid);
  w.str(i.nccl_addr);
}
bool get_info(Reader& r, MemberInfo& i) {
  return r.i32(i.rank) && r.i32(i.world_size) && r.u32(i.generation) && r.text(i.host) &&
         r.u32(i.pid) && r.i32(i.nccl_version) && r.i32(i.cuda_driver) && r.i32(i.cuda_runtime) &&
         r.text(i.gpu_uuid) && r.text(i.nccl_addr);
}

template <>
struct Codec<Join> {
  static constexpr MsgType type = MsgType::join;
  static void put(Writer& w, const Join& m) {
    put_info(w, m.info);
    w.bytes(m.unique_id);
    w.u32(m.timeout_ms);
  }
  static bool get(Reader& r, Join& m) {
    const MemberInfo& i = m.info;
    if (!(get_info(r, m.info) && r.bytes(m.unique_id, 1024) && r.u32(m.timeout_ms))) return false;
    if (i.world_size <= 0 || i.rank < 0) return r.fail(DecodeError::bad_field);
    return true;
  }
};
template <>
struct Codec<Leave> : EmptyCodec<Leave, MsgType::leave> {};
template <>
struct Codec<Heartbeat> {
  static constexpr MsgType type = MsgType::heartbeat;
  static void put(Writer& w, const Heartbeat& m) { w.u64(m.last_completed); }
  static bool get(Reader& r, Heartbeat& m) { return r.u64(m.last_completed); }
};
template <>
struct Codec<Abort> {
  static constexpr MsgType type = MsgType::abort;
  static void put(Writer& w, const Abort& m) { w.str(m.reason); }
  static bool get(Reader& r, Abort& m) { return r.text(m.reason); }
};
template <>
struct Codec<Ok> : EmptyCodec<Ok, MsgType::ok> {};
template <>
struct Codec<Error> {
  static constexpr MsgType type = MsgType::error;
  static void put(Writer& w, const Error& m) {
    w.u32(m.code);
    w.str(m.message);
  }
  // Error texts may be long (they list missing ranks): allow a whole frame.
  static bool get(Reader& r, Error& m) {
    return r.u32(m.code) && r.str(m.message, r.limits().max_frame);
  }
};
template <>
struct Codec<Value> {
  static constexpr MsgType type = MsgType::value;
  static void put(Writer& w, const Value& m) { w.bytes(m.value); }
  static bool get(Reader& r, Value& m) { return r.bytes(m.value, r.limits().max_value); }
};
template <>
struct Codec<Integer> {
  static constexpr MsgType type = MsgType::integer;
  static void put(Writer& w, const Integer& m) { w.i64(m.value); }
  static bool get(Reader& r, Integer& m) { return r.i64(m.value); }
};
template <>
struct Codec<Joined> {
  static constexpr MsgType type = MsgType::joined;
  static void put(Writer& w, const Joined& m) {
    w.bytes(m.unique_id);
    w.list(m.members, [&](const auto& s) {
      w.i32(s.rank);
      w.str(s.host);
      w.u32(s.pid);
    });
    w.str(m.notice);
    w.u32(m.epoch);
    w.i32(m.rank);
    w.list(m.failed, [&](int32_t f) { w.i32(f); });
    w.u8(static_cast<uint8_t>(m.method));
  }
  static bool get(Reader& r, Joined& m) {
    auto member = [&](auto& s) { return r.i32(s.rank) && r.text(s.host) && r.u32(s.pid); };
    if (!(r.bytes(m.unique_id, 1024) && r.list(m.members, r.limits().max_frame / 9, member)))
      return false;
    if (!r.str(m.notice, r.limits().max_frame)) return false;
    if (r.at_end()) return true;  // a server without recovery
    uint8_t method = 0;
    if (!(r.u32(m.epoch) && r.i32(m.rank) &&
          r.list(m.failed, r.limits().max_frame / 4, [&](int32_t& f) { return r.i32(f); }) &&
          r.u8(method)))
      return false;
    if (method > 1) return r.fail(DecodeError::bad_field);
    m.method = static_cast<RecoverMethod>(method);
    return true;
  }
};
template <>
struct Codec<PeerEvent> {
  static constexpr MsgType type = MsgType::peer_event;
  static void put(Writer& w, const PeerEvent& m) {
    w.u8(static_cast<uint8_t>(m.kind));
    w.i32(m.rank);
    w.str(m.host);
    w.u32(m.pid);
    w.str(m.reason);
  }
  static bool get(Reader& r, PeerEvent& m) {
    uint8_t k = 0;
    if (!(r.u8(k) && r.i32(m.rank) && r.text(m.host) && r.u32(m.pid) && r.text(m.reason)))
      return false;
    if (k < 1 || k > 5) return r.fail(DecodeError::bad_field);
    m.kind = static_cast<PeerEventKind>(k);
    return true;
  }
};
template <>
struct Codec<HeartbeatAck> : EmptyCodec<HeartbeatAck, MsgType::heartbeat_ack> {};

template <>
struct Codec<Watch> {
  static constexpr MsgType type = MsgType::watch;
  static void put(Writer& w, const Watch& m) { w.u32(m.window_ms); }
  static bool get(Reader& r, Watch& m) { return r.u32(m.window_ms); }
};
template <>
struct Codec<ProgressQuery> {
  static constexpr MsgType type = MsgType::progress_query;
  static void put(Writer& w, const ProgressQuery& m) {
    w.u32(m.generation);
    w.i32(m.rank);
    w.u32(m.epoch);
  }
  static bool get(Reader& r, ProgressQuery& m) {
    if (!(r.u32(m.generation) && r.i32(m.rank))) return false;
    return r.at_end() || r.u32(m.epoch);  // older clients send no epoch
  }
};
template <>
struct Codec<Progress> {
  static constexpr MsgType type = MsgType::progress;
  static void put(Writer& w, const Progress& m) {
    w.list(m.members, [&](const auto& p) {
      w.i32(p.rank);
      w.str(p.host);
      w.u32(p.pid);
      w.u64(p.last_completed);
      w.u32(p.silent_ms);
    });
  }
  static bool get(Reader& r, Progress& m) {
    return r.list(m.members, r.limits().max_frame / 24, [&](auto& p) {
      return r.i32(p.rank) && r.text(p.host) && r.u32(p.pid) && r.u64(p.last_completed) &&
             r.u32(p.silent_ms);
    });
  }
};

template <>
struct Codec<CompareSet> {
  static constexpr MsgType type = MsgType::compare_set;
  static void put(Writer& w, const CompareSet& m) {
    w.str(m.key);
    w.u8(m.has_expected ? 1 : 0);
    w.bytes(m.expected);
    w.bytes(m.value);
  }
  static bool get(Reader& r, CompareSet& m) {
    if (!(r.key(m.key) && r.boolean(m.has_expected) && r.bytes(m.expected, r.limits().max_value) &&
          r.bytes(m.value, r.limits().max_value)))
      return false;
    if (!m.has_expected && !m.expected.empty()) return r.fail(DecodeError::bad_field);
    return true;
  }
};
template <>
struct Codec<CompareSetResult> {
  static constexpr MsgType type = MsgType::compare_set_result;
  static void put(Writer& w, const CompareSetResult& m) { w.u8(m.swapped ? 1 : 0); }
  static bool get(Reader& r, CompareSetResult& m) { return r.boolean(m.swapped); }
};
template <>
struct Codec<Recover> {
  static constexpr MsgType type = MsgType::recover;
  static void put(Writer& w, const Recover& m) {
    put_info(w, m.info);
    w.u32(m.epoch);
    w.u8(static_cast<uint8_t>(m.kind));
    w.i32(m.nranks);
    w.u8(m.can_shrink ? 1 : 0);
    w.u32(m.timeout_ms);
  }
  static bool get(Reader& r, Recover& m) {
    uint8_t kind = 0;
    if (!(get_info(r, m.info) && r.u32(m.epoch) && r.u8(kind) && r.i32(m.nranks) &&
          r.boolean(m.can_shrink) && r.u32(m.timeout_ms)))
      return false;
    if (kind < 1 || kind > 2 || m.info.rank < 0 || m.info.world_size <= 0)
      return r.fail(DecodeError::bad_field);
    m.kind = static_cast<RecoverKind>(kind);
    if (m.kind == RecoverKind::regrow && m.nranks <= 0) return r.fail(DecodeError::bad_field);
    return true;
  }
};
template <>
struct Codec<RecoverId> {
  static constexpr MsgType type = MsgType::recover_id;
  static void put(Writer& w, const RecoverId& m) {
    w.u32(m.epoch);
    w.bytes(m.unique_id);
    w.u32(m.timeout_ms);
  }
  static bool get(Reader& r, RecoverId& m) {
    return r.u32(m.epoch) && r.bytes(m.unique_id, 1024) && r.u32(m.timeout_ms);
  }
};
template <>
struct Codec<RecoverIdWanted> {
  static constexpr MsgType type = MsgType::recover_id_wanted;
  static void put(Writer& w, const RecoverIdWanted& m) { w.u32(m.epoch); }
  static bool get(Reader& r, RecoverIdWanted& m) { return r.u32(m.epoch); }
};
template <>
struct Codec<StatusQuery> {
  static constexpr MsgType type = MsgType::status_query;
  static void put(Writer& w, const StatusQuery& m) { w.str(m.job_id); }
  static bool get(Reader& r, StatusQuery& m) { return r.str(m.job_id, r.limits().max_key); }
};
template <>
struct Codec<StatusReport> {
  static constexpr MsgType type = MsgType::status_report;
  static void put_member(Writer& w, const MemberStatus& m) {
    w.i32(m.rank);
    w.u8(static_cast<uint8_t>(m.state));
    w.str(m.host);
    w.u32(m.pid);
    w.str(m.peer);
    w.str(m.nccl_addr);
    w.u64(m.last_completed);
    w.u32(m.heartbeat_age_ms);
    w.u32(m.watch_window_ms);
    w.str(m.reason);
  }
  static void put(Writer& w, const StatusReport& m) {
    w.str(m.server);
    w.u64(m.uptime_ms);
    w.u32(m.jobs_total);
    w.u32(m.members_omitted);
    w.u64(m.store_bytes);
    w.u64(m.store_bytes_limit);
    w.list(m.jobs, [&](const JobStatus& j) {
      w.str(j.id);
      w.u32(j.connections);
      w.u32(j.keys);
      w.u64(j.bytes);
      w.u64(j.expires_in_ms);
      w.list(j.generations, [&](const GenerationStatus& g) {
        w.u32(g.generation);
        w.u8(static_cast<uint8_t>(g.state));
        w.i32(g.world_size);
        w.i32(g.joined);
        w.str(g.failure);
        w.list(g.missing, [&](int32_t r) { w.i32(r); });
        w.list(g.members, [&](const MemberStatus& s) { put_member(w, s); });
      });
    });
  }
  static bool get_member(Reader& r, MemberStatus& m) {
    uint8_t state = 0;
    if (!(r.i32(m.rank) && r.u8(state) && r.text(m.host) && r.u32(m.pid) && r.text(m.peer) &&
          r.text(m.nccl_addr) && r.u64(m.last_completed) && r.u32(m.heartbeat_age_ms) &&
          r.u32(m.watch_window_ms) && r.text(m.reason)))
      return false;
    if (state < 1 || state > 5) return r.fail(DecodeError::bad_field);
    m.state = static_cast<MemberState>(state);
    return true;
  }
  static bool get_generation(Reader& r, GenerationStatus& g) {
    uint8_t state = 0;
    uint32_t n = 0;
    if (!(r.u32(g.generation) && r.u8(state) && r.i32(g.world_size) && r.i32(g.joined) &&
          r.text(g.failure) && r.count(n, r.remaining() / 4)))
      return false;
    if (state < 1 || state > 3) return r.fail(DecodeError::bad_field);
    g.state = static_cast<GenerationState>(state);
    g.missing.resize(n);
    for (int32_t& rank : g.missing)
      if (!r.i32(rank)) return false;
    return r.list(g.members, r.remaining() / 41, [&](MemberStatus& m) { return get_member(r, m); });
  }
  static bool get(Reader& r, StatusReport& m) {
    return r.text(m.server) && r.u64(m.uptime_ms) && r.u32(m.jobs_total) &&
           r.u32(m.members_omitted) && r.u64(m.store_bytes) && r.u64(m.store_bytes_limit) &&
           r.list(m.jobs, r.remaining() / 32, [&](JobStatus& j) {
             return r.str(j.id, r.limits().max_key) && r.u32(j.connections) && r.u32(j.keys) &&
                    r.u64(j.bytes) && r.u64(j.expires_in_ms) &&
                    r.list(j.generations, r.remaining() / 25,
                           [&](GenerationStatus& g) { return get_generation(r, g); });
           });
  }
};
template <>
struct Codec<InitFailed> {
  static constexpr MsgType type = MsgType::init_failed;
  static void put(Writer& w, const InitFailed& m) {
    w.u32(m.generation);
    w.str(m.reason);
  }
  // A rank's own words may be long (NCCL's last error): allow a whole frame.
  static bool get(Reader& r, InitFailed& m) {
    return r.u32(m.generation) && r.str(m.reason, r.limits().max_frame);
  }
};
template <>
struct Codec<PreflightReady> {
  static constexpr MsgType type = MsgType::preflight_ready;
  static void put(Writer& w, const PreflightReady& m) {
    w.u32(m.generation);
    w.u8(m.enabled ? 1 : 0);
    w.str(m.host_key);
    w.str(m.addr);
    w.u32(m.port);
    w.str(m.ifname);
    w.str(m.user_ifname);
    w.str(m.route_ifname);
    w.str(m.route_addr);
    w.u32(m.timeout_ms);
  }
  static bool get(Reader& r, PreflightReady& m) {
    if (!(r.u32(m.generation) && r.boolean(m.enabled) && r.text(m.host_key) && r.text(m.addr) &&
          r.u32(m.port) && r.text(m.ifname) && r.text(m.user_ifname) && r.text(m.route_ifname) &&
          r.text(m.route_addr) && r.u32(m.timeout_ms)))
      return false;
    if (m.port > 65535) return r.fail(DecodeError::bad_field);
    return true;
  }
};
template <>
struct Codec<PreflightReport> {
  static constexpr MsgType type = MsgType::preflight_report;
  static void put(Writer& w, const PreflightReport& m) {
    w.u32(m.generation);
    w.list(m.results, [&](const auto& p) {
      w.i32(p.rank);
      w.u8(p.reached ? 1 : 0);
      w.i32(p.error);
      w.str(p.words);
    });
    w.u32(m.timeout_ms);
  }
  static bool get(Reader& r, PreflightReport& m) {
    return r.u32(m.generation) &&
           r.list(m.results, static_cast<uint32_t>(kMaxProbeTargets),
                  [&](auto& p) {
                    return r.i32(p.rank) && r.boolean(p.reached) && r.i32(p.error) &&
                           r.text(p.words);
                  }) &&
           r.u32(m.timeout_ms);
  }
};
template <>
struct Codec<PreflightPlan> {
  static constexpr MsgType type = MsgType::preflight_plan;
  static void put(Writer& w, const PreflightPlan& m) {
    w.u8(static_cast<uint8_t>(m.step));
    w.str(m.note);
    w.list(m.targets, [&](const auto& t) {
      w.i32(t.rank);
      w.str(t.host);
      w.u32(t.pid);
      w.str(t.addr);
      w.u32(t.port);
    });
  }
  static bool get(Reader& r, PreflightPlan& m) {
    uint8_t step = 0;
    uint32_t n = 0;
    if (!(r.u8(step) && r.str(m.note, r.limits().max_frame) &&
          r.count(n, static_cast<uint32_t>(kMaxProbeTargets))))
      return false;
    if (step < 1 || step > 3) return r.fail(DecodeError::bad_field);
    m.step = static_cast<PreflightStep>(step);
    m.targets.resize(n);
    for (auto& t : m.targets)
      if (!(r.i32(t.rank) && r.text(t.host) && r.u32(t.pid) && r.text(t.addr) && r.u32(t.port)))
        return false;
    return true;
  }
};

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
  Codec<T>::get(r, m);
  DecodeError e = r.finish();
  if (e == DecodeError::none) *out = std::move(m);
  return e;
}

}  // namespace

MsgType type_of(const Message& m) {
  return std::visit([](const auto& v) { return Codec<std::decay_t<decltype(v)>>::type; }, m);
}

const char* type_name(MsgType t) {
  switch (t) {
    case MsgType::hello:
      return "hello";
    case MsgType::auth:
      return "auth";
    case MsgType::set:
      return "set";
    case MsgType::get:
      return "get";
    case MsgType::add:
      return "add";
    case MsgType::wait:
      return "wait";
    case MsgType::del:
      return "delete";
    case MsgType::join:
      return "join";
    case MsgType::leave:
      return "leave";
    case MsgType::heartbeat:
      return "heartbeat";
    case MsgType::abort:
      return "abort";
    case MsgType::challenge:
      return "challenge";
    case MsgType::ok:
      return "ok";
    case MsgType::error:
      return "error";
    case MsgType::value:
      return "value";
    case MsgType::integer:
      return "integer";
    case MsgType::joined:
      return "joined";
    case MsgType::peer_event:
      return "peer-event";
    case MsgType::heartbeat_ack:
      return "heartbeat-ack";
    case MsgType::watch:
      return "watch";
    case MsgType::progress_query:
      return "progress-query";
    case MsgType::progress:
      return "progress";
    case MsgType::compare_set:
      return "compare-set";
    case MsgType::compare_set_result:
      return "compare-set-result";
    case MsgType::recover:
      return "recover";
    case MsgType::recover_id:
      return "recover-id";
    case MsgType::recover_id_wanted:
      return "recover-id-wanted";
    case MsgType::status_query:
      return "status-query";
    case MsgType::status_report:
      return "status-report";
    case MsgType::init_failed:
      return "init-failed";
    case MsgType::preflight_ready:
      return "preflight-ready";
    case MsgType::preflight_report:
      return "preflight-report";
    case MsgType::preflight_plan:
      return "preflight-plan";
  }
  return "unknown";
}

const char* describe(DecodeError e) {
  switch (e) {
    case DecodeError::none:
      return "no error";
    case DecodeError::bad_magic:
      return "bad magic (not a cc rendezvous frame: is another program using this port?)";
    case DecodeError::bad_version:
      return "unsupported protocol version (client and server are different cc versions)";
    case DecodeError::frame_too_large:
      return "frame length over the maximum frame size";
    case DecodeError::truncated:
      return "truncated message (a field runs past the end of the frame)";
    case DecodeError::trailing_bytes:
      return "trailing bytes after the message";
    case DecodeError::unknown_type:
      return "unknown message type";
    case DecodeError::field_too_large:
      return "a key, value, string or list over its size limit";
    case DecodeError::bad_field:
      return "a field with an invalid value";
  }
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

void append_frame(std::vector<uint8_t>& out, uint32_t request_id, const Message& m) {
  const size_t start = out.size();
  out.resize(start + kHeaderSize);
  Writer w(out);
  std::visit([&](const auto& v) { Codec<std::decay_t<decltype(v)>>::put(w, v); }, m);
  uint8_t* h = out.data() + start;
  put_u32(h, kMagic);
  h[4] = static_cast<uint8_t>(kProtocolVersion);
  h[5] = static_cast<uint8_t>(kProtocolVersion >> 8);
  const auto type = static_cast<uint16_t>(type_of(m));
  h[6] = static_cast<uint8_t>(type);
  h[7] = static_cast<uint8_t>(type >> 8);
  put_u32(h + 8, request_id);
  put_u32(h + 12, static_cast<uint32_t>(out.size() - start - kHeaderSize));
}

std::vector<uint8_t> encode_frame(uint32_t request_id, const Message& m) {
  std::vector<uint8_t> out;
  append_frame(out, request_id, m);
  return out;
}

DecodeError decode_message(uint16_t type, std::span<const uint8_t> payload, const Limits& limits,
                           Message* out) {
  switch (static_cast<MsgType>(type)) {
    case MsgType::hello:
      return decode_as<Hello>(payload, limits, out);
    case MsgType::auth:
      return decode_as<Auth>(payload, limits, out);
    case MsgType::set:
      return decode_as<Set>(payload, limits, out);
    case MsgType::get:
      return decode_as<Get>(payload, limits, out);
    case MsgType::add:
      return decode_as<Add>(payload, limits, out);
    case MsgType::wait:
      return decode_as<Wait>(payload, limits, out);
    case MsgType::del:
      return decode_as<Del>(payload, limits, out);
    case MsgType::join:
      return decode_as<Join>(payload, limits, out);
    case MsgType::leave:
      return decode_as<Leave>(payload, limits, out);
    case MsgType::heartbeat:
      return decode_as<Heartbeat>(payload, limits, out);
    case MsgType::abort:
      return decode_as<Abort>(payload, limits, out);
    case MsgType::challenge:
      return decode_as<Challenge>(payload, limits, out);
    case MsgType::ok:
      return decode_as<Ok>(payload, limits, out);
    case MsgType::error:
      return decode_as<Error>(payload, limits, out);
    case MsgType::value:
      return decode_as<Value>(payload, limits, out);
    case MsgType::integer:
      return decode_as<Integer>(payload, limits, out);
    case MsgType::joined:
      return decode_as<Joined>(payload, limits, out);
    case MsgType::peer_event:
      return decode_as<PeerEvent>(payload, limits, out);
    case MsgType::heartbeat_ack:
      return decode_as<HeartbeatAck>(payload, limits, out);
    case MsgType::watch:
      return decode_as<Watch>(payload, limits, out);
    case MsgType::progress_query:
      return decode_as<ProgressQuery>(payload, limits, out);
    case MsgType::progress:
      return decode_as<Progress>(payload, limits, out);
    case MsgType::compare_set:
      return decode_as<CompareSet>(payload, limits, out);
    case MsgType::compare_set_result:
      return decode_as<CompareSetResult>(payload, limits, out);
    case MsgType::recover:
      return decode_as<Recover>(payload, limits, out);
    case MsgType::recover_id:
      return decode_as<RecoverId>(payload, limits, out);
    case MsgType::recover_id_wanted:
      return decode_as<RecoverIdWanted>(payload, limits, out);
    case MsgType::status_query:
      return decode_as<StatusQuery>(payload, limits, out);
    case MsgType::status_report:
      return decode_as<StatusReport>(payload, limits, out);
    case MsgType::init_failed:
      return decode_as<InitFailed>(payload, limits, out);
    case MsgType::preflight_ready:
      return decode_as<PreflightReady>(payload, limits, out);
    case MsgType::preflight_report:
      return decode_as<PreflightReport>(payload, limits, out);
    case MsgType::preflight_plan:
      return decode_as<PreflightPlan>(payload, limits, out);
  }
  return DecodeError::unknown_type;
}

void FrameReader::feed(std::span<const uint8_t> bytes) {
  if (error_ != DecodeError::none) return;
  // Drop consumed bytes before growing, so the buffer never exceeds one frame
  // plus what arrived with it.
  if (pos_ > 0 && (pos_ == buf_.size() || pos_ > 64 * 1024)) {
    buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(pos_));
    pos_ = 0;
  }
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
