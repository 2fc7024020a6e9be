// One rank of a communicator's rendezvous, as cc_comm_init runs it but
// without a GPU: the join through lib/comm (rendezvous_join, here with an
// etcd address), rank 0's id handed to every rank, then the control channel
// on the process's watchdog, as a ready communicator has.
// usage: etcd_comm_member ADDRESS JOB RANK WORLD
// The deadline and heartbeats come from CC_TIMEOUT_MS, CC_HEARTBEAT_MS and
// CC_HEARTBEAT_MISSES. stdout: "READY <rank> <id in hex>", then "FAILED
// <message>" when the watchdog learns of a failure (exit 3); or "ERROR <code>
// <message>" when the join fails (exit 1). stdin: "leave" leaves (prints "LEFT").
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "common/settings.hpp"
#include "lib/comm/rendezvous_join.hpp"
#include "lib/launch/config.hpp"
#include "lib/watch/control_channel.hpp"
#include "lib/watch/watchdog.hpp"

namespace {

class ChannelWatch final : public cc::watch::Watched {
 public:
  explicit ChannelWatch(cc::watch::ControlChannel& channel) : channel_(channel) {}
  void watch_tick(std::chrono::steady_clock::time_point now) override {
    if (auto f = channel_.poll(now, 0)) {
      std::printf("FAILED %s\n", f->story.c_str());
      std::fflush(stdout);
      std::_Exit(3);
    }
  }

 private:
  cc::watch::ControlChannel& channel_;
};

std::string hex(const std::vector<uint8_t>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: etcd_comm_member ADDRESS JOB RANK WORLD\n");
    return 2;
  }
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  cc::comm::RendezvousRequest req;
  if (cc::Status st = cc::rv::factory::parse_address(argv[1], &req.address); !st.ok()) {
    std::printf("ERROR %d %s\n", st.code, st.message.c_str());
    return 1;
  }
  if (cc::Status st = cc::launch::resolve_config(nullptr, cc::settings::process_env(), &req.config);
      !st.ok()) {
    std::printf("ERROR %d %s\n", st.code, st.message.c_str());
    return 1;
  }
  req.config.job_id = argv[2];
  req.info.rank = std::atoi(argv[3]);
  req.info.world_size = std::atoi(argv[4]);
  req.info.host = host;
  req.info.pid = static_cast<uint32_t>(getpid());
  req.info.nccl_version = 22809;
  req.deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(req.config.timeout_ms);
  const int rank = req.info.rank;
  const cc::launch::ResolvedConfig config = req.config;

  // Rank 0's id: its pid spelled into 128 bytes, so each job's id differs.
  cc::comm::RendezvousResult joined;
  const cc::Status st = cc::comm::rendezvous_join(
      req,
      [](std::vector<uint8_t>* id) {
        const uint32_t pid = static_cast<uint32_t>(getpid());
        id->resize(128);
        for (size_t i = 0; i < id->size(); ++i)
          (*id)[i] = static_cast<uint8_t>((pid >> (8 * (i % 4))) + i);
        return cc::Status::success();
      },
      &joined);
  if (!st.ok()) {
    std::printf("ERROR %d %s\n", st.code, st.message.c_str());
    return 1;
  }

  cc::watch::ChannelOptions o;
  o.rank = rank;
  o.host = host;
  o.pid = static_cast<uint32_t>(getpid());
  o.comm_number = joined.comm_number;
  o.interval = std::chrono::milliseconds(config.heartbeat_ms);
  o.misses = config.heartbeat_misses;
  o.server_in_rank0 = false;
  cc::watch::ControlChannel channel(*joined.client, o);
  if (cc::Status s = channel.start(); !s.ok()) {
    std::printf("ERROR %d %s\n", s.code, s.message.c_str());
    return 1;
  }
  ChannelWatch watched(channel);
  cc::watch::Watchdog::instance().add(&watched);
  std::printf("READY %d %s\n", rank, hex(joined.unique_id).c_str());
  std::fflush(stdout);

  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "leave") {
      cc::watch::Watchdog::instance().remove(&watched);
      const cc::Status s = joined.client->leave();
      if (s.ok())
        std::printf("LEFT\n");
      else
        std::printf("ERROR %d %s\n", s.code, s.message.c_str());
      std::fflush(stdout);
      return s.ok() ? 0 : 1;
    }
  }
  std::this_thread::sleep_for(std::chrono::seconds(60));
  cc::watch::Watchdog::instance().remove(&watched);
  return 0;
}
