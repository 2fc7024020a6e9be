#include "rendezvous/agent/agent_core.hpp"

#include <algorithm>
#include <utility>

#include "cc/cc.h"
#include "cc/cc_version.h"
#include "common/log.hpp"
#include "common/printable.hpp"
#include "common/who.hpp"
#include "rendezvous/auth.hpp"
#include "rendezvous/relay_cut.hpp"

namespace cc::rv::agent {

namespace {

// The largest frame a rank may send before its handshake is done, as the
// server's (a hello is at most about 12 KiB).
constexpr size_t kMaxHandshakeFrame = size_t{16} << 10;

std::vector<uint8_t> frame_of(uint32_t rid, const Message& m) { return encode_frame(rid, m); }

}  // namespace

struct AgentCore::Impl {
  // moving: the connection was lost and the agent follows the election to
  // the next server (the driver connects; then hello, auth, ready again).
  enum class Upstream : uint8_t { idle, hello, auth, ready, moving, lost };
  enum class RankState : uint8_t { hello, auth, open };

  struct Rank {
    LocalId id = 0;
    pid_t pid = 0;
    pid_t group = 0;
    RankState state = RankState::hello;
    std::vector<uint8_t> in;  // bytes of a frame not yet complete
    bool reading = false;     // rank_bytes is taking its frames (a call from inside adds to in)
    Hello hello;
    uint32_t hello_rid = 0;
    bool hello_waits = false;  // for the connection to the server
    std::vector<uint8_t> nonce;
    uint32_t channel = 0;
    std::vector<uint8_t> heartbeat;  // its latest heartbeat, not yet forwarded
    // Its connection ended: its process's exit status is awaited until then.
    std::optional<Clock::time_point> ending_until;
    Clock::time_point handshake_until{};
  };

  AgentOptions opt;
  AgentIo& io;
  Upstream up = Upstream::idle;
  FrameReader up_reader;
  std::string failure;
  uint32_t next_rid = 1;
  Clock::time_point last_heard{};
  Clock::time_point next_heartbeat = Clock::time_point::max();
  std::unordered_map<LocalId, Rank> ranks;
  std::unordered_map<uint32_t, LocalId> by_channel;
  uint32_t next_channel = 1;
  std::vector<LocalId> heartbeats_held;  // ranks with a heartbeat to forward
  std::vector<RelayEntry> out;           // for the next flush
  Clock::time_point now{};
  // While following the election to the next server: until when, since
  // when, and why the last one was lost.
  std::optional<Clock::time_point> follow_until;
  Clock::time_point follow_since{};
  std::string follow_why, follow_from, follow_last;

  Impl(AgentOptions o, AgentIo& i) : opt(std::move(o)), io(i), up_reader(opt.limits) {}

  std::string self() const { return "cc-run's node agent on " + cc::who(-1, opt.host, opt.pid); }

  void send_up(const Message& m) { io.to_upstream(frame_of(next_rid++, m)); }

  void to_rank(Rank& r, uint32_t rid, const Message& m) {
    const std::vector<uint8_t> bytes = frame_of(rid, m);
    io.to_rank(r.id, bytes);
  }

  // An entry of the next Relay; consecutive frames of one channel share one.
  void relay(uint32_t channel, RelayOp op, std::span<const uint8_t> data) {
    if (op != RelayOp::frames || out.empty() || out.back().channel != channel ||
        out.back().op != RelayOp::frames)
      out.push_back(RelayEntry{channel, op, {}});
    auto& d = out.back().data;
    d.insert(d.end(), data.begin(), data.end());
  }

  // ---- the connection to the server --------------------------------------

