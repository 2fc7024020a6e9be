#include "lib/comm/startup.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "common/log.hpp"
#include "common/return_if_error.hpp"
#include "common/who.hpp"
#include "lib/comm/init_listener.hpp"
#include "lib/comm/preflight.hpp"
#include "lib/launch/nccl_net.hpp"
#include "lib/launch/netif.hpp"
#include "rendezvous/factory/address.hpp"

namespace cc::comm {
namespace {

// The NCCL_SOCKET_IFNAME value this process set for NCCL, so a later
// communicator does not take it for the user's.
std::mutex& ifname_mu() {
  static std::mutex mu;
  return mu;
}
std::string& ifname_set_by_cc() {
  static std::string value;
  return value;
}

bool is_loopback(const std::string& addr) { return addr.rfind("127.", 0) == 0 || addr == "::1"; }

// NCCL's sockets go over the interface that reaches the rendezvous at `addr`
// (the address's route host: not a Docker bridge the other hosts cannot
// reach), unless the user set NCCL_SOCKET_IFNAME. Fills what the
// reachability test says about the choice, and returns the
// NCCL_SOCKET_IFNAME NCCL will see ("" for none).
std::string choose_interface(const StartRequest& req, const std::string& addr,
                             const std::string& who, PreflightSetup* setup) {
  const char* env = req.getenv("NCCL_SOCKET_IFNAME");
  std::string current = env != nullptr ? env : "";
  bool by_cc = false;
  {
    std::lock_guard<std::mutex> lock(ifname_mu());
    by_cc = !current.empty() && current == ifname_set_by_cc();
  }
  const settings::Getenv choose_env = [&](const char* name) -> const char* {
    if (by_cc && std::strcmp(name, "NCCL_SOCKET_IFNAME") == 0) return nullptr;
    return req.getenv(name);
  };
  launch::IfnameChoice choice;
  if (Status st = launch::choose_nccl_socket_ifname(addr, choose_env, &choice); !st.ok()) {
    log().warn("{}: {}; leaving NCCL to choose its network interface", who, st.message);
    return current;
  }
  if (choice.from_user) {
    setup->user_ifname = choice.ifname;
    launch::Route route;  // for messages only: where the rendezvous is reached from
    if (launch::route_source_for(addr, &route).ok()) {
      setup->route_ifname = route.ifname;
      setup->route_addr = route.source_address;
    }
    return current;
  }
  setup->route_ifname = choice.route.ifname;
  setup->route_addr = choice.route.source_address;
  // Loopback reaches only this host: NCCL's own choice (which skips lo) is
  // right there, and stays right when other hosts join a node's 127.0.0.1.
  const std::string& src = choice.route.source_address;
  if (choice.ifname.empty() || is_loopback(src)) return current;
  const std::string value = "=" + choice.ifname;
  if (by_cc) return current;  // an earlier communicator's choice stays
  if (req.set_env && setenv("NCCL_SOCKET_IFNAME", value.c_str(), 0) == 0) {
    std::lock_guard<std::mutex> lock(ifname_mu());
    ifname_set_by_cc() = value;
  }
  log().info("{}: NCCL_SOCKET_IFNAME={} (the route to {} leaves from {})", who, value, addr, src);
  return value;
}

}  // namespace

Status start(StartRequest req, const MakeId& make_id, RendezvousResult* out) {
  rv::MemberInfo& info = req.rendezvous.info;
  const std::string who = cc::who(info.rank, info.host, info.pid);
  const rv::factory::Address& address = req.rendezvous.address;
  PreflightSetup setup;
  if (Status st = preflight_enabled(req.getenv, &setup.enabled); !st.ok())
    return make_status(st.code, who + ": " + st.message);

  // The address NCCL will use, as NCCL works it out from its environment.
  const std::string nccl_ifname = choose_interface(req, address.route_host(), who, &setup);
  const settings::Getenv nccl_env = [&](const char* name) -> const char* {
    if (std::strcmp(name, "NCCL_SOCKET_IFNAME") == 0)
      return nccl_ifname.empty() ? nullptr : nccl_ifname.c_str();
    return req.getenv(name);
  };
  launch::NcclSocket sock;
  if (Status st = launch::nccl_socket(nccl_env, &sock); !st.ok()) {
    if (setup.enabled) setup.cannot_start = make_status(st.code, who + ": " + st.message);
  } else {
    info.nccl_addr = sock.addr;
  }
  if (info.nccl_addr.empty()) info.nccl_addr = setup.route_addr;
  setup.host_key =
      req.host_key_override.empty() ? launch::nccl_host_key(req.getenv) : req.host_key_override;
  info.host_key = setup.host_key;  // the rendezvous tells GPUs apart by it, as NCCL does
  setup.addr = req.addr_override.empty() ? sock.addr : req.addr_override;
  setup.ifname = sock.ifname;
  if (!req.addr_override.empty()) info.nccl_addr = req.addr_override;
  if (!sock.link_local) preflight_listen(&setup, who);

  const bool embedded = server_in_rank0(address, req.rendezvous.config.rendezvous);
  const std::string job_id = req.rendezvous.config.job_id;
  const auto deadline = req.rendezvous.deadline;
  const int rank = info.rank;
  const auto join_start = std::chrono::steady_clock::now();
  CC_RETURN_IF_ERROR(rendezvous_join(std::move(req.rendezvous), make_id, out));
  log().debug("{}: joined communicator {} in {} ms (connecting, making the NCCL id where this "
              "rank makes one, and waiting for every rank to join)",
              who, out->comm_number,
              std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - join_start)
                  .count());

  InitListener listener(*out->client, who, rank, out->comm_number, out->members, embedded);
  if (!setup.cannot_start.ok()) return listener.conclude(setup.cannot_start);
  // A replacement for a failed rank joins a later generation of a running
  // communicator: the survivors take no test with it (they recover through
  // the rendezvous), so it has none to take.
  if (out->generation > 0) return Status::success();
  if (Status st = run_preflight(*out->client, job_id, out->comm_number, rank, setup, deadline, who);
      !st.ok()) {
    // A member's failure names its cause best where the news says it.
    if (auto news = listener.news()) return listener.conclude(std::move(*news), true);
    return listener.conclude(
        make_status(st.code, who + ": cc_comm_init cannot finish: " + st.message), true);
  }
  return Status::success();
}

}  // namespace cc::comm
