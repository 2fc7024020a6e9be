// One rank of a job as a recovery sees it, without CUDA or NCCL: it joins
// (a replacement joins the same way), watches its membership with the
// control channel and the watchdog, and recovers through the library's own
// rendezvous step (lib/comm/rendezvous_recover.cpp) when told to, keeping
// each generation's connection as a communicator would.
//
//   recovery_member ADDR PORT JOB RANK WORLD [--interval MS] [--misses N]
//     (ADDR etcd://host:port,...: the rendezvous on etcd; PORT is ignored)
//                   [--join-timeout MS]
//   recovery_member env [--auto shrink|regrow] [--die-rank R] ...
//     (env: rank, world and rendezvous from the environment, as under cc-run)
//
// stdout (one line each):
//   READY rank=R gen=E size=N failed=LIST     joined (a replacement: E > 0)
//   FAILED gen=E <message>                       the watchdog heard of a failure
//   RECOVERED gen=E rank=R size=N members=LIST failed=LIST method=id|shrink id=B
//   RECOVER_ERROR <code> <message>
//   FAILED_RANKS gen=E LIST                    (command "failed")
//   ABORTED | ABORT_ERROR <message>              (command "abort")
// stdin: "shrink MS [settle MS]", "regrow N MS [settle MS]" (settle: watch the
// new generation's connection that long, as while NCCL is built, and give up
// with a message if a member of it fails), "failed", "abort WORDS" (tell the
// others this rank aborted, as NCCL's failure does), "drop-parent" (leave every
// generation but the newest), "leave" (leave all, exit 0).
// --auto: no stdin; after the first failure, shrink or regrow to WORLD, then
// leave. --die-rank R: rank R kills itself (SIGKILL) once joined, unless it
// is a restart (CC_RESTART_COUNT set).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lib/comm/rendezvous_join.hpp"
#include "lib/comm/rendezvous_recover.hpp"
#include "lib/launch/config.hpp"
#include "lib/launch/env.hpp"
#include "lib/watch/control_channel.hpp"
#include "lib/watch/watchdog.hpp"
#include "rendezvous/factory/address.hpp"
#include "rendezvous/rules/recovery_rules.hpp"

