#include "tools/cc-run/hosted_server.hpp"

#include <chrono>
#include <optional>

#include "common/return_if_error.hpp"
#include "rendezvous/tls/env.hpp"

namespace cc::tools::run {

cc::Status start_hosted_server(const Options& o, const cc::launch::ResolvedConfig& config,
                               std::unique_ptr<cc::rv::Server>* out) {
  // Node 0 hosts the server the address names (none for an etcd cluster,
  // which is the rendezvous itself).
  const std::optional<cc::rv::factory::ServerAt>& hosted = o.rendezvous.server();
  if (o.node_rank != 0 || !hosted) return cc::Status::success();
  cc::rv::ServerOptions so;
  // One node without --master-addr: the ranks are all here, so the job's
  // keys need not be reachable from the network.
  so.bind_addr = o.nnodes == 1 && o.master_addr.empty() ? "127.0.0.1" : hosted->any();
  so.port = hosted->port;
  so.token = config.token;
  // The server lives as long as the launch: the jobs' keys stay that long
  // unless CC_JOB_TTL_MS asks for less.
  so.job_ttl = std::chrono::milliseconds(config.job_ttl_or(0));
  // TLS when CC_TLS_CERT and CC_TLS_KEY are set (CC_TLS_CLIENT_CA: mTLS).
  CC_RETURN_IF_ERROR(cc::rv::tls::server_context_from(cc::settings::process_env(), &so.tls));
  return cc::rv::Server::start(so, out);
}

void stop_hosted_server(cc::rv::Server& server, const Options& o, const std::string& job_id) {
  // Ranks on other nodes may still be members of the job.
  if (o.nnodes > 1) server.wait_job_idle(job_id, std::chrono::seconds(30));
  server.stop();
}

}  // namespace cc::tools::run
