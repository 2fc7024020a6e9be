// One rank of a job as the watchdog sees it, without CUDA: joins through the
// rendezvous, hands its control channel to the process's watchdog and waits.
// stdout: "READY <rank>", then "FAILED <message>" when the watchdog learns of a
// failure (exit 3), or "LEFT" after "leave" arrives on stdin (exit 0).
//   failure_member ADDR PORT JOB RANK WORLD [--interval MS] [--misses N]
//                  [--external] [--no-watch] [--completed N] [--token T]
// stdin commands: "leave", "abort REASON", "behind SEQ" (prints "BEHIND <message>").
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "lib/watch/control_channel.hpp"
#include "lib/watch/watchdog.hpp"
#include "rendezvous/frame_client.hpp"

namespace {

class ChannelWatch final : public cc::watch::Watched {
 public:
  ChannelWatch(cc::watch::ControlChannel& channel, uint64_t completed)
      : channel_(channel), completed_(completed) {}
  void watch_tick(std::chrono::steady_clock::time_point now) override {
    if (auto f = channel_.poll(now, completed_)) {
      std::printf("FAILED %s\n", f->story.c_str());
      std::fflush(stdout);
      std::_Exit(3);
    }
  }

 private:
  cc::watch::ControlChannel& channel_;
  uint64_t completed_;
};

char hostname_buf[256];

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: failure_member ADDR PORT JOB RANK WORLD [options]\n");
    return 2;
  }
  cc::watch::ChannelOptions opt;
  opt.rank = std::atoi(argv[4]);
  const int world = std::atoi(argv[5]);
  bool watch = true;
  uint64_t completed = 0;
  std::string token;
  for (int i = 6; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--interval" && i + 1 < argc)
      opt.interval = std::chrono::milliseconds(std::atoi(argv[++i]));
    else if (a == "--misses" && i + 1 < argc)
      opt.misses = std::atoi(argv[++i]);
    else if (a == "--external")
      opt.server_in_rank0 = false;
    else if (a == "--no-watch")
      watch = false;
    else if (a == "--completed" && i + 1 < argc)
      completed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--token" && i + 1 < argc)
      token = argv[++i];
  }
  gethostname(hostname_buf, sizeof hostname_buf - 1);
  opt.host = hostname_buf;
  opt.pid = static_cast<uint32_t>(getpid());
  opt.comm_number = 1;

  cc::rv::FrameClientOptions co;
  co.addr = argv[1];
  co.port = std::atoi(argv[2]);
  co.job_id = argv[3];
  co.token = token;
  co.connect_timeout = std::chrono::milliseconds(10000);
  std::unique_ptr<cc::rv::Client> client;
  if (cc::Status st = cc::rv::connect_frame_client(co, &client); !st.ok()) {
    std::printf("ERROR %s\n", st.message.c_str());
    return 1;
  }
  cc::rv::Join join;
  join.info.rank = opt.rank;
  join.info.world_size = world;
  join.info.comm_number = opt.comm_number;
  join.info.host = opt.host;
  join.info.pid = opt.pid;
  join.info.nccl_version = 22809;
  if (opt.rank == 0) join.unique_id.assign(128, 7);
  join.timeout_ms = 20000;
  cc::rv::Joined joined;
  if (cc::Status st = client->join(join, &joined); !st.ok()) {
    std::printf("ERROR %s\n", st.message.c_str());
    return 1;
  }
  cc::watch::ControlChannel channel(*client, opt);
  ChannelWatch watched(channel, completed);
  if (watch) {
    if (cc::Status st = channel.start(); !st.ok()) {
      std::printf("ERROR %s\n", st.message.c_str());
      return 1;
    }
    cc::watch::Watchdog::instance().add(&watched);
  }
  std::printf("READY %d\n", opt.rank);
  std::fflush(stdout);

  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "leave") {
      if (watch) cc::watch::Watchdog::instance().remove(&watched);
      cc::Status st = client->leave();
      std::printf(st.ok() ? "LEFT\n" : "ERROR %s\n", st.message.c_str());
      std::fflush(stdout);
      return st.ok() ? 0 : 1;
    }
    if (line.rfind("abort ", 0) == 0) {
      // Twice, as cc_comm_abort may be called again: the server announces once.
      channel.announce_abort(line.substr(6));
      channel.announce_abort(line.substr(6));
      std::printf("ABORTED\n");
      std::fflush(stdout);
      continue;
    }
    if (line.rfind("behind ", 0) == 0) {
      std::printf("BEHIND %s\n", channel
                                     .behind_words(std::strtoull(line.c_str() + 7, nullptr, 10),
                                                   std::chrono::milliseconds(5000))
                                     .c_str());
      std::fflush(stdout);
    }
  }
  // stdin closed (started in the background): stay until killed, or 60 s.
  std::this_thread::sleep_for(std::chrono::seconds(60));
  if (watch) cc::watch::Watchdog::instance().remove(&watched);
  return 0;
}