namespace {

using std::chrono::milliseconds;
namespace rv = cc::rv;

std::mutex out_mu;
std::condition_variable failed_cv;
bool heard_failure = false;

void say(const std::string& line) {
  std::lock_guard<std::mutex> lock(out_mu);
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

std::string csv(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out.empty() ? "-" : out;
}

class ChannelWatch final : public cc::watch::Watched {
 public:
  ChannelWatch(cc::watch::ControlChannel& channel, uint32_t generation)
      : channel_(channel), generation_(generation) {}
  void watch_tick(std::chrono::steady_clock::time_point now) override {
    if (auto f = channel_.poll(now, 0)) {
      say("FAILED gen=" + std::to_string(generation_) + " " + f->story);
      std::lock_guard<std::mutex> lock(out_mu);
      heard_failure = true;
      failed_cv.notify_all();
    }
  }

 private:
  cc::watch::ControlChannel& channel_;
  uint32_t generation_;
};

// One generation this process is a member of, as a communicator holds it.
struct Generation {
  std::unique_ptr<rv::Client> client;
  uint32_t generation = 0;
  int rank = -1;
  int size = 0;
  std::vector<int32_t> members;  // job ranks by rank
  std::vector<uint8_t> seat;     // what proves this rank in a recovery
  std::unique_ptr<cc::watch::ControlChannel> channel;
  std::unique_ptr<ChannelWatch> watched;

  Generation() = default;
  Generation(Generation&&) = default;
  Generation& operator=(Generation&&) = default;
  // A member that gives up returns from main with its generations joined:
  // the watchdog's thread must not tick them while they go.
  ~Generation() {
    if (watched) cc::watch::Watchdog::instance().remove(watched.get());
  }

  void watch(const cc::watch::ChannelOptions& base) {
    cc::watch::ChannelOptions o = base;
    o.rank = rank;
    o.generation = generation;
    channel = std::make_unique<cc::watch::ControlChannel>(*client, o);
    if (cc::Status st = channel->start(); !st.ok()) {
      say("ERROR " + st.message);
      std::exit(1);
    }
    watched = std::make_unique<ChannelWatch>(*channel, generation);
    cc::watch::Watchdog::instance().add(watched.get());
  }
  void leave() {
    if (watched) cc::watch::Watchdog::instance().remove(watched.get());
    if (client) (void)client->leave();
    watched.reset();
    channel.reset();
    client.reset();
  }
};

struct Member {
  std::string addr;  // as given, with its port apart where it needs one
  int port = 0;
  std::string job_id;
  rv::factory::Address rendezvous;  // the two parsed
  cc::launch::ResolvedConfig config;
  cc::watch::ChannelOptions channel;
  int job_rank = -1;
  int world = 0;
  std::vector<Generation> gens;  // oldest first
  // Every generation decided that this member was told of, with its job
  // ranks by rank, whether or not its communicator was made here.
  std::map<uint32_t, std::vector<int32_t>> decided;

  // kind, nranks, timeout, settle: one recovery from the newest generation.
  void recover(rv::RecoverKind kind, int nranks, int timeout_ms, int settle_ms) {
    const Generation& from = gens.back();
    cc::comm::RecoverRequest req;
    req.rendezvous = rendezvous;
    req.config = config;
    req.info.rank = job_rank;
    req.info.world_size = from.size;
    req.info.comm_number = 1;
    req.info.host = channel.host;
    req.info.pid = channel.pid;
    req.info.nccl_version = 22809;
    req.generation = from.generation;
    req.seat = from.seat;
    req.kind = kind;
    req.nranks = nranks;
    req.deadline = std::chrono::steady_clock::now() + milliseconds(timeout_ms);
    cc::comm::RecoverResult result;
    const cc::Status st = cc::comm::rendezvous_recover(
        req,
        [&](std::vector<uint8_t>* id) {
          id->assign(128, static_cast<uint8_t>(job_rank + 1));
          return cc::Status::success();
        },
        &result);
    if (!st.ok()) {
      say("RECOVER_ERROR " + std::to_string(st.code) + " " + st.message);
      return;
    }
    const rv::Joined& j = result.joined;
    // The server names rank 0 only: each member works the rest out, from
    // the generation before (one whose build failed here counts too).
    auto before = decided.find(j.generation - 1);
    const std::vector<int32_t> in = rv::rules::next_generation_members(
        before != decided.end() ? before->second : from.members, kind, j);
    decided[j.generation] = in;
    // As while NCCL is built: a member of the new generation that fails now
    // fails this attempt, which then leaves the generation cleanly.
    const auto until = std::chrono::steady_clock::now() + milliseconds(settle_ms);
    do {
      if (cc::Status e = cc::comm::new_generation_events(*result.client, kind, j.generation);
          !e.ok()) {
        (void)result.client->leave_nowait();
        say("RECOVER_ERROR " + std::to_string(e.code) + " " + e.message);
        return;
      }
      std::this_thread::sleep_for(milliseconds(5));
    } while (std::chrono::steady_clock::now() < until);
    std::vector<int> members(in.begin(), in.end()), failed(j.failed.begin(), j.failed.end());
    say("RECOVERED gen=" + std::to_string(j.generation) + " rank=" + std::to_string(j.rank) +
        " size=" + std::to_string(rv::world_size_of(j)) + " members=" + csv(members) + " failed=" +
        csv(failed) + " method=" + (j.method == rv::RecoverMethod::nccl_shrink ? "shrink" : "id") +
        " id=" + (j.unique_id.empty() ? "-" : std::to_string(j.unique_id[0])));
    Generation g;
    g.client = std::move(result.client);
    g.generation = j.generation;
    g.rank = j.rank;
    g.size = static_cast<int>(rv::world_size_of(j));
    g.members = in;
    g.seat = j.seat;
    gens.push_back(std::move(g));
    gens.back().watch(channel);
  }

  void leave_all() {
    for (auto& g : gens) g.leave();
    gens.clear();
  }
};

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: recovery_member ADDR PORT JOB RANK WORLD [options] | env ...\n");
    return 2;
  }
  Member m;
  int next = 1;
  if (std::string(argv[1]) == "env") {
    cc::launch::LaunchInfo info;
    if (cc::Status st = cc::launch::read_launch_info(cc::settings::process_env(), &info);
        !st.ok()) {
      say("ERROR " + st.message);
      return 1;
    }
    m.addr = info.master_addr;
    m.port = info.master_port;
    const char* job = std::getenv("CC_JOB_ID");
    m.job_id = job != nullptr ? job : "default";
    // Under cc-run: through its node agent, as a communicator's connection goes.
    const char* agent = std::getenv("CC_AGENT_SOCKET");
    m.config.agent_socket = agent != nullptr ? agent : "";
    m.job_rank = info.rank;
    m.world = info.world_size;
    next = 2;
  } else if (argc >= 6) {
    m.addr = argv[1];
    m.port = std::atoi(argv[2]);
    m.job_id = argv[3];
    m.job_rank = std::atoi(argv[4]);
    m.world = std::atoi(argv[5]);
    next = 6;
  } else {
    std::fprintf(stderr, "usage: recovery_member ADDR PORT JOB RANK WORLD [options]\n");
    return 2;
  }
  int join_timeout = 20000;
  std::string auto_kind;
  int die_rank = -1;
  for (int i = next; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--interval" && i + 1 < argc)
      m.channel.interval = milliseconds(std::atoi(argv[++i]));
    else if (a == "--misses" && i + 1 < argc)
      m.channel.misses = std::atoi(argv[++i]);
    else if (a == "--join-timeout" && i + 1 < argc)
      join_timeout = std::atoi(argv[++i]);
    else if (a == "--auto" && i + 1 < argc)
      auto_kind = argv[++i];
    else if (a == "--die-rank" && i + 1 < argc)
      die_rank = std::atoi(argv[++i]);
  }
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  m.channel.host = host;
  m.channel.pid = static_cast<uint32_t>(getpid());
  m.channel.comm_number = 1;
  m.channel.server_in_rank0 = false;
  m.config.job_id = m.job_id;
  m.config.timeout_ms = join_timeout;