  void upstream_frame(const FrameReader::Frame& f) {
    const Message& m = f.message;
    if (const auto* e = std::get_if<Error>(&m)) {
      if (up != Upstream::ready)
        return lose(moved_words() + "the rendezvous at " + opt.upstream +
                    " refused it: " + printable(e->message));
      log().warn("{}: the rendezvous at {} says: {}", self(), opt.upstream, printable(e->message));
      return;
    }
    if (up == Upstream::hello) {
      const auto* ch = std::get_if<Challenge>(&m);
      if (ch == nullptr) return lose("the rendezvous at " + opt.upstream + " did not answer hello");
      if (!ch->auth_required) return ready();
      if (opt.token.empty())
        return lose("the rendezvous at " + opt.upstream +
                    " requires a token: give cc-run the job's token (CC_RENDEZVOUS_TOKEN or "
                    "CC_RENDEZVOUS_TOKEN_FILE)");
      up = Upstream::auth;
      send_up(Auth{auth_mac(opt.token, ch->nonce, opt.job_id)});
      return;
    }
    if (up == Upstream::auth) {
      if (!std::holds_alternative<Ok>(m))
        return lose("the rendezvous at " + opt.upstream + " did not accept the token");
      return ready();
    }
    if (const auto* r = std::get_if<Relay>(&m)) return from_server(*r);
    // HeartbeatAck, Ok: nothing more than that the server hears us.
  }

  void ready() {
    up = Upstream::ready;
    if (follow_until) {
      log().info("{}: reached the next rendezvous server at {} {} ms after losing the one at {}; "
                 "its ranks resume there",
                 self(), opt.upstream,
                 std::chrono::duration_cast<std::chrono::milliseconds>(now - follow_since).count(),
                 follow_from);
      follow_until.reset();
    }
    send_up(HeartbeatWindow{static_cast<uint32_t>(opt.heartbeat_window.count())});
    next_heartbeat = now + opt.heartbeat_interval;
    // A driver may answer a rank's challenge at once, from inside the call.
    std::vector<LocalId> waiting;
    for (auto& [id, r] : ranks)
      if (r.hello_waits) waiting.push_back(id);
    for (LocalId id : waiting)
      if (auto it = ranks.find(id); it != ranks.end()) answer_hello(it->second);
    flush();
  }

  void from_server(const Relay& relay) {
    for (const RelayEntry& e : relay.entries) {
      auto ch = by_channel.find(e.channel);
      if (ch == by_channel.end()) continue;  // its rank is gone
      auto it = ranks.find(ch->second);
      if (it == ranks.end()) continue;
      if (e.op == RelayOp::frames) {
        io.to_rank(it->first, e.data);
      } else if (e.op == RelayOp::close) {
        by_channel.erase(ch);
        it->second.channel = 0;  // the server ended it: nothing to tell it
        drop(it->first);
      }
    }
  }

  // "after losing the rendezvous at X (why), " while following, else "".
  std::string moved_words() const {
    if (!follow_until) return "";
    return "after losing the rendezvous server at " + follow_from + " (" + follow_why + "), ";
  }

  bool follows() const { return opt.failover_timeout.count() > 0; }

  // The connection is lost: with an elected server the agent follows the
  // election (follow), else it gives the server up (lose).
  void link_lost(const std::string& why) {
    if (up == Upstream::lost) return;
    if (!follows() || up == Upstream::idle) return lose(why);
    if (follow_until) {
      // An attempt at the next server failed: the driver tries again until
      // the deadline (tick).
      follow_last = why;
      if (now < *follow_until) {
        if (up != Upstream::moving) io.close_upstream();
        up = Upstream::moving;
        log().debug("{}: {}", self(), why);
        return;
      }
      return give_up_following(why);
    }
    follow(why);
  }

  // The ranks' connections close without a word (their clients connect to
  // the agent again and resume through it once the next server is ready);
  // ranks in their handshake with the agent wait for it. Nothing of the
  // channels survives: the next server opens them anew.
  void follow(const std::string& why) {
    follow_since = now;
    follow_until = now + opt.failover_timeout;
    follow_why = why;
    follow_from = opt.upstream;
    follow_last.clear();
    up = Upstream::moving;
    next_heartbeat = Clock::time_point::max();
    log().warn("{}: lost the rendezvous server at {} ({}); following the election at {} to the "
               "next one for up to {} ms",
               self(), follow_from, why, opt.elected_by, opt.failover_timeout.count());
    std::vector<LocalId> open;
    for (const auto& [id, r] : ranks)
      if (r.state == RankState::open || r.ending_until) open.push_back(id);
    for (LocalId id : open) drop(id);
    by_channel.clear();
    heartbeats_held.clear();
    out.clear();
    io.close_upstream();
  }

