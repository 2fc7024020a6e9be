// The network: interfaces, the route to MASTER_ADDR and what answers there.
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/settings.hpp"
#include "lib/launch/netif.hpp"
#include "rendezvous/factory/connect.hpp"
#include "rendezvous/factory/elected.hpp"
#include "tools/cc-doctor/doctor_report.hpp"

namespace cc::tools::doctor {
namespace {

bool looks_like_container_bridge(const std::string& name) {
  for (const char* prefix : {"docker", "br-", "veth", "cni", "podman", "virbr", "lxcbr"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

bool is_loopback_text(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1" || addr == "[::1]";
}

bool is_loopback_address(const std::string& numeric) {
  return numeric.rfind("127.", 0) == 0 || numeric == "::1";
}

// target: the rendezvous address's route host (rv::factory::Address).
void check_route(Report* r, const std::string& target) {
  const std::string where = target;
  Status s = launch::route_source_for(target, &r->route);
  if (!s.ok()) {
    r->route_error = s.message;
    r->add("network", Level::error, s.message);
    return;
  }
  r->route_found = true;
  if (is_loopback_address(r->route.target) && !is_loopback_text(target)) {
    r->add("network", Level::warn,
           "MASTER_ADDR " + where + " resolves to the loopback address " + r->route.target +
               " here, so ranks on other hosts cannot use this name for this host",
           "give MASTER_ADDR as an address the other hosts reach, or fix the host's entry in "
           "/etc/hosts "
           "(Debian maps the host name to 127.0.1.1)");
  }
  if (looks_like_container_bridge(r->route.ifname)) {
    r->add(
        "network", Level::warn,
        "the route to " + where + " leaves through " + r->route.ifname +
            ", a container bridge: other hosts cannot reach this address",
        "run the container with --network host, or set NCCL_SOCKET_IFNAME to the host's interface");
  }
  const char* user = std::getenv("NCCL_SOCKET_IFNAME");
  if (user != nullptr && *user != '\0' && !launch::nccl_ifname_matches(user, r->route.ifname)) {
    r->add("network", Level::warn,
           std::string("NCCL_SOCKET_IFNAME=") + user + " excludes " + r->route.ifname +
               ", the interface whose route reaches " + where,
           "unset NCCL_SOCKET_IFNAME (cc then chooses " + r->route.ifname + ") or include " +
               r->route.ifname + " in it");
  }
}

// cc's own server: what answers at its host and port, in detail.
void check_probe(Report* r, const Options& o, const rv::factory::ServerAt& server) {
  r->probe = probe_rendezvous(server.host, server.port, o.job_id, o.timeout_ms);
  const std::string where = server.text();
  const Probe& p = r->probe;
  const char* fix = "";
  switch (p.answer) {
    case Answer::not_tried:
      return;
    case Answer::cc_rendezvous:
      r->add("rendezvous", Level::info, where + " is reachable: " + p.detail);
      if (p.auth_required &&
          settings::find(settings::Id::token, settings::process_env()).var == nullptr &&
          settings::find(settings::Id::token_file, settings::process_env()).var == nullptr) {
        r->add("rendezvous", Level::warn,
               "the rendezvous at " + where + " requires a token and none is set here",
               "set CC_RENDEZVOUS_TOKEN or CC_RENDEZVOUS_TOKEN_FILE to the token cc-rendezvous was "
               "given");
      }
      return;
    case Answer::refused:
      fix = "nothing listens there: start rank 0 or cc-rendezvous first, or check the port";
      break;
    case Answer::unreachable:
      fix = "unreachable: firewall, wrong address, or Docker bridge without --network host";
      break;
    case Answer::other_program:
    case Answer::silent:
    case Answer::closed:
      fix = "another program holds the port: choose another MASTER_PORT or stop that program";
      break;
    case Answer::cc_refused:
      fix = "check CC_JOB_ID and the token, and the rendezvous's log";
      break;
    case Answer::unresolved:
      fix = "check the spelling of MASTER_ADDR, /etc/hosts or DNS, or give a numeric address";
      break;
  }
  const char* joint = p.answer == Answer::unreachable ? " is " : ": ";
  r->add("rendezvous", Level::error, where + joint + p.detail, fix);
}

// An etcd cluster: reaches it as a job's process would (auth, TLS and the
// plugin included) and says who serves the job, without campaigning.
void check_store(Report* r, const Options& o, const rv::factory::Address& address) {
  rv::factory::Options options;
  options.job_id = o.job_id;
  options.client = "cc-doctor";
  options.connect_timeout = std::chrono::milliseconds(o.timeout_ms);
  options.request_timeout = std::chrono::milliseconds(o.timeout_ms);
  const std::string fix =
      "start the rendezvous or mend the network to it, check the address and the CC_ETCD_* "
      "settings (auth file, CA), and see 'etcdctl endpoint status --cluster'";
  std::unique_ptr<rv::Election> election;
  if (Status s = rv::factory::open_election(address, options, &election); !s.ok()) {
    r->add("rendezvous", Level::error, "cannot use the rendezvous: " + s.message, fix);
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + options.request_timeout;
  std::string daemons, job;
  Status s = election->leader("", deadline, &daemons);
  if (s.ok() && daemons.empty()) s = election->leader(o.job_id, deadline, &job);
  if (!s.ok()) {
    r->add("rendezvous", Level::error, "cannot use the rendezvous: " + s.message, fix);
    return;
  }
  const std::string who =
      !daemons.empty() ? "the cc-rendezvous daemons' leader serves it at " + daemons
      : !job.empty()   ? "job '" + o.job_id + "' hosts its server at " + job
                       : "nobody serves job '" + o.job_id +
                           "' yet: its first rank or cc-run will, or a cc-rendezvous --etcd";
  r->add("rendezvous", Level::info,
         "the rendezvous at " + address.where() + " answers (job '" + o.job_id + "'): " + who);
}

}  // namespace

void collect_network(Report* r, const Options& o) {
  if (Status s = launch::list_interfaces(&r->interfaces); !s.ok())
    r->add("network", Level::error, s.message);
  bool external_up = false;
  for (const auto& i : r->interfaces)
    if (i.up && !i.loopback && !i.addresses.empty()) external_up = true;
  if (!external_up) {
    r->add("network", Level::warn,
           "no interface but loopback is up with an address: only one host can take part",
           "bring up the network interface; in Docker use --network host for multi-host jobs");
  }

  r->master_addr = o.master_addr;
  r->master_addr_var = o.master_addr_var;
  r->master_port = o.master_port;
  r->master_port_var = o.master_port_var;
  if (r->master_addr.empty()) {
    r->add("rendezvous", Level::info,
           "MASTER_ADDR is not set: the route and rendezvous checks were skipped",
           "pass --master-addr HOST --master-port PORT, or set MASTER_ADDR and MASTER_PORT");
    return;
  }
  rv::factory::Address address;
  if (Status s = rv::factory::parse_address(r->master_addr, r->master_port, &address); !s.ok()) {
    r->add("rendezvous", Level::error, r->master_addr_var + ": " + s.message);
    return;
  }
  r->master_port_apart = address.needs_port();
  check_route(r, address.route_host());
  if (address.needs_port() && r->master_port == 0) {
    r->add("rendezvous", Level::info, "MASTER_PORT is not set: the rendezvous check was skipped",
           "pass --master-port PORT, or set MASTER_PORT");
    return;
  }
  if (const std::optional<rv::factory::ServerAt>& server = address.server())
    check_probe(r, o, *server);
  else
    check_store(r, o, address);
}

}  // namespace cc::tools::doctor
