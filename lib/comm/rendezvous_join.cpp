#include "lib/comm/rendezvous_join.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>

#include "common/log.hpp"
#include "common/printable.hpp"
#include "common/settings.hpp"
#include "common/who.hpp"
#include "lib/comm/deadline.hpp"
#include "lib/launch/etcd.hpp"

namespace cc::comm {
namespace {

using std::chrono::milliseconds;

bool is_ipv6_literal(const std::string& addr) { return addr.find(':') != std::string::npos; }

std::string rank_list(const std::vector<int32_t>& ranks) {
  std::string out;
  for (int32_t r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out.empty() ? "none" : out;
}

milliseconds request_timeout(const RendezvousRequest& req) {
  return std::min(milliseconds(req.config.timeout_ms), milliseconds(10000));
}

Status connect_server(const RendezvousRequest& req, const std::string& addr,
                      std::unique_ptr<rv::Client>* out) {
  rv::ClientOptions options;
  options.addr = addr;
  options.port = req.port;
  options.job_id = req.config.job_id;
  options.token = req.config.token;
  options.client = "cc " CC_VERSION_STRING " comm";
  options.connect_timeout = remaining(req.deadline);
  options.request_timeout = request_timeout(req);
  options.agent_socket = req.config.agent_socket;
  return rv::Client::connect(options, out);
}

}  // namespace

// The rank's membership lease lives as long as the heartbeat window the
// control channel asks for later, so that asking makes no second lease.
Status connect_etcd_member(const std::string& addr, const launch::ResolvedConfig& config,
                           std::chrono::steady_clock::time_point deadline,
                           std::unique_ptr<rv::Client>* out) {
  rv::etcd::BackendOptions options;
  if (Status st = launch::etcd_options(addr, config.job_id, settings::process_env(), &options);
      !st.ok())
    return st;
  options.connect_timeout = remaining(deadline);
  options.request_timeout = std::min(milliseconds(config.timeout_ms), milliseconds(10000));
  options.heartbeat_window =
      milliseconds(static_cast<int64_t>(config.heartbeat_ms) * config.heartbeat_misses);
  options.member = true;
  return launch::connect_etcd(options, out);
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
  // An etcd cluster is the job's rendezvous whatever CC_RENDEZVOUS says: no
  // rank hosts a server, and the port is not used.
  const bool on_etcd = launch::is_etcd_address(req.addr);
  const std::string where = on_etcd ? req.addr : req.addr + ":" + std::to_string(req.port);
  std::string connect_addr = req.addr;
  if (rank == 0 && !on_etcd && req.config.rendezvous != CC_RENDEZVOUS_EXTERNAL) {
    const bool v6 = is_ipv6_literal(req.addr);
    // The server lives as long as rank 0's communicator: it keeps the jobs'
    // keys for that long unless a job TTL was asked for.
    if (Status st =
            EmbeddedServerRef::acquire(v6 ? "::" : "0.0.0.0", req.port, req.config.token,
                                       &out->server, milliseconds(req.config.job_ttl_or(0)));
        !st.ok())
      return make_status(st.code, who + ": " + st.message);
    connect_addr = v6 ? "::1" : "127.0.0.1";  // our own server: no hairpin through NAT
  }
  out->connect_addr = connect_addr;
  const Status reached =
      on_etcd ? connect_etcd_member(req.addr, req.config, req.deadline, &out->client)
              : connect_server(req, connect_addr, &out->client);
  if (!reached.ok())
    return make_status(reached.code, who + ": could not reach the rendezvous at " + where +
                                         " (job '" + req.config.job_id + "'): " + reached.message);
  rv::Join join;
  if (rank == 0) {
    if (Status st = make_id(&join.unique_id); !st.ok()) return st;
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
