#include "tools/cc-rendezvous-bench/start_pair.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <string>
#include <vector>

#include "cc/cc.h"
#include "common/unique_fd.hpp"
#include "lib/comm/startup.hpp"

namespace cc::tools::rendezvous_bench {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

int free_port() {
  cc::UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

struct Outcome {
  cc::Status status;
  double ms = 0;
  cc::comm::RendezvousResult result;
};

}  // namespace

bool start_two(const PairSetup& setup, int round, double* ms) {
  const bool own_server = setup.server_port == 0;
  const int port = own_server ? free_port() : setup.server_port;
  const std::string job = setup.job_prefix + std::to_string(round);
  cc::rv::factory::Address address;
  if (cc::Status st = cc::rv::factory::parse_address(setup.address, port, &address); !st.ok()) {
    std::fprintf(stderr, "cc-rendezvous-bench: %s\n", st.message.c_str());
    return false;
  }
  auto rank = [&](int r) {
    return std::async(std::launch::async, [=] {
      cc::comm::StartRequest q;
      q.rendezvous.address = address;
      q.rendezvous.config.job_id = job;
      q.rendezvous.config.timeout_ms = 20000;
      if (!own_server) q.rendezvous.config.rendezvous = CC_RENDEZVOUS_EXTERNAL;
      q.rendezvous.config.agent_socket = setup.agent_socket;
      q.rendezvous.info.rank = r;
      q.rendezvous.info.world_size = 2;
      q.rendezvous.info.host = r == 0 || setup.one_host ? "pair-a" : "pair-b";
      q.rendezvous.info.pid = static_cast<uint32_t>(::getpid());
      q.rendezvous.info.nccl_version = 22809;
      q.rendezvous.comm_number = 1;
      q.rendezvous.deadline = Clock::now() + milliseconds(20000);
      const bool preflight = setup.preflight;
      q.getenv = [preflight](const char* name) -> const char* {
        if (std::string(name) == "CC_PREFLIGHT") return preflight ? "1" : "0";
        return nullptr;
      };
      q.set_env = false;
      q.host_key_override = q.rendezvous.info.host;  // two hosts to NCCL: the test runs
      q.addr_override = "127.0.0.1";
      Outcome o;
      const auto t0 = Clock::now();
      o.status = cc::comm::start(
          std::move(q),
          [](std::vector<uint8_t>* id) {
            id->assign(128, 0x5a);
            return cc::Status::success();
          },
          &o.result);
      o.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      return o;
    });
  };
  auto f1 = rank(1);
  auto f0 = rank(0);
  Outcome o0 = f0.get(), o1 = f1.get();
  for (Outcome* o : {&o0, &o1})
    if (o->result.client) (void)o->result.client->leave();
  o1.result.client.reset();
  o0.result.client.reset();
  if (o0.result.server) o0.result.server->release(job, milliseconds(2000));
  if (!o0.status.ok() || !o1.status.ok()) {
    std::printf("start of 2 ranks FAILED: %s\n",
                (o0.status.ok() ? o1.status : o0.status).message.c_str());
    return false;
  }
  *ms = std::max(o0.ms, o1.ms);
  return true;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

bool run_start_pair(int rounds) {
  std::vector<double> on, off;
  // Alternate, so a slow spell of the machine hits both alike.
  PairSetup without, with;
  without.preflight = false;
  without.job_prefix = "pair-off-";
  with.job_prefix = "pair-on-";
  for (int i = 0; i < rounds; ++i) {
    double ms = 0;
    if (!start_two(without, i, &ms)) return false;
    off.push_back(ms);
    if (!start_two(with, i, &ms)) return false;
    on.push_back(ms);
  }
  const double m_off = median(off), m_on = median(on);
  std::printf(
      "start of 2 ranks on loopback as two hosts, median of %d: %.2f ms without the "
      "reachability test, %.2f ms with it: the test adds %.2f ms\n",
      rounds, m_off, m_on, m_on - m_off);
  return true;
}

}  // namespace cc::tools::rendezvous_bench
