// ServerCore, the public face of the rendezvous server's state machine
// (rendezvous/server_core.hpp): each call is handed to ServerCore::Impl,
// whose state is declared in state.hpp and whose work is done in the other
// files of this folder. The questions the I/O layer and the tests ask (the
// next deadline, counts, a job's progress) are answered here from that state.
#include "rendezvous/server_core.hpp"

#include "rendezvous/server_core/state.hpp"

namespace cc::rv {

ServerCore::ServerCore(const ServerOptions& options, Sink& sink)
    : impl_(std::make_unique<Impl>(options, sink)) {}
ServerCore::~ServerCore() = default;

// Each call ends by handing the Sink what it had for ranks behind node
// agents, one Relay per agent (relay.cpp).
bool ServerCore::on_connect(ConnId conn, const std::string& peer, Clock::time_point now,
                            size_t closing) {
  return impl_->on_connect(conn, peer, now, closing);
}
void ServerCore::on_bytes(ConnId conn, std::span<const uint8_t> bytes, Clock::time_point now) {
  impl_->on_bytes(conn, bytes, now);
  impl_->flush_relays();
}
void ServerCore::on_disconnect(ConnId conn, const std::string& reason) {
  impl_->on_disconnect(conn, reason, impl_->current_time);
  impl_->flush_relays();
}
void ServerCore::on_disconnect(ConnId conn, const std::string& reason, Clock::time_point now) {
  impl_->on_disconnect(conn, reason, now);
  impl_->flush_relays();
}
void ServerCore::on_written(ConnId conn, size_t bytes) { impl_->on_written(conn, bytes); }
void ServerCore::expire(Clock::time_point now) {
  impl_->expire(now);
  impl_->flush_relays();
}
std::optional<Clock::time_point> ServerCore::next_deadline() const {
  if (impl_->deadlines.empty()) return std::nullopt;
  return impl_->deadlines.begin()->first;
}
void ServerCore::stop(StopMode mode) { impl_->stop(mode); }
size_t ServerCore::connection_count() const { return impl_->socket_conns(); }
size_t ServerCore::relayed_rank_count() const { return impl_->channel_conns; }
size_t ServerCore::job_count() const { return impl_->jobs.size(); }
bool ServerCore::job_exists(const std::string& job_id) const {
  return impl_->jobs.count(job_id) != 0;
}
size_t ServerCore::job_key_count(const std::string& job_id) const {
  auto it = impl_->jobs.find(job_id);
  return it == impl_->jobs.end() ? 0 : it->second->keys.size();
}
bool ServerCore::job_has_communicators(const std::string& job_id) const {
  auto it = impl_->jobs.find(job_id);
  return it != impl_->jobs.end() && !it->second->comm_joins.empty();
}
bool ServerCore::job_busy(const std::string& job_id) const {
  auto it = impl_->jobs.find(job_id);
  return it != impl_->jobs.end() && (!it->second->members.empty() || it->second->joiners > 0);
}
ServerMetrics ServerCore::metrics(Clock::time_point now) const { return impl_->metrics(now); }
ServerCounters& ServerCore::counters() { return impl_->counters; }
void ServerCore::set_tokens(const Tokens& tokens) {
  impl_->opt.token = tokens.admin;
  impl_->opt.job_tokens = tokens.jobs;
}
std::map<int32_t, uint64_t> ServerCore::member_progress(const std::string& job_id,
                                                        uint32_t comm_number,
                                                        uint32_t generation) const {
  std::map<int32_t, uint64_t> out;
  auto it = impl_->jobs.find(job_id);
  if (it == impl_->jobs.end()) return out;
  for (ConnId id : it->second->members) {
    auto c = impl_->conns.find(id);
    if (c == impl_->conns.end()) continue;
    for (const server_core::Membership& m : c->second->memberships)
      if (m.comm_number == comm_number && m.generation == generation)
        out[m.rank] = m.last_completed;
  }
  return out;
}

}  // namespace cc::rv
