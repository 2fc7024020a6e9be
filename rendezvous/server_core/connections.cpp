// A connection's life in the rendezvous server's core: accepted (or refused
// over max_connections), fed bytes that are cut into frames, taken through
// the handshake (Hello, answered with Challenge; with a token, Auth answered
// with Ok or a drop; frames until then at most kMaxHandshakeFrame) into its
// job, then each frame handed to its request
// (kv.cpp, joins.cpp, heartbeats.cpp, init_failures.cpp, preflight.cpp); and its
// end: a disconnect, a drop or the server stopping, after which forget
// removes every trace of it (what its job keeps then is retention.cpp's
// business).
#include <memory>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "common/printable.hpp"
#include "common/who.hpp"
#include "rendezvous/auth.hpp"
#include "rendezvous/rules/event_rules.hpp"
#include "rendezvous/server_core/state.hpp"
#include "rendezvous/server_core/words.hpp"

namespace cc::rv {

using server_core::quote;

bool ServerCore::Impl::on_connect(ConnId id, const std::string& peer, Clock::time_point now,
                                  size_t closing) {
  current_time = now;
  open_resume_grace(now);
  // Ranks behind node agents count as connections (relay.cpp).
  if (stopped || conns.size() + closing >= opt.max_connections) {
    const std::string why =
        stopped
            ? "the rendezvous server is stopping"
            : "the rendezvous server is at its limit of " + std::to_string(opt.max_connections) +
                  " connections (ranks behind node agents among them); try again later or raise "
                  "the server's connection limit (--max-connections)";
    if (!stopped) counters.limit(LimitKind::max_connections);
    send_error(id, 0, CC_ERR_RENDEZVOUS, why);
    log().warn("refusing {}: {}", peer, why);
    sink.close(id, why);
    return false;
  }
  auto c = std::make_unique<Conn>(id, peer, opt.limits);
  c->last_frame = now;
  arm(c->handshake_timer, now + opt.handshake_timeout, DeadlineKind::handshake, id);
  conns.emplace(id, std::move(c));
  ++counters.connections_accepted;
  log().info("connection from {}", peer);
  return true;
}

void ServerCore::Impl::start_turn(Clock::time_point now) {
  current_time = now;
  turn_budget = ServerCore::kAnswersPerTurn;
  turn_value_bytes = 0;
}

bool ServerCore::Impl::turn_spent() const {
  return turn_value_bytes >= ServerCore::kValueBytesPerTurn;
}

void ServerCore::Impl::answer_value(ConnId c, uint32_t rid, const std::vector<uint8_t>& value) {
  send_value(c, rid, value);
  turn_value_bytes += value.size();
}

void ServerCore::Impl::on_bytes(ConnId id, std::span<const uint8_t> bytes, Clock::time_point now) {
  start_turn(now);
  auto it = conns.find(id);
  if (it == conns.end()) return;
  Conn& c = *it->second;
  counters.bytes_in += bytes.size();
  if (c.phase != Phase::ready && !c.reader.mid_frame() && bytes.size() >= kHeaderSize) {
    FrameHeader h;
    if (parse_header(bytes.first(kHeaderSize), c.reader.limits(), &h) == DecodeError::none &&
        h.length > ServerCore::kMaxHandshakeFrame) {
      handshake_frame_too_large(c, std::to_string(h.length) + " bytes");
      return;
    }
  }
  c.reader.feed(bytes);
  bool frame_ended = false;
  if (!take_frames(c, &frame_ended, now)) return;  // c was dropped
  after_frames(c, frame_ended, now);
}

// While the turn's value bytes last; then the rest waits for an input
// deadline due at once, so other connections' frames come first.
bool ServerCore::Impl::take_frames(Conn& c, bool* frame_ended, Clock::time_point now) {
  disarm(c.input_timer);
  while (!turn_spent()) {
    auto f = c.reader.next();
    if (!f) return true;
    c.last_frame = now;
    *frame_ended = true;
    if (!handle(c, f->request_id, f->message, now)) return false;
  }
  if (c.reader.buffered() > 0) arm(c.input_timer, now, DeadlineKind::input, c.id);
  return true;
}

void ServerCore::Impl::after_frames(Conn& c, bool frame_ended, Clock::time_point now) {
  const ConnId id = c.id;
  if (c.reader.error() != DecodeError::none) {
    counters.frame_error(frame_error_kind(c.reader.error()));
    drop(c, 0, CC_ERR_RENDEZVOUS, describe(c.reader.error()));
    return;
  }
  if (c.phase != Phase::ready &&
      c.reader.buffered() > kHeaderSize + ServerCore::kMaxHandshakeFrame) {
    handshake_frame_too_large(
        c, "over " + std::to_string(c.reader.buffered() - kHeaderSize) + " bytes");
    return;
  }
  const size_t incomplete = c.reader.buffered();
  incomplete_bytes = incomplete_bytes - c.incomplete + incomplete;
  c.incomplete = incomplete;
  if (incomplete_bytes > ServerCore::kMaxIncompleteFrames && incomplete > ServerCore::kSmallFrame) {
    counters.frame_error(FrameErrorKind::frame_too_large);
    drop(c, 0, CC_ERR_RENDEZVOUS,
         "the server holds " + std::to_string(incomplete_bytes >> 20) +
             " MiB of frames not yet complete, over its bound of " +
             std::to_string(ServerCore::kMaxIncompleteFrames >> 20) + " MiB, and " +
             std::to_string(incomplete) +
             " bytes of them are this connection's; send large values fewer at a time, or retry");
    return;
  }
  // The frame deadline bounds each frame from its first byte to its last: a
  // frame begun in this call (after one that ended in it) has its own.
  if (!c.reader.mid_frame())
    disarm(c.frame_timer);
  else if (frame_ended || !c.frame_timer)
    arm(c.frame_timer, now + opt.frame_timeout, DeadlineKind::frame, id);
}

// Before its handshake is done a connection holds at most one small frame:
// a Hello is far smaller than kMaxHandshakeFrame.
void ServerCore::Impl::handshake_frame_too_large(Conn& c, const std::string& size) {
  counters.frame_error(FrameErrorKind::frame_too_large);
  drop(c, 0, CC_ERR_RENDEZVOUS,
       "a frame of " + size + " before the handshake was done, over the limit of " +
           std::to_string(ServerCore::kMaxHandshakeFrame) +
           " bytes until then (a hello is far smaller: a client of another protocol, or an "
           "attack)");
}

void ServerCore::Impl::on_disconnect(ConnId id, const std::string& reason, Clock::time_point now) {
  start_turn(now);
  auto it = conns.find(id);
  if (it == conns.end()) return;
  Conn& c = *it->second;
  std::string why = reason;
  // A member that closed its connection without a Leave: every backend says
  // so with the same message (etcd's client says them when destroyed unleft).
  if (reason == ServerCore::kClientClosed && !c.memberships.empty() && !c.reader.mid_frame())
    why = rules::closed_without_leaving_words();
  if (c.reader.mid_frame())
    why += " in the middle of a frame (" + std::to_string(c.reader.buffered()) +
           " bytes of a truncated frame)";
  if (!c.memberships.empty() || c.reader.mid_frame())
    log().warn("{} disconnected: {}", c.who(), printable(why));
  else
    log().info("{} disconnected: {}", c.who(), printable(why));
  forget(c, why, true);
}

// Handles one frame; false when the connection was dropped.
bool ServerCore::Impl::handle(Conn& c, uint32_t rid, const Message& m, Clock::time_point now) {
  const MsgType type = type_of(m);
  if (c.phase == Phase::hello) {
    if (type != MsgType::hello) {
      counters.frame_error(FrameErrorKind::out_of_order);
      drop(c, rid, CC_ERR_RENDEZVOUS,
           std::string("the first message must be hello, not ") + type_name(type) +
               " (a client of another protocol, or a bug)");
      return false;
    }
    return on_hello(c, rid, std::get<Hello>(m));
  }
  if (c.phase == Phase::auth) {
    if (type != MsgType::auth) {
      ++counters.auth_refusals;
      drop(c, rid, CC_ERR_AUTH,
           "the rendezvous server requires a token: set CC_RENDEZVOUS_TOKEN (or "
           "CC_RENDEZVOUS_TOKEN_FILE) to the job's token");
      return false;
    }
    return on_auth(c, rid, std::get<Auth>(m));
  }
  if (type == MsgType::status_query) return on_status(c, rid, std::get<StatusQuery>(m), now);
  if (type == MsgType::relay) return on_relay(c, rid, std::get<Relay>(m), now);
  if (c.job == nullptr) {
    counters.frame_error(FrameErrorKind::out_of_order);
    drop(c, rid, CC_ERR_INVALID_USAGE,
         std::string("a connection that names no job may only ask for status, not ") +
             type_name(type) + "; give the client a job id");
    return false;
  }
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
      return on_del(c, rid, std::get<Del>(m));
    case MsgType::compare_set:
      return on_compare_set(c, rid, std::get<CompareSet>(m));
    case MsgType::join:
      return on_join(c, rid, std::get<Join>(m), now);
    case MsgType::leave:
      return on_leave(c, rid);
    case MsgType::heartbeat:
      return on_heartbeat(c, rid, std::get<Heartbeat>(m), now);
    case MsgType::calls_end:
      return on_calls_end(c, rid, std::get<CallsEnd>(m), now);
    case MsgType::heartbeat_window:
      return on_heartbeat_window(c, rid, std::get<HeartbeatWindow>(m), now);
    case MsgType::progress_query:
      return on_progress(c, rid, std::get<ProgressQuery>(m), now);
    case MsgType::abort:
      return on_abort(c, rid, std::get<Abort>(m));
    case MsgType::recover:
      return on_recover(c, rid, std::get<Recover>(m), now);
    case MsgType::recover_id:
      return on_recover_id(c, rid, std::get<RecoverId>(m), now);
    case MsgType::resume:
      return on_resume(c, rid, std::get<Resume>(m), now);
    case MsgType::init_failed:
      return on_init_failed(c, rid, std::get<InitFailed>(m));
    case MsgType::preflight_ready:
      return on_preflight_ready(c, rid, std::get<PreflightReady>(m), now);
    case MsgType::preflight_report:
      return on_preflight_report(c, rid, std::get<PreflightReport>(m), now);
    default:
      counters.frame_error(FrameErrorKind::out_of_order);
      drop(c, rid, CC_ERR_RENDEZVOUS,
           std::string("unexpected message ") + type_name(type) +
               " from a client (after the handshake)");
      return false;
  }
}

