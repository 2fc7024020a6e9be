#include "lib/watch/control_channel.hpp"

#include <algorithm>
#include <cstdint>

#include "common/log.hpp"
#include "common/printable.hpp"
#include "common/return_if_error.hpp"
#include "common/who.hpp"
#include "rendezvous/rules/words.hpp"

namespace cc::watch {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

ControlChannel::ControlChannel(rv::Membership& client, ChannelOptions options)
    : client_(client), options_(std::move(options)) {}

Status ControlChannel::start() {
  if (Status st = client_.set_heartbeat_window(window()); !st.ok())
    return make_status(st.code, self() + ": asking the rendezvous at " + client_.endpoint() +
                                    " to watch heartbeats failed: " + st.message);
  CC_RETURN_IF_ERROR(client_.heartbeat_nowait(0));
  next_heartbeat_ = Clock::now() + options_.interval;
  // Rank 0's host and pid, for messages when its embedded server goes away.
  rv::Progress progress;
  if (client_
          .progress_in(options_.comm_number, options_.generation, 0, &progress, milliseconds(10000))
          .ok())
    for (const auto& m : progress.members) members_[m.rank] = m;
  return Status::success();
}

std::string ControlChannel::self() const {
  return who(Who{options_.rank, options_.host, options_.pid,
                 options_.generation > 0 ? static_cast<int>(options_.generation) : -1});
}

std::vector<int> ControlChannel::failed_ranks() const {
  std::lock_guard<std::mutex> lock(failed_mu_);
  return {failed_.begin(), failed_.end()};
}

std::string ControlChannel::member_words(int rank, const std::string& host, uint32_t pid) const {
  std::string h = host;
  uint32_t p = pid;
  if (auto it = members_.find(rank); it != members_.end()) {
    if (h.empty()) h = it->second.host;
    if (p == 0) p = it->second.pid;
  }
  return who(rank, h, p);
}

namespace {

// " and ranks 17-23 with it": the rest of a node that failed together.
std::string together(std::vector<int32_t> with) {
  if (with.empty()) return "";
  std::sort(with.begin(), with.end());
  return std::string(" and rank") + (with.size() == 1 ? " " : "s ") + rv::rules::rank_ranges(with) +
         " with it";
}

}  // namespace

ChannelFailure ControlChannel::from_event(const rv::PeerEvent& e) const {
  // The reason comes from another machine (the server, or etcd's records).
  const std::string reason = printable(e.reason);
  if (e.kind == rv::PeerEventKind::server_stopping) return server_lost(reason);
  ChannelFailure f;
  if (e.kind == rv::PeerEventKind::mismatch) {
    f.kind = ChannelFailure::Kind::mismatch;
    f.rank = e.rank;
    f.host = e.host;
    f.pid = e.pid;
    f.story = e.reason;
    return f;
  }
  f.kind = e.kind == rv::PeerEventKind::aborted ? ChannelFailure::Kind::peer_aborted
                                                : ChannelFailure::Kind::peer_failed;
  f.rank = e.rank;
  f.host = e.host;
  f.pid = e.pid;
  const std::string peer = member_words(e.rank, e.host, e.pid);
  if (f.kind == ChannelFailure::Kind::peer_aborted)
    f.story = peer + " aborted the job: " + reason + ". Look at that rank's output first";
  else
    f.story =
        peer + together(e.with) + " failed: " + reason +
        ". Look at that rank's output and its host's kernel log (OOM killer, a crash, "
        "a lost node); this communicator cannot continue: go on without it (cc_comm_shrink) or "
        "with a replacement (cc_comm_regrow), or destroy it and restart the job";
  return f;
}

ChannelFailure ControlChannel::server_lost(const std::string& reason) const {
  ChannelFailure f;
  f.kind = ChannelFailure::Kind::server_lost;
  if (options_.server_in_rank0) {
    f.rank = 0;
    if (auto it = members_.find(0); it != members_.end()) {
      f.host = it->second.host;
      f.pid = it->second.pid;
    }
    f.story = member_words(0, f.host, f.pid) + ", which hosts the job's rendezvous server (" +
              client_.endpoint() + "), is gone: " + reason +
              ". Rank 0 most likely died: look at its output; this communicator cannot continue";
  } else {
    f.story = client_.named() + " is gone: " + reason +
              ". The job cannot tell whether its ranks are alive: " + client_.lost_advice() +
              ", then restart the job";
  }
  return f;
}

std::optional<ChannelFailure> ControlChannel::poll(Clock::time_point now, uint64_t last_completed) {
  last_completed_ = last_completed;
  // Many calls since the last report: the next goes now, not at the interval.
  const bool due = options_.calls != nullptr && !reported_ &&
                   now >= last_heartbeat_ + options_.interval / 10 &&
                   options_.calls->report_due();
  if (now >= next_heartbeat_ || due) {
    next_heartbeat_ = now + options_.interval;
    last_heartbeat_ = now;
    Status st;
    if (options_.calls != nullptr && !reported_) {
      rv::Heartbeat h{last_completed, options_.comm_number, options_.generation,
                      options_.calls->take_report()};
      st = client_.heartbeat_with_calls_nowait(h);
    } else {
      st = client_.heartbeat_nowait(last_completed);
    }
    if (!st.ok() && !reported_) log().debug("{}: heartbeat: {}", self(), st.message);
  }
  client_.pump();
  answer_wants();
  std::optional<ChannelFailure> first;
  while (auto e = client_.next_event(milliseconds(0))) {
    if (e->kind == rv::PeerEventKind::left) continue;
    if (e->split != 0) {  // a split child's calls differ: its own poll_split tells it
      std::lock_guard<std::mutex> lock(split_mu_);
      if (split_events_.size() < kMaxSplitEvents)
        split_events_.try_emplace({e->split, e->split_color}, std::move(*e));
      continue;
    }
    if (e->kind != rv::PeerEventKind::server_stopping && e->kind != rv::PeerEventKind::mismatch &&
        e->rank == options_.rank)
      continue;
    if (e->kind == rv::PeerEventKind::failed) {
      std::lock_guard<std::mutex> lock(failed_mu_);
      failed_.insert(e->rank);
      failed_.insert(e->with.begin(), e->with.end());  // the rest of a lost node
    }
    if (!reported_ && !first) first = from_event(*e);
  }
  if (first) {
    reported_ = true;
    return first;
  }
  if (reported_) return std::nullopt;
  // A cut cable: the server acknowledges every heartbeat, so silence this
  // long means it cannot hear us either (it announces us to the others).
  const auto silent = now - client_.last_heard();
  if (silent > window() + options_.interval) {
    reported_ = true;
    return server_lost("nothing heard from it for " +
                       std::to_string(std::chrono::duration_cast<milliseconds>(silent).count()) +
                       " ms (the network to it is cut, or its host is down)");
  }
  return std::nullopt;
}

void ControlChannel::send_points(const rv::CallsWanted& w, core::CallLog& calls,
                                 int32_t split_rank) {
  rv::Heartbeat h{last_completed_, options_.comm_number, options_.generation,
                  calls.points_in(w.after, w.through, rv::kMaxHeartbeatCalls)};
  h.split = w.split;
  h.split_color = w.split_color;
  h.split_rank = split_rank;
  h.answers = w.id;
  if (Status st = client_.heartbeat_with_calls_nowait(h); !st.ok())
    log().debug("{}: the points of its calls asked by the rendezvous: {}", self(), st.message);
}

void ControlChannel::answer_wants() {
  while (std::optional<rv::CallsWanted> w = client_.next_calls_wanted()) {
    if (w->comm_number != options_.comm_number || w->generation != options_.generation) continue;
    if (w->split != 0) {
      std::lock_guard<std::mutex> lock(split_mu_);
      if (split_wants_.size() < kMaxSplitEvents || split_wants_.count({w->split, w->split_color}))
        split_wants_[{w->split, w->split_color}] = *w;
      continue;
    }
    if (options_.calls != nullptr && !reported_) send_points(*w, *options_.calls, -1);
  }
}

std::optional<ChannelFailure> ControlChannel::poll_split(Clock::time_point now, SplitLine& line) {
  if (line.told) return std::nullopt;
  if (line.calls != nullptr) {
    std::optional<rv::CallsWanted> w;
    {
      std::lock_guard<std::mutex> lock(split_mu_);
      if (auto it = split_wants_.find({line.split, line.color}); it != split_wants_.end()) {
        w = it->second;
        split_wants_.erase(it);
      }
    }
    if (w) send_points(*w, *line.calls, line.rank);
  }
  if (line.calls != nullptr && now >= line.next_report) {
    line.next_report = now + options_.interval;
    std::vector<CallPoint> points = line.calls->take_report();
    if (!points.empty()) {
      const rv::Heartbeat h{last_completed_,   options_.comm_number, options_.generation,
                            std::move(points), line.split,           line.color,
                            line.rank};
      if (Status st = client_.heartbeat_with_calls_nowait(h); !st.ok())
        log().debug("{}: the calls of its split {}: {}", self(), line.split, st.message);
    }
  }
  std::lock_guard<std::mutex> lock(split_mu_);
  auto it = split_events_.find({line.split, line.color});
  if (it == split_events_.end()) return std::nullopt;
  line.told = true;
  ChannelFailure f = from_event(it->second);
  split_events_.erase(it);
  return f;
}

std::string ControlChannel::behind_words(uint64_t waiting_seq, milliseconds timeout) {
  rv::Progress progress;
  if (Status st = client_.progress_with_calls(options_.comm_number, options_.generation, &progress,
                                              timeout);
      !st.ok())
    return "the rendezvous could not say which rank is behind (" + st.message + ")";
  const std::string calls =
      progress.calls.empty() ? std::string() : "; where the ranks are: " + progress.calls;
  // The members furthest back (and behind this rank's op) are named: one that
  // skipped a call, or is stuck before it, stays at the lowest number.
  uint64_t lowest = UINT64_MAX;
  for (const auto& m : progress.members)
    if (m.rank != options_.rank) lowest = std::min(lowest, m.last_completed);
  std::string out;
  for (const auto& m : progress.members) {
    if (m.rank == options_.rank || m.last_completed != lowest || lowest >= waiting_seq) continue;
    if (!out.empty()) out += "; ";
    out += member_words(m.rank, m.host, m.pid) + " last completed op #" +
           std::to_string(m.last_completed) +
           (m.silent_ms > window().count()
                ? " and has not sent a heartbeat for " + std::to_string(m.silent_ms) + " ms"
                : "");
  }
  if (!out.empty())
    return "behind: " + out + calls +
           ". A rank that is behind skipped a collective or is stuck before it: compare the "
           "sequence of calls on every rank";
  if (progress.members.empty())
    return "the rendezvous knows no other live member of this communicator";
  return "every other rank reported completing op #" + std::to_string(lowest) +
         " or later, so none is known to be behind" + calls +
         "; a rank may be waiting in a different collective: compare the sequence of calls on "
         "every rank";
}

void ControlChannel::announce_abort(const std::string& story) {
  if (Status st = client_.abort_nowait(story); !st.ok())
    log().debug("{}: telling the rendezvous about the failure: {}", self(), st.message);
}

}  // namespace cc::watch