  void give_up_following(std::string last) {
    if (last.empty()) last = follow_last;
    const auto waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - follow_since).count();
    std::string words = "lost the rendezvous server at " + follow_from + " (" + follow_why +
                        ") and no next server took over within " + std::to_string(waited) +
                        " ms (the election at " + opt.elected_by + " named none that answered";
    if (!last.empty()) words += "; the last attempt: " + last;
    words += "). Check that a cc-rendezvous --etcd daemon runs and reaches etcd, or raise the "
             "heartbeat window (CC_HEARTBEAT_MS x CC_HEARTBEAT_MISSES), which bounds the wait";
    follow_until.reset();
    lose(words);
  }

  // Ranks waiting for their handshake get the message; the others are told
  // the rendezvous is gone, as a server that stops tells its members.
  void lose(const std::string& why) {
    if (up == Upstream::lost) return;
    up = Upstream::lost;
    follow_until.reset();
    failure = why;
    next_heartbeat = Clock::time_point::max();
    log().warn("{}: {}", self(), why);
    const std::string words = self() + " lost the rendezvous: " + why;
    std::vector<LocalId> all;
    for (const auto& [id, r] : ranks) all.push_back(id);
    for (LocalId id : all) {
      auto it = ranks.find(id);
      if (it == ranks.end()) continue;
      Rank& r = it->second;
      if (r.state == RankState::hello && r.hello_waits)
        to_rank(r, r.hello_rid, Error{CC_ERR_RENDEZVOUS, words});
      else if (r.state == RankState::open)
        to_rank(r, 0, PeerEvent{PeerEventKind::server_stopping, -1, "", 0, words});
    }
    for (LocalId id : all) drop(id);
    out.clear();
    io.close_upstream();
  }

  // ---- ranks ---------------------------------------------------------------

  void answer_hello(Rank& r) {
    r.hello_waits = false;
    Challenge ch;
    ch.server = "cc-run " CC_VERSION_STRING " node agent for the rendezvous at " + opt.upstream;
    if (!opt.token.empty()) {
      ch.auth_required = true;
      r.nonce = make_nonce();
      ch.nonce = r.nonce;
      r.state = RankState::auth;
      return to_rank(r, r.hello_rid, ch);
    }
    open_channel(r);  // before the answer: the rank may speak at once
    to_rank(r, r.hello_rid, ch);
  }

  void open_channel(Rank& r) {
    r.state = RankState::open;
    r.channel = next_channel++;
    by_channel.emplace(r.channel, r.id);
    relay(r.channel, RelayOp::open, frame_of(r.hello_rid, r.hello));
  }

  // Refuses what a rank sent out of turn, with a message, and closes it.
  void refuse(Rank& r, uint32_t rid, cc_result_t code, const std::string& words) {
    to_rank(r, rid, Error{static_cast<uint32_t>(code), words});
    end(r.id, words);
  }

  bool carries_calls(std::span<const uint8_t> frame) const {
    Message m;
    if (decode_message(static_cast<uint16_t>(MsgType::heartbeat), frame.subspan(kHeaderSize),
                       opt.limits, &m) != DecodeError::none)
      return false;
    const auto* hb = std::get_if<Heartbeat>(&m);
    return hb != nullptr && (!hb->calls.empty() || hb->answers != 0);
  }

