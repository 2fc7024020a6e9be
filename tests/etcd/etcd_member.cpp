// One rank in its own process, for tests that kill a rank: joins generation 1
// of a job through the etcd backend, prints "joined" and waits to be killed.
// usage: etcd_member ADDRESS JOB RANK WORLD WINDOW_MS
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "rendezvous/etcd/backend.hpp"

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: etcd_member ADDRESS JOB RANK WORLD WINDOW_MS\n");
    return 2;
  }
  cc::rv::etcd::BackendOptions o;
  o.address = argv[1];
  o.job_id = argv[2];
  o.heartbeat_window = std::chrono::milliseconds(std::atoi(argv[5]));
  o.connect_timeout = std::chrono::milliseconds(10000);
  o.member = true;
  std::unique_ptr<cc::rv::etcd::Backend> b;
  if (cc::Status s = cc::rv::etcd::Backend::connect(o, &b); !s.ok()) {
    std::fprintf(stderr, "etcd_member: %s\n", s.message.c_str());
    return 1;
  }
  cc::rv::Join j;
  j.info.rank = std::atoi(argv[3]);
  j.info.world_size = std::atoi(argv[4]);
  j.info.comm_number = 1;
  j.info.host = "member-host";
  j.info.pid = static_cast<uint32_t>(::getpid());
  j.info.nccl_version = 22809;
  j.timeout_ms = 20000;
  cc::rv::Joined joined;
  if (cc::Status s = b->join(j, &joined); !s.ok()) {
    std::fprintf(stderr, "etcd_member: %s\n", s.message.c_str());
    return 1;
  }
  std::printf("joined\n");
  std::fflush(stdout);
  for (;;) ::pause();
}
