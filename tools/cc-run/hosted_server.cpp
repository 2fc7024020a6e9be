#include "tools/cc-run/hosted_server.hpp"

#include <chrono>

#include "lib/launch/etcd.hpp"

namespace cc_run {

cc::Status start_hosted_server(const Options& o, const cc::launch::ResolvedConfig& config,
                               std::unique_ptr<cc::rv::Server>* out) {
  // On etcd the cluster is the rendezvous: no node hosts a server.
  if (o.node_rank != 0 || cc::launch::is_etcd_address(o.master_addr)) return cc::Status::success();
  cc::rv::ServerOptions so;
  // One node without --master-addr: the ranks are all here, so the job's
  // keys need not be reachable from the network.
  so.bind_addr = o.nnodes == 1 && o.master_addr.empty()         ? "127.0.0.1"
                 : o.master_addr.find(':') != std::string::npos ? "::"  // an IPv6 address
                                                                : "0.0.0.0";
  so.port = o.master_port;
  so.token = config.token;
  // The server lives as long as the launch: the jobs' keys stay that long
  // unless CC_JOB_TTL_MS asks for less.
  so.job_ttl = std::chrono::milliseconds(config.job_ttl_or(0));
  return cc::rv::Server::start(so, out);
}

void stop_hosted_server(cc::rv::Server& server, const Options& o, const std::string& job_id) {
  // Ranks on other nodes may still be members of the job.
  if (o.nnodes > 1) server.wait_job_idle(job_id, std::chrono::seconds(30));
  server.stop();
}

}  // namespace cc_run