  // One whole frame of a rank: false when the rank was closed.
  bool rank_frame(Rank& r, const FrameHeader& h, std::span<const uint8_t> frame) {
    const auto type = static_cast<MsgType>(h.type);
    if (r.state == RankState::open) {
      if (type == MsgType::heartbeat) {
        // Answered here; the latest goes to the server at the agent's
        // heartbeat, but one that carries calls to compare goes at once.
        to_rank(r, h.request_id, HeartbeatAck{});
        if (carries_calls(frame)) {
          relay(r.channel, RelayOp::frames, frame);
          return true;
        }
        if (r.heartbeat.empty()) heartbeats_held.push_back(r.id);
        r.heartbeat.assign(frame.begin(), frame.end());
        return true;
      }
      if (type == MsgType::hello || type == MsgType::auth || type == MsgType::relay) {
        refuse(r, h.request_id, CC_ERR_RENDEZVOUS,
               std::string("unexpected ") + type_name(type) + " after the handshake");
        return false;
      }
      relay(r.channel, RelayOp::frames, frame);
      return true;
    }
    Message m;
    const DecodeError e =
        decode_message(h.type, frame.subspan(kHeaderSize), opt.limits, &m);
    if (e != DecodeError::none) {
      refuse(r, h.request_id, CC_ERR_RENDEZVOUS, describe(e));
      return false;
    }
    if (r.state == RankState::hello) {
      const auto* hello = std::get_if<Hello>(&m);
      if (hello == nullptr) {
        refuse(r, h.request_id, CC_ERR_RENDEZVOUS,
               std::string("the first message must be hello, not ") + type_name(type));
        return false;
      }
      r.hello = *hello;
      r.hello_rid = h.request_id;
      if (up == Upstream::lost) {
        refuse(r, h.request_id, CC_ERR_RENDEZVOUS,
               self() + " cannot reach the rendezvous: " + failure);
        return false;
      }
      r.hello_waits = true;  // also while the agent follows the election to the next server
      if (up == Upstream::ready) answer_hello(r);
      return true;
    }
    const auto* auth = std::get_if<Auth>(&m);
    if (auth == nullptr || !auth_check(opt.token, r.nonce, r.hello.job_id, auth->mac)) {
      refuse(r, h.request_id, CC_ERR_AUTH,
             "the rendezvous token was refused by " + self() +
                 "; give every rank and cc-run the same token (CC_RENDEZVOUS_TOKEN or "
                 "CC_RENDEZVOUS_TOKEN_FILE)");
      return false;
    }
    r.nonce.clear();
    open_channel(r);
    to_rank(r, h.request_id, Ok{});
    return true;
  }

  // The rank ends: the server is told why (when it had a channel), and its
  // connection closes.
  void end(LocalId id, const std::string& words) {
    auto it = ranks.find(id);
    if (it == ranks.end()) return;
    if (it->second.channel != 0) {
      const size_t n = std::min<size_t>(words.size(), opt.limits.max_string);
      relay(it->second.channel, RelayOp::close,
            std::span(reinterpret_cast<const uint8_t*>(words.data()), n));
      by_channel.erase(it->second.channel);
    }
    drop(id);
  }

  void drop(LocalId id) {
    auto it = ranks.find(id);
    if (it == ranks.end()) return;
    if (it->second.channel != 0) by_channel.erase(it->second.channel);
    const bool open = !it->second.ending_until.has_value();
    ranks.erase(it);
    if (open) io.close_rank(id);
  }

  void forward_heartbeats() {
    for (LocalId id : heartbeats_held) {
      auto it = ranks.find(id);
      if (it == ranks.end() || it->second.heartbeat.empty()) continue;
      relay(it->second.channel, RelayOp::frames, it->second.heartbeat);
      it->second.heartbeat.clear();
    }
    heartbeats_held.clear();
  }

  // Cut so that no frame passes the limit, whatever one rank sent
  // (relay_cut.hpp).
  void flush() {
    if (out.empty() || up != Upstream::ready) return;
    cut_relays(out, opt.limits.max_frame, [&](Relay& r) { send_up(r); });
  }
};