bool ServerCore::Impl::on_hello(Conn& c, uint32_t rid, const Hello& h) {
  c.hello = h;
  Challenge ch;
  ch.server = server_name;
  if (!opt.token.empty() || !opt.job_tokens.empty()) {
    ch.auth_required = true;
    c.nonce = make_nonce();
    ch.nonce = c.nonce;
    c.phase = Phase::auth;
    send(c.id, rid, ch);
    return true;
  }
  // A job the server cannot take is the answer to the Hello itself, so the
  // client's connect fails with the message.
  if (!enter_job(c, rid)) return false;
  send(c.id, rid, ch);
  return true;
}

// With tokens per job prefix, a job proves its prefix's token or the admin
// token; a connection that names no job (status) proves the admin token, or
// a prefix's and then sees those jobs alone.
bool ServerCore::Impl::on_auth(Conn& c, uint32_t rid, const Auth& a) {
  const auto proves = [&](const std::string& token) {
    return !token.empty() && auth_check(token, c.nonce, c.hello.job_id, a.mac);
  };
  bool proved = proves(opt.token);
  if (!proved && !c.hello.job_id.empty()) {
    if (const JobToken* t = longest_prefix(opt.job_tokens, c.hello.job_id))
      proved = proves(t->token);
  } else if (!proved) {
    for (const JobToken& t : opt.job_tokens) {
      if (proves(t.token)) {
        c.status_prefix = t.prefix;
        proved = true;
        break;
      }
    }
  }
  if (!proved) {
    ++counters.auth_refusals;
    drop(c, rid, CC_ERR_AUTH,
         opt.job_tokens.empty()
             ? "the rendezvous token was refused by the server; give every rank and the server "
               "the same token (CC_RENDEZVOUS_TOKEN or CC_RENDEZVOUS_TOKEN_FILE, cc-rendezvous "
               "--token-file)"
         : c.hello.job_id.empty()
             ? "the rendezvous token was refused by the server for a connection that names no "
               "job (status); this server has a token per job prefix: give the admin token, or "
               "a job prefix's token to see that prefix's jobs"
             : "the rendezvous token was refused by the server for job " +
                   server_core::quote(c.hello.job_id) +
                   "; this server has a token per job prefix: give the ranks the token of the "
                   "job's prefix (CC_RENDEZVOUS_TOKEN or CC_RENDEZVOUS_TOKEN_FILE), as the "
                   "server's --token-file names it");
    return false;
  }
  c.nonce.clear();
  if (!enter_job(c, rid)) return false;
  send(c.id, rid, Ok{});
  return true;
}