  Generation first;
  m.config.heartbeat_ms = static_cast<int>(m.channel.interval.count());
  m.config.heartbeat_misses = m.channel.misses;
  if (cc::Status st = rv::factory::parse_address(m.addr, m.port, &m.rendezvous); !st.ok()) {
    say("ERROR " + st.message);
    return 1;
  }
  if (cc::Status st = cc::comm::connect_member(m.rendezvous, m.config, milliseconds(join_timeout),
                                               "recovery_member", &first.client);
      !st.ok()) {
    say("ERROR " + st.message);
    return 1;
  }
  rv::Join join;
  join.info.rank = m.job_rank;
  join.info.world_size = m.world;
  join.info.comm_number = 1;
  join.info.host = m.channel.host;
  join.info.pid = m.channel.pid;
  join.info.nccl_version = 22809;
  if (m.job_rank == 0) join.unique_id.assign(128, 100);
  join.timeout_ms = static_cast<uint32_t>(join_timeout);
  rv::Joined joined;
  if (cc::Status st = first.client->join(join, &joined); !st.ok()) {
    say("ERROR " + std::to_string(st.code) + " " + st.message);
    return 1;
  }
  first.generation = joined.generation;
  first.seat = joined.seat;
  first.rank = joined.rank >= 0 ? joined.rank : m.job_rank;
  // A replacement joins a regrown generation, whose ranks are the job ranks.
  first.size = joined.generation > 0 ? static_cast<int>(rv::world_size_of(joined)) : m.world;
  for (int32_t r = 0; r < first.size; ++r) first.members.push_back(r);
  m.gens.push_back(std::move(first));
  m.gens.back().watch(m.channel);
  say("READY rank=" + std::to_string(m.gens.back().rank) + " gen=" +
      std::to_string(m.gens.back().generation) + " size=" + std::to_string(m.gens.back().size) +
      " failed=" + csv(std::vector<int>(joined.failed.begin(), joined.failed.end())));

  const bool restarted = std::getenv("CC_RESTART_COUNT") != nullptr;
  if (m.job_rank == die_rank && !restarted) {
    std::this_thread::sleep_for(milliseconds(200));
    ::kill(::getpid(), SIGKILL);
  }
  if (!auto_kind.empty()) {
    if (m.gens.back().generation == 0) {  // a survivor: wait for the failure, then recover
      std::unique_lock<std::mutex> lock(out_mu);
      if (!failed_cv.wait_for(lock, std::chrono::seconds(30), [] { return heard_failure; })) {
        std::printf("ERROR no failure heard within 30 s\n");
        return 1;
      }
      lock.unlock();
      m.recover(auto_kind == "regrow" ? rv::RecoverKind::regrow : rv::RecoverKind::shrink,
                m.world, env_int("RECOVER_TIMEOUT_MS", 20000), 0);
    }
    const bool ok = m.gens.back().generation > 0;
    m.leave_all();
    say(ok ? "LEFT" : "ERROR no recovery");
    return ok ? 0 : 1;
  }

  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    if (cmd == "shrink" || cmd == "regrow") {
      int nranks = 0, timeout = 10000, settle = 0;
      if (cmd == "regrow") in >> nranks;
      in >> timeout;
      std::string word;
      if (in >> word && word == "settle") in >> settle;
      m.recover(cmd == "shrink" ? rv::RecoverKind::shrink : rv::RecoverKind::regrow, nranks,
                timeout, settle);
    } else if (cmd == "failed") {
      const Generation& g = m.gens.back();
      say("FAILED_RANKS gen=" + std::to_string(g.generation) + " " +
          csv(g.channel->failed_ranks()));
    } else if (cmd == "abort") {
      // As a rank whose NCCL failed: the newest generation hears it aborted.
      std::string words;
      std::getline(in >> std::ws, words);
      cc::Status st = m.gens.back().client->abort(words);
      say(st.ok() ? "ABORTED" : "ABORT_ERROR " + st.message);
    } else if (cmd == "drop-parent") {
      while (m.gens.size() > 1) {
        m.gens.front().leave();
        m.gens.erase(m.gens.begin());
      }
      say("DROPPED");
    } else if (cmd == "leave") {
      m.leave_all();
      say("LEFT");
      return 0;
    }
  }
  // stdin closed (started in the background): stay until killed, or 60 s.
  std::this_thread::sleep_for(std::chrono::seconds(60));
  m.leave_all();
  return 0;
}
