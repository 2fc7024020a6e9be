// One rank whose calls the rendezvous compares, without CUDA or NCCL: joins
// communicator 1 (and 2 for the legal case) through the rendezvous client
// (cc's server, or etcd), and on "go" records a case's calls in a CallLog
// per communicator, as lib/comm records cc's entry points, and hands a
// control channel per communicator (heartbeats carrying the points) to the
// process's watchdog.
//   call_check_member ADDR PORT JOB RANK WORLD CASE [--interval MS]
//                     [--diverging R] [--delay-ms N] [--calls N]
// ADDR etcd://host:port,...: the rendezvous on etcd (PORT is ignored). The
// rank joins as host h<rank>, pid 100 + rank, so the message is the same on
// every run and backend. Cases (calls numbered from 1, 60 of them or
// --calls; rank R, --diverging, differs at op #50):
//   kind, count, type, op, root   op #50 differs in that field
//   skip                          rank R leaves out op #50
//   extra                         rank R makes a barrier before op #50
//   legal                         two communicators, the same calls on each,
//                                 made in another interleaving on every rank
//   split-child, split-parent     communicator 1 and a child split from it
//                                 (its points on the parent's channel, split 1,
//                                 color 0, ranks in reverse order: rank 2 - r);
//                                 the kind differs at op #50 on the child only,
//                                 or on the parent only
//   split-none                    the same, and neither differs
// Ranks from 2 on start --delay-ms after "go" (default 400), so ranks 0 and 1
// are compared first, whatever the machine's load.
// On "end" instead of "go", the rank records its calls with no heartbeat
// and ends communicator 1 as cc_comm_destroy does (CallsEnd, answering the
// server's requests for points from a flight recorder of 2000 calls).
// "end-split" ends the split cases' child so, on communicator 1's client
// (CallsEnd marked with the split): after "go", with the calls recorded
// then; else recording the child's calls first, with no heartbeat.
// stdout: "READY <rank>", "REPORTED 1.s1" once the child's first points went
// (split cases, after "go"), then per communicator g that learns of a difference
// "MISMATCH <g> <message>" (the child: g "1.s1"), of another failure
// "FAILED <g> <message>"; "CALLED" when the legal case made its calls; "LEFT"
// after "leave" on stdin; after "end" or "end-split", "END OK",
// "END MISMATCH <message>" or "END ERROR <code> <message>".
// "die" exits at once without leaving.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cc/cc.h"
#include "lib/comm/rendezvous_join.hpp"
#include "lib/core/call_log.hpp"
#include "lib/launch/config.hpp"
#include "lib/watch/control_channel.hpp"
#include "lib/watch/watchdog.hpp"
#include "rendezvous/factory/address.hpp"

namespace {

using cc::CallDesc;
using cc::CallKind;
using std::chrono::milliseconds;

std::mutex out_mu;
void say(const std::string& s) {
  std::lock_guard<std::mutex> lock(out_mu);
  std::printf("%s\n", s.c_str());
  std::fflush(stdout);
}

class ChannelWatch final : public cc::watch::Watched {
 public:
  ChannelWatch(cc::watch::ControlChannel& channel, uint32_t comm_number)
      : channel_(channel), comm_number_(comm_number) {}
  void watch_tick(std::chrono::steady_clock::time_point now) override {
    if (auto f = channel_.poll(now, 0))
      say(std::string(f->kind == cc::watch::ChannelFailure::Kind::mismatch ? "MISMATCH "
                                                                           : "FAILED ") +
          std::to_string(comm_number_) + " " + f->story);
  }

 private:
  cc::watch::ControlChannel& channel_;
  uint32_t comm_number_;
};

// The split child's ticks, through its parent's channel.
class SplitWatch final : public cc::watch::Watched {
 public:
  SplitWatch(cc::watch::ControlChannel& parent, cc::watch::SplitLine line)
      : parent_(parent), line_(line) {}
  void watch_tick(std::chrono::steady_clock::time_point now) override {
    if (auto f = parent_.poll_split(now, line_))
      say(std::string(f->kind == cc::watch::ChannelFailure::Kind::mismatch ? "MISMATCH "
                                                                           : "FAILED ") +
          "1.s" + std::to_string(line_.split) + " " + f->story);
    if (!reported_) say("REPORTED 1.s" + std::to_string(line_.split));  // its first points went
    reported_ = true;
  }