// The handshake is done: the connection joins its job (made on first use,
// up to max_jobs) and may now read and write the job's keys. A Hello without
// a job id (an operator's status tool) enters no job.
bool ServerCore::Impl::enter_job(Conn& c, uint32_t rid) {
  if (c.hello.job_id.empty()) {
    c.phase = Phase::ready;
    disarm(c.handshake_timer);
    if (opt.idle_timeout.count() > 0)
      arm(c.idle_timer, c.last_frame + opt.idle_timeout, DeadlineKind::idle, c.id);
    return true;
  }
  Job* job = job_for(c, rid);
  if (job == nullptr) return false;
  c.job = job;
  c.job->conns.insert(c.id);
  c.phase = Phase::ready;
  disarm(c.handshake_timer);
  if (opt.idle_timeout.count() > 0)
    arm(c.idle_timer, c.last_frame + opt.idle_timeout, DeadlineKind::idle, c.id);
  return true;
}

// Removes every trace of the connection; `failed` when it ended without a
// clean Leave (then its memberships are announced as failures, its process
// counts as dead for a recovery, and a join it had pending fails its
// generation: init_failures.cpp). Its job may lose its communicator state, or
// its last connection (retention.cpp).
void ServerCore::Impl::forget(Conn& c, const std::string& reason, bool failed) {
  const ConnId id = c.id;
  if (c.link) {
    end_channels(c, reason, failed);
    --agent_links;
  }
  incomplete_bytes -= c.incomplete;
  disarm(c.handshake_timer);
  disarm(c.frame_timer);
  disarm(c.heartbeat_timer);
  disarm(c.idle_timer);
  disarm(c.input_timer);
  if (failed && c.job != nullptr) joiner_lost(c, reason);
  cancel_all_parked(c);
  Job* job = c.job;
  if (job != nullptr) {
    recovery_conn_ends(*job, c, failed, reason);
    if (!c.memberships.empty()) {
      if (failed && !c.announced) announce(*job, c, PeerEventKind::failed, reason);
      end_memberships(*job, c);
    }
    job->conns.erase(id);
  }
  close(id, reason);
  if (c.agent != 0) --channel_conns;
  conns.erase(id);  // c is gone from here on
  if (job != nullptr) {
    settle(*job);  // a recovery this connection held up may go on
    maybe_idle(*job);
    rank_gone(*job, id);
    if (job->conns.empty()) job_unused(*job);
  }
}

