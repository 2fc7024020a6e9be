// A rank of a two-rank job as cc_comm_init runs it, without CUDA or NCCL:
// the NCCL address is the source address of the route to MASTER_ADDR (the
// interface cc points NCCL's sockets at), then the library's rendezvous step
// (rank 0 hosts the embedded server on PORT). What the server tells the ranks
// (a NAT between a rank and the rendezvous) is logged as cc logs it, on
// stderr; stdout gets "JOINED nccl_addr ADDR", or "ERROR a message" (exit 1).
// Each rank stays HOLD_MS after joining, so rank 0's server outlives the join.
//   netns_nat_member MASTER_ADDR PORT RANK WORLD HOLD_MS
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/settings.hpp"
#include "lib/comm/rendezvous_join.hpp"
#include "lib/launch/netif.hpp"

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: netns_nat_member MASTER_ADDR PORT RANK WORLD HOLD_MS\n");
    return 2;
  }
  const std::string addr = argv[1];
  const int rank = std::atoi(argv[3]);
  cc::launch::IfnameChoice choice;
  if (cc::Status st =
          cc::launch::choose_nccl_socket_ifname(addr, cc::settings::process_env(), &choice);
      !st.ok()) {
    std::printf("ERROR %s\n", st.message.c_str());
    return 1;
  }
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  cc::comm::RendezvousRequest r;
  if (cc::Status st = cc::rv::factory::parse_address(addr, std::atoi(argv[2]), &r.address);
      !st.ok()) {
    std::fprintf(stderr, "%s\n", st.message.c_str());
    return 1;
  }
  r.config.job_id = "netns-nat";
  r.config.timeout_ms = 20000;
  r.info.rank = rank;
  r.info.world_size = std::atoi(argv[4]);
  r.info.host = host;
  r.info.pid = static_cast<uint32_t>(getpid());
  r.info.nccl_version = 22809;
  r.info.gpu_uuid = "GPU-netns-" + std::to_string(rank);
  r.info.nccl_addr = choice.route.source_address;
  r.comm_number = 1;
  r.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(r.config.timeout_ms);
  cc::comm::RendezvousResult out;
  const cc::Status st = cc::comm::rendezvous_join(
      std::move(r),
      [](std::vector<uint8_t>* id) {
        id->assign(128, 0x5a);
        return cc::Status::success();
      },
      &out);
  if (!st.ok()) {
    std::printf("ERROR %s\n", st.message.c_str());
    return 1;
  }
  std::printf("JOINED nccl_addr %s\n", choice.route.source_address.c_str());
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(argv[5])));
  return 0;
}
