// Ranks behind a node agent (cc-run): the agent holds one connection for
// every rank it started, and each rank is a channel of it (protocol.hpp,
// Relay). Here each channel becomes a connection of the core with an id of
// its own (kChannelBit set), so every rule that applies to a rank on its own
// connection applies to it unchanged: it enters its job when its channel
// opens (the agent answered its Hello, and the agent's own authentication
// covers it), its frames are handled as its own, and its end is a failure
// with the agent's message ("exited with signal 9 (killed)") unless it left.
// What the core says to such a rank is gathered per agent during a turn and
// handed to the Sink as one Relay per agent (flush_relays), so a
// communicator's Joined, or a failure told to every member, costs one frame
// per node, not per rank. An agent that is lost takes its ranks with it, all
// failed together and named with the node in one event per generation.
#include <algorithm>
#include <string>

#include "common/log.hpp"
#include "common/printable.hpp"
#include "common/who.hpp"
#include "rendezvous/relay_cut.hpp"
#include "rendezvous/server_core/state.hpp"
#include "rendezvous/server_core/words.hpp"

namespace cc::rv {

using server_core::quote;

bool ServerCore::Impl::on_relay(Conn& agent, uint32_t rid, const Relay& r, Clock::time_point now) {
  if (agent.agent != 0) {
    counters.frame_error(FrameErrorKind::out_of_order);
    drop(agent, rid, CC_ERR_RENDEZVOUS,
         "a rank behind a node agent sent a relay of its own (a bug in the agent)");
    return false;
  }
  // Only a node agent carries ranks: a connection that entered its job (so
  // authenticated for it) and holds nothing of its own there.
  if (!agent.link && (agent.job == nullptr || !agent.memberships.empty() ||
                      !agent.parked.empty() || !agent.waiting.empty())) {
    counters.frame_error(FrameErrorKind::out_of_order);
    drop(agent, rid, CC_ERR_INVALID_USAGE,
         agent.job == nullptr
             ? "a relay on a connection that names no job: only cc-run's node agent, whose hello "
               "names its job, may carry ranks"
             : "a relay on a connection that is a member, joiner or waiter of its job itself: "
               "only cc-run's node agent may carry ranks, on a connection of its own");
    return false;
  }
  if (!agent.link) {
    agent.link = std::make_unique<server_core::AgentLink>();
    ++agent_links;
    sink.carries_ranks(agent.id);
  }
  const ConnId agent_id = agent.id;
  for (const RelayEntry& e : r.entries) {
    auto a = conns.find(agent_id);
    if (a == conns.end()) return false;  // a rank's frame dropped the agent (cannot, but be safe)
    server_core::AgentLink& link = *a->second->link;
    auto ch = link.channels.find(e.channel);
    switch (e.op) {
      case RelayOp::open:
        if (ch != link.channels.end()) {
          counters.frame_error(FrameErrorKind::out_of_order);
          drop(*a->second, rid, CC_ERR_RENDEZVOUS,
               "a node agent opened channel " + std::to_string(e.channel) +
                   " twice (a bug in the agent)");
          return false;
        }
        open_channel(*a->second, e.channel, e.data);
        break;
      case RelayOp::frames:
        // A channel the core closed meanwhile: the agent learns it from the close.
        if (ch != link.channels.end()) relay_frames(*conns.at(ch->second), e.data, now);
        break;
      case RelayOp::close:
        if (ch != link.channels.end()) {
          Conn& rank = *conns.at(ch->second);
          // The agent's message, cut to what a string may hold.
          const size_t n = std::min<size_t>(e.data.size(), opt.limits.max_string);
          const std::string why = printable(
              std::string_view(reinterpret_cast<const char*>(e.data.data()), n));
          if (!rank.memberships.empty())
            log().warn("{}: {}", rank.who(), why);
          else
            log().info("{}: {}", rank.who(), why);
          forget(rank, why, true);
        }
        break;
    }
  }
  return true;
}

// A rank's channel opens with its Hello, which the agent already answered.
void ServerCore::Impl::open_channel(Conn& agent, uint32_t channel,
                                    std::span<const uint8_t> hello) {
  server_core::AgentLink& link = *agent.link;
  FrameReader reader(opt.limits);
  reader.feed(hello);
  auto frame = reader.next();
  const Hello* h = frame ? std::get_if<Hello>(&frame->message) : nullptr;
  std::string refusal;
  if (h == nullptr)
    refusal = "a node agent opened channel " + std::to_string(channel) +
              " without the rank's hello (a bug in the agent)";
  else if (h->job_id != agent.job->id)
    refusal = "a rank of job " + quote(printable(h->job_id)) + " came through the node agent at " +
              agent.peer + ", which serves job " + quote(agent.job->id) +
              ": a node agent carries the ranks of its own job only; start each job's ranks "
              "under a cc-run of that job";
  else if (link.channels.size() >= server_core::kMaxChannelsPerAgent)
    refusal = "the node agent at " + agent.peer + " already carries " +
              std::to_string(server_core::kMaxChannelsPerAgent) +
              " ranks, the most one agent may; start fewer ranks per cc-run";
  else if (conns.size() >= opt.max_connections) {
    counters.limit(LimitKind::max_connections);
    refusal = "the rendezvous server is at its limit of " + std::to_string(opt.max_connections) +
              " connections, and a rank behind a node agent counts as one; try again later or "
              "raise the server's connection limit (--max-connections)";
  }
  const ConnId id = kChannelBit | next_channel_conn++;
  auto c = std::make_unique<Conn>(id, agent.peer, opt.limits);
  c->agent = agent.id;
  c->channel = channel;
  c->last_frame = current_time;
  c->last_heartbeat = current_time;
  Conn& rank = *c;
  conns.emplace(id, std::move(c));
  ++channel_conns;
  link.channels.emplace(channel, id);
  if (!refusal.empty()) {
    counters.frame_error(FrameErrorKind::out_of_order);
    drop(rank, 0, CC_ERR_RENDEZVOUS, refusal);
    return;
  }
  rank.hello = *h;
  enter_job(rank, 0);  // a job the server cannot take drops the rank with its message
}

// Frames of a rank are handled as if they came on its own connection.
void ServerCore::Impl::relay_frames(Conn& rank, std::span<const uint8_t> frames,
                                    Clock::time_point now) {
  rank.reader.feed(frames);
  bool frame_ended = false;
  if (!take_frames(rank, &frame_ended, now)) return;  // the rank was dropped
  after_frames(rank, frame_ended, now);
}

ServerCore::Impl::AgentLink* ServerCore::Impl::relay_of(ConnId rank, uint32_t* channel) {
  auto it = conns.find(rank);
  if (it == conns.end()) return nullptr;
  auto a = conns.find(it->second->agent);
  if (a == conns.end() || !a->second->link) return nullptr;
  *channel = it->second->channel;
  return a->second->link.get();
}

// Consecutive frames to one channel share one entry.
void ServerCore::Impl::relay_append(ConnId agent, AgentLink& link, uint32_t channel, RelayOp op,
                                    const std::function<void(std::vector<uint8_t>&)>& write) {
  if (link.out.empty() || link.out.back().channel != channel || link.out.back().op != op ||
      op != RelayOp::frames)
    link.out.push_back(RelayEntry{channel, op, {}});
  std::vector<uint8_t>& data = link.out.back().data;
  const size_t before = data.size();
  write(data);
  link.out_bytes += data.size() - before + (before == 0 ? kRelayEntryOverhead : 0);
  if (!link.pending) {
    link.pending = true;
    relays_pending.push_back(agent);
  }
}

// The core forgot a rank behind an agent: the agent closes its socket.
void ServerCore::Impl::relay_close(ConnId rank, const std::string& reason) {
  auto it = conns.find(rank);
  if (it == conns.end()) return;
  const ConnId agent_id = it->second->agent;
  const uint32_t channel = it->second->channel;
  auto a = conns.find(agent_id);
  if (a == conns.end() || !a->second->link) return;
  AgentLink& link = *a->second->link;
  link.channels.erase(channel);
  relay_append(agent_id, link, channel, RelayOp::close, [&](std::vector<uint8_t>& out) {
    out.insert(out.end(), reason.begin(), reason.end());
  });
}

// The agent's connection ends: every rank it carried fails with it, named
// with the node, and is told to the others together.
void ServerCore::Impl::end_channels(Conn& agent, const std::string& reason, bool failed) {
  AgentLink& link = *agent.link;
  const std::string words = "its node agent (cc-run, pid " + std::to_string(agent.hello.pid) +
                            ", on host " + printable(agent.hello.host) + " at " + agent.peer +
                            ") was lost: " + reason;
  std::vector<ConnId> ranks;
  ranks.reserve(link.channels.size());
  for (const auto& [channel, id] : link.channels) ranks.push_back(id);
  std::sort(ranks.begin(), ranks.end());
  // Their closes go nowhere: the agent's connection is going.
  link.channels.clear();
  std::map<Job*, std::vector<Conn*>> by_job;
  for (ConnId id : ranks) {
    auto it = conns.find(id);
    if (it == conns.end()) continue;
    it->second->agent = 0;  // no relay to answer through any more
    --channel_conns;
    if (it->second->job != nullptr && !it->second->memberships.empty() && !it->second->announced)
      by_job[it->second->job].push_back(it->second.get());
  }
  if (failed)
    for (auto& [job, gone] : by_job) announce_together(*job, gone, words);
  for (ConnId id : ranks) {
    auto it = conns.find(id);
    if (it != conns.end()) forget(*it->second, words, failed);
  }
  link.out.clear();
  link.out_bytes = 0;
}

// One Relay per agent for what the turn had for its ranks, cut so that no
// frame passes the agent's frame limit (relay_cut.hpp). A rank whose
// replies waiting to be written would pass the bound is ended first.
void ServerCore::Impl::flush_relays() {
  while (!relays_pending.empty()) {
    std::vector<ConnId> agents;
    agents.swap(relays_pending);
    for (ConnId id : agents) {
      auto it = conns.find(id);
      if (it == conns.end() || !it->second->link) continue;
      if (!stopped) end_flooded_channels(*it->second);
      AgentLink& link = *it->second->link;
      link.pending = false;
      cut_relays(link.out, opt.limits.max_frame, [&](Relay& r) {
        AgentLink::Unwritten u;
        u.bytes = relay_frame_size(r);
        for (const RelayEntry& e : r.entries) {
          if (!u.shares.empty() && u.shares.back().first == e.channel)
            u.shares.back().second += e.data.size();
          else
            u.shares.emplace_back(e.channel, e.data.size());
        }
        for (const auto& [channel, bytes] : u.shares) link.queued[channel] += bytes;
        link.unwritten.push_back(std::move(u));
        sink.send(id, 0, r);
      });
      link.out_bytes = 0;
    }
  }
}

// What a rank's answers of this turn would add to those its agent has not
// written yet: past the bound, its answers are thrown away and its channel
// ends with a message, as a connection of its own that does not read would.
void ServerCore::Impl::end_flooded_channels(Conn& agent) {
  AgentLink& link = *agent.link;
  std::unordered_map<uint32_t, size_t> adding;
  for (const RelayEntry& e : link.out)
    if (e.op == RelayOp::frames) adding[e.channel] += e.data.size();
  std::vector<uint32_t> flooded;
  for (const auto& [channel, bytes] : adding) {
    auto q = link.queued.find(channel);
    if (bytes + (q == link.queued.end() ? 0 : q->second) > ServerCore::kMaxQueuedReplies)
      flooded.push_back(channel);
  }
  if (flooded.empty()) return;
  std::sort(flooded.begin(), flooded.end());
  auto is_flooded = [&](uint32_t channel) {
    return std::binary_search(flooded.begin(), flooded.end(), channel);
  };
  std::erase_if(link.out, [&](const RelayEntry& e) {
    return e.op == RelayOp::frames && is_flooded(e.channel);
  });
  for (uint32_t channel : flooded) {
    auto ch = link.channels.find(channel);
    if (ch == link.channels.end()) continue;
    counters.limit(LimitKind::write_queue);
    Conn& rank = *conns.at(ch->second);
    const size_t waiting = adding[channel] + link.queued[channel];
    drop(rank, 0, CC_ERR_RENDEZVOUS,
         "its replies are not read: " + std::to_string(waiting >> 20) +
             " MiB would wait for it at its node agent (cc-run, on host " +
             printable(agent.hello.host) + "), past the server's bound of " +
             std::to_string(ServerCore::kMaxQueuedReplies >> 20) +
             " MiB a rank; read replies as they come, or ask for less at once");
  }
}

void ServerCore::Impl::on_written(ConnId conn, size_t bytes) {
  auto it = conns.find(conn);
  if (it == conns.end() || !it->second->link) return;
  AgentLink& link = *it->second->link;
  while (bytes > 0 && !link.unwritten.empty()) {
    AgentLink::Unwritten& u = link.unwritten.front();
    const size_t take = std::min(bytes, u.bytes - link.front_written);
    link.front_written += take;
    bytes -= take;
    if (link.front_written < u.bytes) break;
    for (const auto& [channel, share] : u.shares) {
      auto q = link.queued.find(channel);
      if (q == link.queued.end()) continue;
      q->second -= std::min(q->second, share);
      if (q->second == 0) link.queued.erase(q);
    }
    link.unwritten.pop_front();
    link.front_written = 0;
  }
}

void ServerCore::Impl::count_unwritten(Conn& agent, const Message& m, uint32_t rid) {
  agent.link->unwritten.push_back(AgentLink::Unwritten{encode_frame(rid, m).size(), {}});
}

}  // namespace cc::rv
