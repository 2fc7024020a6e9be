#include "lib/comm/rendezvous_join.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>

#include "common/log.hpp"
#include "common/printable.hpp"
#include "common/return_if_error.hpp"
#include "common/who.hpp"
#include "lib/comm/deadline.hpp"
#include "rendezvous/factory/connect.hpp"

namespace cc::comm {
namespace {

using std::chrono::milliseconds;

std::string rank_list(const std::vector<int32_t>& ranks) {
  std::string out;
  for (int32_t r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out.empty() ? "none" : out;
}

}  // namespace

Status connect_member(const rv::factory::Address& address, const launch::ResolvedConfig& config,
                      milliseconds connect_timeout, const std::string& client,
                      std::unique_ptr<rv::Client>* out) {
  rv::factory::Options options;
  options.job_id = config.job_id;
  options.token = config.token;
  options.client = client;
  options.connect_timeout = connect_timeout;
  options.request_timeout = std::min(milliseconds(config.timeout_ms), milliseconds(10000));
  options.agent_socket = config.agent_socket;
  options.tls = config.tls;
  options.tls_server = config.tls_server;
  return rv::factory::connect_client(address, options, out);
}

uint32_t next_comm_number(const std::string& job_id) {
  static std::mutex mu;
  static std::map<std::string, uint32_t> generations;
  std::lock_guard<std::mutex> lock(mu);
  return ++generations[job_id];
}

Status rendezvous_join(RendezvousRequest req, const MakeId& make_id, RendezvousResult* out) {
  const int rank = req.info.rank;
  const std::string who = cc::who(rank, req.info.host, req.info.pid);
  const rv::factory::Address& address = req.address;
  const std::string where = address.where();
  // Rank 0 hosts the server an address names unless the job has its own
  // (CC_RENDEZVOUS=external); with an etcd cluster the election decides who
  // hosts it (rendezvous/factory/elected.hpp), whatever CC_RENDEZVOUS says.
  rv::factory::Address connect_to = address;
  if (rank == 0 && server_in_rank0(address, req.config.rendezvous)) {
    const rv::factory::ServerAt& server = *address.server();
    // The server lives as long as rank 0's communicator: it keeps the jobs'
    // keys for that long unless a job TTL was asked for.
    if (Status st = EmbeddedServerRef::acquire(server.any(), server.port, req.config.token,
                                               req.config.tls_server, &out->server,
                                               milliseconds(req.config.job_ttl_or(0)));
        !st.ok())
      return make_status(st.code, who + ": " + st.message);
    connect_to = address.on_loopback();  // our own server: no hairpin through NAT
  }
  out->rendezvous = connect_to;
  if (Status st = connect_member(connect_to, req.config, remaining(req.deadline),
                                 "cc " CC_VERSION_STRING " comm", &out->client);
      !st.ok())
    return make_status(st.code, who + ": could not reach the rendezvous at " + where + " (job '" +
                                    req.config.job_id + "'): " + st.message);
  rv::Join join;
  if (rank == 0 || req.makes_id) {
    CC_RETURN_IF_ERROR(make_id(&join.unique_id));
  }
  out->comm_number = req.comm_number != 0 ? req.comm_number : next_comm_number(req.config.job_id);
  join.info = std::move(req.info);
  join.info.comm_number = out->comm_number;
  join.timeout_ms = static_cast<uint32_t>(remaining(req.deadline).count());
  rv::Joined joined;
  if (Status st = out->client->join(join, &joined); !st.ok())
    return make_status(st.code, who + ": joining communicator " + std::to_string(out->comm_number) +
                                    " of job '" + req.config.job_id + "' at " + where +
                                    " failed: " + st.message);
  out->unique_id = std::move(joined.unique_id);
  out->generation = joined.generation;
  out->rank = joined.rank;
  out->failed = std::move(joined.failed);
  out->seat = std::move(joined.seat);
  if (out->generation > 0)
    log().warn(
        "{}: joined communicator {} of job '{}' as a replacement, in its generation {} "
        "(replacing ranks {}): take this rank's state from a survivor",
        who, out->comm_number, req.config.job_id, out->generation, rank_list(out->failed));
  out->members = std::move(joined.members);
  // What the server wants every rank to know (a rank behind NAT, say).
  for (size_t start = 0; start < joined.notice.size();) {
    size_t end = joined.notice.find('\n', start);
    if (end == std::string::npos) end = joined.notice.size();
    log().warn("{}: {}", who, printable(joined.notice.substr(start, end - start)));
    start = end + 1;
  }
  return Status::success();
}

}  // namespace cc::comm