AgentCore::AgentCore(AgentOptions options, AgentIo& io)
    : impl_(std::make_unique<Impl>(std::move(options), io)) {}
AgentCore::~AgentCore() = default;

void AgentCore::upstream_connected(Clock::time_point now) {
  Impl& i = *impl_;
  i.now = now;
  if (i.up != Impl::Upstream::idle && i.up != Impl::Upstream::moving) return;
  i.up = Impl::Upstream::hello;
  i.up_reader = FrameReader(i.opt.limits);
  i.last_heard = now;
  i.send_up(Hello{i.opt.job_id, i.opt.host, i.opt.pid, "cc-run " CC_VERSION_STRING " node agent"});
}

void AgentCore::upstream_bytes(std::span<const uint8_t> bytes, Clock::time_point now) {
  Impl& i = *impl_;
  i.now = now;
  if (i.up == Impl::Upstream::lost || i.up == Impl::Upstream::idle ||
      i.up == Impl::Upstream::moving)
    return;
  i.last_heard = now;
  i.up_reader.feed(bytes);
  while (auto f = i.up_reader.next()) {
    i.upstream_frame(*f);
    if (i.up == Impl::Upstream::lost) return;
  }
  if (i.up_reader.error() != DecodeError::none)
    i.link_lost("the rendezvous at " + i.opt.upstream + " sent a frame the agent cannot read (" +
           describe(i.up_reader.error()) + ")");
}

void AgentCore::upstream_lost(const std::string& why, Clock::time_point now) {
  impl_->now = now;
  impl_->link_lost(why);
}

bool AgentCore::upstream_ready() const { return impl_->up == Impl::Upstream::ready; }
bool AgentCore::following() const { return impl_->follow_until.has_value(); }
void AgentCore::upstream_moved(const std::string& where) { impl_->opt.upstream = where; }
const std::string& AgentCore::upstream_failure() const { return impl_->failure; }

void AgentCore::rank_connected(LocalId rank, pid_t pid, pid_t group, Clock::time_point now) {
  Impl& i = *impl_;
  i.now = now;
  Impl::Rank r;
  r.id = rank;
  r.pid = pid;
  r.group = group;
  r.handshake_until = now + i.opt.handshake_timeout;
  if (i.ranks.size() >= i.opt.max_ranks) {
    i.to_rank(r, 0,
              Error{CC_ERR_RENDEZVOUS,
                    i.self() + " already serves " + std::to_string(i.opt.max_ranks) +
                        " ranks, the most it may; start fewer ranks per cc-run"});
    i.io.close_rank(rank);
    return;
  }
  i.ranks.emplace(rank, std::move(r));
}

void AgentCore::rank_cut_off(LocalId rank, const std::string& why, Clock::time_point now) {
  Impl& i = *impl_;
  i.now = now;
  auto it = i.ranks.find(rank);
  if (it == i.ranks.end() || it->second.ending_until) return;
  log().warn("{}: cutting off the rank of pid {}: {}", i.self(), it->second.pid, why);
  i.end(rank, why);
  i.flush();
}

void AgentCore::rank_bytes(LocalId rank, std::span<const uint8_t> bytes, Clock::time_point now) {
  Impl& i = *impl_;
  i.now = now;
  auto it = i.ranks.find(rank);
  if (it == i.ranks.end() || it->second.ending_until) return;
  Impl::Rank& r = it->second;
  r.in.insert(r.in.end(), bytes.begin(), bytes.end());
  // A driver may answer from inside this call (a rank that speaks as soon as
  // it hears the agent): those bytes wait in r.in for the loop below.
  if (r.reading) return;
  r.reading = true;
  while (r.in.size() >= kHeaderSize) {
    FrameHeader h;
    if (const DecodeError e = parse_header(std::span(r.in).first(kHeaderSize), i.opt.limits, &h);
        e != DecodeError::none) {
      i.refuse(r, 0, CC_ERR_RENDEZVOUS, describe(e));
      return;
    }
    if (r.state != Impl::RankState::open && h.length > kMaxHandshakeFrame) {
      i.refuse(r, h.request_id, CC_ERR_RENDEZVOUS,
               "a " + std::to_string(h.length) + "-byte " + type_name(static_cast<MsgType>(h.type)) +
                   " before the handshake is done; no hello or auth is larger than " +
                   std::to_string(kMaxHandshakeFrame) + " bytes (is this a cc client?)");
      return;
    }
    if (r.in.size() < kHeaderSize + h.length) break;
    const std::vector<uint8_t> frame(r.in.begin(),
                                     r.in.begin() + static_cast<std::ptrdiff_t>(kHeaderSize + h.length));
    r.in.erase(r.in.begin(), r.in.begin() + static_cast<std::ptrdiff_t>(frame.size()));
    if (!i.rank_frame(r, h, frame)) return;  // r is gone
  }
  r.reading = false;
}