// Tells every member that the server is stopping, answers every parked
// request with an error, then forgets every connection without announcing
// anyone as failed. A client that says a session (one that may follow the
// job to a successor) and waits for an answer is told it stops first, so it
// moves on before the error arrives. A handover tells every connection of
// a job it stops and answers nothing: its clients resume on the successor.
void ServerCore::Impl::stop(StopMode mode) {
  if (stopped) return;
  stopped = true;
  const bool handover = mode == StopMode::handover;
  const std::string why =
      handover ? "the rendezvous server is handing its jobs over to its successor; clients that "
                 "can find the successor resume there, others cannot continue (restart the job)"
               : "the rendezvous server is stopping; the job cannot continue through it (restart "
                 "the server or the job)";
  for (auto& [id, c] : conns) {
    const bool waits = !c->hello.session.empty() && (!c->parked.empty() || !c->waiting.empty());
    if (!c->memberships.empty() || waits || (handover && c->job != nullptr && !c->link))
      send(id, 0, PeerEvent{PeerEventKind::server_stopping, -1, "", 0, why});
  }
  std::vector<uint64_t> ids;
  ids.reserve(parked.size());
  for (const auto& [id, p] : parked) ids.push_back(id);
  for (uint64_t id : ids) {
    auto it = parked.find(id);
    if (it == parked.end()) continue;
    if (!handover) send_error(it->second.conn, it->second.request_id, CC_ERR_RENDEZVOUS, why);
    finish_parked(id);
  }
  flush_relays();  // the ranks behind agents are told before their agents go
  std::vector<ConnId> all;
  all.reserve(conns.size());
  for (const auto& [id, c] : conns) {
    all.push_back(id);
    c->announced = true;  // the server is going, not the rank
  }
  for (ConnId id : all) {
    auto it = conns.find(id);
    if (it == conns.end()) continue;
    forget(*it->second, "the rendezvous server is stopping", false);
  }
  parked.clear();
  wakes.clear();
  orphans.clear();
  reap_timer.reset();
  deadlines.clear();  // job TTLs too: the jobs go with the server
  jobs_by_serial.clear();
  jobs.clear();
  total_bytes = 0;
}

}  // namespace cc::rv
