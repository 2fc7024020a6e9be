// A communicator member without NCCL, for the heartbeat tests: joins job
// "netns-hb" as RANK of WORLD, then heartbeats every HB_MS and reports the
// first peer event, or a heartbeat that fails, or silence for RUN_MS.
//   netns_member HOST PORT RANK WORLD HB_MS RUN_MS
// Lines on stdout (wall-clock milliseconds in at_ms):
//   joined | event KIND rank R host H at_ms T: REASON | hbfail at_ms T: WORDS | quiet
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <unistd.h>

#include "rendezvous/frame_client.hpp"
#include "tests/common/peer_event_kind_name.hpp"

namespace {
long long wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: netns_member HOST PORT RANK WORLD HB_MS RUN_MS\n");
    return 2;
  }
  using namespace std::chrono;
  const int rank = std::atoi(argv[3]);
  const int world = std::atoi(argv[4]);
  const milliseconds hb(std::atoi(argv[5]));
  const milliseconds run(std::atoi(argv[6]));

  cc::rv::FrameClientOptions o;
  o.addr = argv[1];
  o.port = std::atoi(argv[2]);
  o.job_id = "netns-hb";
  o.client = "cc netns_member";
  o.connect_timeout = milliseconds(10000);
  o.request_timeout = hb * 2;
  std::unique_ptr<cc::rv::Client> client;
  if (cc::Status s = cc::rv::connect_frame_client(o, &client); !s.ok()) {
    std::printf("hbfail at_ms %lld: %s\n", wall_ms(), s.message.c_str());
    return 3;
  }
  cc::rv::Join join;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  join.info.rank = rank;
  join.info.world_size = world;
  join.info.host = std::string(host) + "-rank" + std::to_string(rank);
  join.info.pid = static_cast<uint32_t>(getpid());
  join.info.nccl_version = 22809;
  if (rank == 0) join.unique_id.assign(128, 0x5a);
  join.timeout_ms = 10000;
  cc::rv::Joined joined;
  if (cc::Status s = client->join(join, &joined); !s.ok()) {
    std::printf("hbfail at_ms %lld: join: %s\n", wall_ms(), s.message.c_str());
    return 3;
  }
  std::printf("joined\n");
  std::fflush(stdout);

  const auto end = steady_clock::now() + run;
  while (steady_clock::now() < end) {
    if (auto ev = client->next_event(hb)) {
      std::printf("event %s rank %d host %s at_ms %lld: %s\n",
                  cc::test::peer_event_kind_name(ev->kind), ev->rank, ev->host.c_str(), wall_ms(),
                  ev->reason.c_str());
      return 0;
    }
    if (cc::Status s = client->heartbeat(0); !s.ok()) {
      std::printf("hbfail at_ms %lld: %s\n", wall_ms(), s.message.c_str());
      return 4;
    }
  }
  (void)client->leave();
  std::printf("quiet\n");
  return 0;
}
