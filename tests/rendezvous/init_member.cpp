// One rank of a communicator's start without a GPU: cc_comm_init's own path
// up to NCCL (lib/comm/startup: NCCL's interface, the join, the
// reachability test), then a stand-in for NCCL's init that listens to the
// rendezvous as the real one does (lib/comm/init_listener). Started with the
// launch variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, CC_JOB_ID,
// CC_RENDEZVOUS, CC_TIMEOUT_MS, CC_PREFLIGHT, NCCL_SOCKET_IFNAME...).
//
//   init_member ok [HOLD_MS]     the stand-in init takes HOLD_MS (default 300)
//   init_member fail WORDS       the stand-in init fails after 200 ms with WORDS
//                                (with INIT_FAIL_RANK=R only rank R fails; the
//                                others wait as in hang, for launchers that
//                                start every rank alike)
//   init_member hang             the stand-in init never ends by itself
//
// Lines on stdout, times in wall-clock milliseconds:
//   START at_ms T              before the join
//   STARTED at_ms T            joined, reachability test passed
//   READY at_ms T              the stand-in init finished
//   ERROR at_ms T code C: W    cc_comm_init would return C with a message W
// INIT_TLS_CA, INIT_TLS_CERT, INIT_TLS_KEY and INIT_TLS_CLIENT_CA set the
// config's tls_* fields (over CC_TLS_*): the client's, and rank 0's embedded
// server's.
// Exit status 0 after READY, 1 after ERROR, 2 for bad arguments.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "common/settings.hpp"
#include "common/who.hpp"
#include "lib/comm/init_listener.hpp"
#include "lib/comm/startup.hpp"
#include "lib/launch/config.hpp"
#include "lib/launch/env.hpp"
#include "lib/launch/host_name.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

long long wall_ms() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "TAG at_ms T", then `rest` when given.
void say(const char* tag, const std::string& rest = {}) {
  std::printf("%s at_ms %lld%s%s\n", tag, wall_ms(), rest.empty() ? "" : " ", rest.c_str());
  std::fflush(stdout);
}

int error(const cc::Status& st) {
  say("ERROR", "code " + std::to_string(st.code) + ": " + st.message);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "ok" && mode != "fail" && mode != "hang") {
    std::fprintf(stderr, "usage: init_member ok [HOLD_MS] | fail WORDS | hang\n");
    return 2;
  }
  const auto env = cc::settings::process_env();
  cc::launch::LaunchInfo launch;
  if (cc::Status st = cc::launch::read_launch_info(env, &launch); !st.ok()) return error(st);
  cc_config_t fields = CC_CONFIG_INIT;
  fields.tls_ca = env("INIT_TLS_CA");
  fields.tls_cert = env("INIT_TLS_CERT");
  fields.tls_key = env("INIT_TLS_KEY");
  fields.tls_client_ca = env("INIT_TLS_CLIENT_CA");
  cc::launch::ResolvedConfig config;
  if (cc::Status st = cc::launch::resolve_config(&fields, env, &config); !st.ok()) return error(st);
  if (const char* only = env("INIT_FAIL_RANK");
      mode == "fail" && only != nullptr && std::atoi(only) != launch.rank)
    mode = "hang";

  cc::comm::StartRequest request;
  if (cc::Status st = cc::rv::factory::parse_address(launch.master_addr, launch.master_port,
                                                     &request.rendezvous.address);
      !st.ok())
    return error(st);
  request.rendezvous.config = config;
  request.rendezvous.info.rank = launch.rank;
  request.rendezvous.info.world_size = launch.world_size;
  request.rendezvous.info.host = cc::launch::host_name();
  request.rendezvous.info.pid = static_cast<uint32_t>(getpid());
  request.rendezvous.info.nccl_version = 22809;
  const auto deadline = Clock::now() + milliseconds(config.timeout_ms);
  request.rendezvous.deadline = deadline;
  const std::string who =
      cc::who(launch.rank, request.rendezvous.info.host, request.rendezvous.info.pid);
  say("START");
  cc::comm::RendezvousResult joined;
  cc::Status st = cc::comm::start(
      std::move(request),
      [](std::vector<uint8_t>* id) {
        id->assign(128, 0x5a);
        return cc::Status::success();
      },
      &joined);
  auto release = [&] {
    joined.client.reset();
    if (joined.server) joined.server->release(config.job_id, milliseconds(1000));
  };
  if (!st.ok()) {
    release();
    return error(st);
  }
  say("STARTED");

  const bool embedded = config.rendezvous == CC_RENDEZVOUS_EMBEDDED;
  cc::comm::InitListener listener(*joined.client, who, launch.rank, joined.comm_number,
                                  joined.members, embedded);
  const long long hold = mode == "ok" && argc > 2 ? std::atoll(argv[2]) : 300;
  const auto fail_at = Clock::now() + milliseconds(200);
  const auto ready_at = Clock::now() + milliseconds(hold);
  for (;;) {
    if (auto news = listener.news()) {
      st = listener.conclude(std::move(*news));
      break;
    }
    const auto now = Clock::now();
    if (mode == "fail" && now >= fail_at) {
      st =
          listener.conclude(cc::make_status(CC_ERR_NCCL, "ncclCommInitRankConfig failed on " + who +
                                                             ": " + (argc > 2 ? argv[2] : "")));
      break;
    }
    if (mode == "ok" && now >= ready_at) break;
    if (now >= deadline) {
      st =
          listener.conclude(cc::make_status(CC_ERR_TIMEOUT, who + ": the stand-in init timed out"));
      break;
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
  if (!st.ok()) {
    release();
    return error(st);
  }
  say("READY");
  (void)joined.client->leave();
  release();
  return 0;
}