 private:
  cc::watch::ControlChannel& parent_;
  cc::watch::SplitLine line_;
  bool reported_ = false;
};

CallDesc allreduce(uint64_t count, int dtype = CC_FLOAT32, int op = CC_SUM) {
  return CallDesc{CallKind::allreduce, count, dtype, op, -1, false};
}

// The calls every rank makes, by number: all-reduces of 8 x n floats.
CallDesc common_call(uint64_t n) { return allreduce(8 * n); }

// The case's calls on the communicator that is compared, for one rank.
std::vector<CallDesc> calls_of(const std::string& c, bool diverges, size_t calls = 60) {
  std::vector<CallDesc> out;
  for (uint64_t n = 1; out.size() < calls; ++n) {
    CallDesc call = common_call(n);
    if (n == 50) {
      if (c == "kind" || c == "count" || c == "type" || c == "op") call = allreduce(4096);
      if (c == "root") call = CallDesc{CallKind::broadcast, 4096, CC_FLOAT32, -1, 0, false};
      if (diverges) {
        if (c == "kind") call = CallDesc{CallKind::allgather, 4096, CC_FLOAT32, -1, -1, false};
        if (c == "count") call = allreduce(8192);
        if (c == "type") call = allreduce(4096, CC_BFLOAT16);
        if (c == "op") call = allreduce(4096, CC_FLOAT32, CC_MAX);
        if (c == "root") call.root = 1;
        if (c == "skip") continue;
        if (c == "extra") out.push_back(CallDesc{CallKind::barrier, 0, 0, -1, -1, false});
      }
    }
    out.push_back(call);
  }
  out.resize(calls);
  return out;
}

struct Comm {
  uint32_t comm_number = 0;
  std::unique_ptr<cc::rv::Client> client;
  std::unique_ptr<cc::core::CallLog> log;
  std::unique_ptr<cc::watch::ControlChannel> channel;
  std::unique_ptr<ChannelWatch> watched;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: call_check_member ADDR PORT JOB RANK WORLD CASE [options]\n");
    return 2;
  }
  const std::string addr = argv[1];
  const int port = std::atoi(argv[2]);
  const std::string job = argv[3];
  const int rank = std::atoi(argv[4]);
  const int world = std::atoi(argv[5]);
  const std::string which = argv[6];
  milliseconds interval{100};
  int diverging = 1;
  milliseconds delay{400};
  size_t calls = 60;
  for (int i = 7; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--interval") interval = milliseconds(std::atoi(argv[i + 1]));
    if (a == "--diverging") diverging = std::atoi(argv[i + 1]);
    if (a == "--delay-ms") delay = milliseconds(std::atoi(argv[i + 1]));
    if (a == "--calls") calls = static_cast<size_t>(std::atoi(argv[i + 1]));
  }
  const std::string host = "h" + std::to_string(rank);
  const uint32_t pid = 100 + static_cast<uint32_t>(rank);
  cc::launch::ResolvedConfig config;
  config.job_id = job;
  config.timeout_ms = 20000;
  config.heartbeat_ms = static_cast<int>(interval.count());
  config.heartbeat_misses = 10;
  cc::rv::factory::Address address;
  if (cc::Status st = cc::rv::factory::parse_address(addr, port, &address); !st.ok()) {
    say("ERROR " + st.message);
    return 1;
  }

  std::vector<Comm> comms(which == "legal" ? 2 : 1);
  for (size_t k = 0; k < comms.size(); ++k) {
    Comm& c = comms[k];
    c.comm_number = static_cast<uint32_t>(k + 1);
    if (cc::Status st = cc::comm::connect_member(address, config, milliseconds(config.timeout_ms),
                                                 "call_check_member", &c.client);
        !st.ok()) {
      say("ERROR " + st.message);
      return 1;
    }
    cc::rv::Join join;
    join.info.rank = rank;
    join.info.world_size = world;
    join.info.comm_number = c.comm_number;
    join.info.host = host;
    join.info.pid = pid;
    join.info.nccl_version = 22809;
    if (rank == 0) join.unique_id.assign(128, static_cast<uint8_t>(c.comm_number));
    join.timeout_ms = static_cast<uint32_t>(config.timeout_ms);
    cc::rv::Joined joined;
    if (cc::Status js = c.client->join(join, &joined); !js.ok()) {
      say("ERROR " + js.message);
      return 1;
    }
    c.log = std::make_unique<cc::core::CallLog>(world, 2000);
  }
  say("READY " + std::to_string(rank));

  auto start_channels = [&] {
    for (Comm& c : comms) {
      cc::watch::ChannelOptions o;
      o.rank = rank;
      o.host = host;
      o.pid = pid;
      o.comm_number = c.comm_number;
      o.interval = interval;
      o.misses = config.heartbeat_misses;
      o.server_in_rank0 = false;
      o.calls = c.log.get();
      c.channel = std::make_unique<cc::watch::ControlChannel>(*c.client, o);
      if (cc::Status st = c.channel->start(); !st.ok()) {
        say("ERROR " + st.message);
        std::exit(1);
      }
      c.watched = std::make_unique<ChannelWatch>(*c.channel, c.comm_number);
      cc::watch::Watchdog::instance().add(c.watched.get());
    }
  };