void AgentCore::rank_closed(LocalId rank, Clock::time_point now) {
  Impl& i = *impl_;
  i.now = now;
  auto it = i.ranks.find(rank);
  if (it == i.ranks.end() || it->second.ending_until) return;
  if (it->second.channel == 0) {  // never got past its handshake
    i.ranks.erase(it);
    return;
  }
  it->second.ending_until = now + i.opt.exit_grace;
}

void AgentCore::process_exited(pid_t group, const std::string& words, Clock::time_point now) {
  Impl& i = *impl_;
  i.now = now;
  std::vector<LocalId> ended;
  for (const auto& [id, r] : i.ranks)
    if (r.group == group || r.pid == group) ended.push_back(id);
  for (LocalId id : ended) i.end(id, words);
  i.flush();
}

void AgentCore::flush() { impl_->flush(); }

void AgentCore::tick(Clock::time_point now) {
  Impl& i = *impl_;
  i.now = now;
  std::vector<LocalId> late;
  for (const auto& [id, r] : i.ranks)
    if (r.ending_until && *r.ending_until <= now) late.push_back(id);
  for (LocalId id : late)
    i.end(id, "closed its connection to " + i.self() + " without leaving, and its process "
              "was not seen to exit");
  std::vector<LocalId> silent;
  for (const auto& [id, r] : i.ranks)
    if (r.state != Impl::RankState::open && !r.hello_waits && r.handshake_until <= now)
      silent.push_back(id);
  for (LocalId id : silent) {
    auto it = i.ranks.find(id);
    if (it == i.ranks.end()) continue;
    i.refuse(it->second, 0, CC_ERR_RENDEZVOUS,
             "no handshake with " + i.self() + " within " +
                 std::to_string(i.opt.handshake_timeout.count()) +
                 " ms (a cc rank says hello at once; is this a cc client?)");
  }
  if (i.follow_until && now >= *i.follow_until) {
    i.give_up_following("");
    return;
  }
  if (i.up == Impl::Upstream::ready && now >= i.next_heartbeat) {
    const auto silent = now - i.last_heard;
    if (silent > i.opt.heartbeat_window + i.opt.heartbeat_interval) {
      i.link_lost("nothing heard from the rendezvous at " + i.opt.upstream + " for " +
             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(silent).count()) +
             " ms (the network to it is cut, or its host is down)");
      return;
    }
    i.next_heartbeat = now + i.opt.heartbeat_interval;
    i.send_up(Heartbeat{});
    i.forward_heartbeats();
  }
  i.flush();
}

Clock::time_point AgentCore::next_deadline() const {
  const Impl& i = *impl_;
  Clock::time_point t = i.next_heartbeat;
  if (i.follow_until) t = std::min(t, *i.follow_until);
  for (const auto& [id, r] : i.ranks) {
    if (r.ending_until) t = std::min(t, *r.ending_until);
    if (r.state != Impl::RankState::open && !r.hello_waits) t = std::min(t, r.handshake_until);
  }
  return t;
}

size_t AgentCore::rank_count() const { return impl_->ranks.size(); }

}  // namespace cc::rv::agent