  // The split cases' child: all three ranks, numbered in reverse.
  const bool split_case = which.rfind("split-", 0) == 0;
  const int32_t child_rank = world - 1 - rank;
  cc::core::CallLog child_log(world, 2000);
  std::unique_ptr<SplitWatch> child_watch;
  auto start_child = [&] {
    cc::watch::SplitLine line;
    line.split = 1;
    line.color = 0;
    line.rank = child_rank;
    line.calls = &child_log;
    child_watch = std::make_unique<SplitWatch>(*comms[0].channel, line);
    cc::watch::Watchdog::instance().add(child_watch.get());
  };

  // The op counter outlives the block that starts the caller thread using it.
  uint64_t op = 0;
  std::thread caller;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "go") {
      if (rank >= 2) std::this_thread::sleep_for(delay);
      op = 0;
      auto record = [&](Comm& c, const CallDesc& call) { c.log->record(call, ++op, 0, 0); };
      if (which == "legal") {
        // The calls go on while the heartbeats report them, each rank in its
        // own order: rank 0 alternates, rank 1 makes communicator 1's first,
        // the others communicator 2's first.
        start_channels();
        caller = std::thread([&, record] {
          std::vector<CallDesc> a = calls_of("none", false), b;
          for (const CallDesc& call : a)
            b.push_back(CallDesc{CallKind::broadcast, call.count, CC_INT8, -1, 0, false});
          for (size_t i = 0; i < 2 * a.size(); ++i) {
            const size_t half = i / 2;
            const bool first = rank == 0 ? i % 2 == 0 : (rank == 1) == (i < a.size());
            const size_t n = rank == 0 ? half : i % a.size();
            if (first)
              record(comms[0], a[n]);
            else
              record(comms[1], b[n]);
            std::this_thread::sleep_for(milliseconds(5));
          }
          say("CALLED");
        });
      } else if (split_case) {
        const bool child_differs = which == "split-child";
        const bool parent_differs = which == "split-parent";
        for (const CallDesc& call : calls_of("kind", parent_differs && rank == diverging))
          record(comms[0], call);
        uint64_t child_op = 0;
        for (const CallDesc& call : calls_of("kind", child_differs && rank == diverging))
          child_log.record(call, ++child_op, 0, 0);
        start_channels();
        start_child();
      } else {
        for (const CallDesc& call : calls_of(which, rank == diverging)) record(comms[0], call);
        start_channels();
      }
    } else if (line == "end" || line == "end-split") {
      Comm& c = comms[0];
      cc::core::CallLog* log = c.log.get();
      const bool child = line == "end-split";
      if (child && child_watch) {
        cc::watch::Watchdog::instance().remove(child_watch.get());  // as destroy's stop_watch
        child_watch.reset();
        log = &child_log;
      } else if (child) {
        uint64_t child_op = 0;
        for (const CallDesc& call : calls_of("kind", which == "split-child" && rank == diverging,
                                             calls))
          child_log.record(call, ++child_op, 0, 0);
        log = &child_log;
      } else {
        op = 0;
        for (const CallDesc& call : calls_of(which, rank == diverging, calls))
          log->record(call, ++op, 0, 0);
      }
      cc::rv::CallsEnd end{c.comm_number, 0, log->collectives(), log->take_report(), 0,
                           static_cast<uint32_t>(config.timeout_ms)};
      if (child) {
        end.split = 1;
        end.split_color = 0;
        end.split_rank = child_rank;
        end.split_ranks = world;
      }
      const cc::Status st = c.client->end_calls(end, [log](uint64_t after, uint64_t through) {
        return log->points_in(after, through, cc::rv::kMaxHeartbeatCalls);
      });
      say(st.ok()                        ? std::string("END OK")
          : st.code == CC_ERR_MISMATCH ? "END MISMATCH " + st.message
                                       : "END ERROR " + std::to_string(st.code) + " " + st.message);
    } else if (line == "die") {
      std::_Exit(3);
    } else if (line == "leave") {
      if (caller.joinable()) caller.join();
      if (child_watch) cc::watch::Watchdog::instance().remove(child_watch.get());
      for (Comm& c : comms)
        if (c.watched) cc::watch::Watchdog::instance().remove(c.watched.get());
      for (Comm& c : comms) {
        if (cc::Status st = c.client->leave(); !st.ok()) {
          say("ERROR " + st.message);
          return 1;
        }
      }
      say("LEFT");
      return 0;
    }
  }
  if (caller.joinable()) caller.join();
  if (child_watch) cc::watch::Watchdog::instance().remove(child_watch.get());
  for (Comm& c : comms)
    if (c.watched) cc::watch::Watchdog::instance().remove(c.watched.get());
  return 0;
}
