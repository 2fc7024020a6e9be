// A communicator's rendezvous on etcd through cc's own join path (lib/comm's
// rendezvous_join, the control channel, the watchdog), with ranks as
// processes that do not touch a GPU (etcd_comm_member): the id hand-out, the
// ranks missing at the deadline, and a killed rank told to the others within
// the heartbeat window + 1 s, against a real one-member etcd cluster; and
// cc_comm_init's start (init_member): a rank whose init fails is told to the
// others with its message.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cc/cc.h"
#include "tests/etcd/etcd_test.hpp"
#include "tests/common/child_process.hpp"

using namespace cc::test;
using std::chrono::milliseconds;

namespace {

std::string this_host() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

std::string member_exe(const char* variable) {
  const char* exe = std::getenv(variable);
  INFO(variable << " names the program of a rank");
  REQUIRE(exe != nullptr);
  return exe;
}

// One rank: etcd_comm_member (or the program and arguments given) with a pipe
// to its stdin and one from its stdout, and the variables given.
class Member : public cc::test::ChildProcess {
 public:
  Member(const std::string& address, const std::string& job, int rank, int world,
         const std::vector<std::string>& env)
      : ChildProcess({member_exe("ETCD_COMM_MEMBER"), address, job, std::to_string(rank),
                      std::to_string(world)},
                     env) {}
  Member(std::vector<std::string> args, const std::vector<std::string>& env)
      : ChildProcess(std::move(args), env) {}
  void kill_now() {
    signal(SIGKILL);
    reap();
  }
};

using Members = std::vector<std::unique_ptr<Member>>;

Members start_ranks(const std::string& job, int world, const std::vector<int>& ranks,
                    const std::vector<std::string>& env) {
  Members ms;
  for (int r : ranks)
    ms.push_back(std::make_unique<Member>(shared_cluster().address(), job, r, world, env));
  return ms;
}

}  // namespace

TEST_CASE("comm rendezvous on etcd: every rank gets rank 0's id, and leaves cleanly") {
  constexpr int kWorld = 4;
  Members ms = start_ranks("comm-ids", kWorld, {0, 1, 2, 3}, {"CC_TIMEOUT_MS=20000"});
  std::string id;
  for (int r = 0; r < kWorld; ++r) {
    auto l = ms[static_cast<size_t>(r)]->line(milliseconds(20000));
    INFO("rank " << r << " said: " << l.value_or("(nothing)"));
    REQUIRE(l.has_value());
    const std::string ready = "READY " + std::to_string(r) + " ";
    REQUIRE(l->rfind(ready, 0) == 0);
    const std::string got = l->substr(ready.size());
    CHECK(got.size() == 256);
    if (r == 0) id = got;
    CHECK(got == id);
  }
  // rank 0's id spells its pid: the id came from rank 0
  const uint32_t pid0 = static_cast<uint32_t>(ms[0]->pid());
  char first[3];
  std::snprintf(first, sizeof first, "%02x", static_cast<unsigned>(pid0 & 0xff));
  CHECK(id.substr(0, 2) == first);
  for (auto& m : ms) m->say("leave");
  for (int r = 0; r < kWorld; ++r) {
    auto l = ms[static_cast<size_t>(r)]->line(milliseconds(10000));
    INFO("rank " << r << " said: " << l.value_or("(nothing)"));
    CHECK(l == "LEFT");
  }
}

TEST_CASE("comm rendezvous on etcd: the ranks that never came are named at the deadline") {
  // ranks 1 and 3 of 4 never start
  const auto t0 = Clock::now();
  Members ms = start_ranks("comm-missing", 4, {0, 2}, {"CC_TIMEOUT_MS=3000"});
  for (auto& m : ms) {
    auto l = m->line(milliseconds(15000));
    INFO("said: " << l.value_or("(nothing)"));
    REQUIRE(l.has_value());
    CHECK(l->rfind("ERROR " + std::to_string(CC_ERR_TIMEOUT) + " ", 0) == 0);
    CHECK_THAT(
        *l, Catch::Contains("ranks 1, 3 of 4 never joined communicator 1 of job 'comm-missing'") &&
                Catch::Contains("joining communicator 1 of job 'comm-missing' at " +
                                shared_cluster().address()));
  }
  CHECK(ms_since(t0) < 3000 + 5000);
}

TEST_CASE(
    "comm rendezvous on etcd: a rank killed is named to the others within the "
    "heartbeat window + 1 s") {
  // The job's server is hosted here (this process's store client is the
  // first candidate), so the rank killed is a member only: its death is told
  // from its connection's drop.
  cc_config_t config = CC_CONFIG_INIT;
  config.timeout_ms = 10000;
  cc_store_t host = nullptr;
  REQUIRE(cc_store_connect(&host, shared_cluster().address().c_str(), 0, "comm-kill", &config) ==
          CC_SUCCESS);
  const std::vector<std::string> env = {"CC_TIMEOUT_MS=20000", "CC_HEARTBEAT_MS=400",
                                        "CC_HEARTBEAT_MISSES=5"};
  Members ms = start_ranks("comm-kill", 3, {0, 1, 2}, env);
  for (size_t r = 0; r < ms.size(); ++r) {
    auto l = ms[r]->line(milliseconds(20000));
    INFO("rank " << r << " said: " << l.value_or("(nothing)"));
    REQUIRE(l.has_value());
    REQUIRE(l->rfind("READY ", 0) == 0);
  }
  const pid_t victim = ms[1]->pid();
  const auto t0 = Clock::now();
  ms[1]->kill_now();
  for (size_t r : {0u, 2u}) {
    auto l = ms[r]->line(milliseconds(2000 + 1000 - ms_since(t0) + 1));
    const long long took = ms_since(t0);
    INFO("rank " << r << " said after " << took << " ms: " << l.value_or("(nothing)"));
    REQUIRE(l.has_value());
    CHECK(l->rfind("FAILED rank 1 (host " + this_host() + ", pid " + std::to_string(victim) + ")",
                   0) == 0);
    CHECK_THAT(*l, Catch::Contains("failed") && Catch::Contains("Look at that rank's output"));
  }
  cc_store_close(host);
}

TEST_CASE("comm start on etcd: a rank whose init fails tells the others at once, in its words") {
  // cc_comm_init's own start (lib/comm/startup: the reachability test, with
  // nothing to test on one host), then a stand-in for NCCL's init that fails
  // on rank 1 only.
  constexpr int kWorld = 3;
  const std::string exe = member_exe("INIT_MEMBER");
  Members ms;
  for (int r = 0; r < kWorld; ++r)
    ms.push_back(std::make_unique<Member>(
        std::vector<std::string>{exe, "fail", "the stand-in NCCL init failed on purpose"},
        std::vector<std::string>{"MASTER_ADDR=" + shared_cluster().address(),
                                 "CC_JOB_ID=comm-init-failed", "RANK=" + std::to_string(r),
                                 "WORLD_SIZE=" + std::to_string(kWorld), "INIT_FAIL_RANK=1",
                                 "CC_TIMEOUT_MS=20000"}));
  for (int r = 0; r < kWorld; ++r) {
    auto& m = *ms[static_cast<size_t>(r)];
    std::optional<std::string> l;
    for (int i = 0; i < 3; ++i) {  // START, STARTED, then ERROR
      l = m.line(milliseconds(20000));
      if (!l || l->rfind("ERROR", 0) == 0) break;
    }
    INFO("rank " << r << " said: " << l.value_or("(nothing)"));
    REQUIRE(l.has_value());
    REQUIRE(l->rfind("ERROR", 0) == 0);
    if (r == 1) {
      CHECK_THAT(*l, Catch::Contains("code " + std::to_string(CC_ERR_NCCL) + ":"));
      continue;
    }
    CHECK_THAT(*l, Catch::Contains("code " + std::to_string(CC_ERR_PEER_FAILED) + ":"));
    CHECK_THAT(*l, Catch::Contains("rank 1 (host " + this_host()));
    CHECK_THAT(*l, Catch::Contains("could not start, so this communicator cannot either. Its "
                                   "words: ncclCommInitRankConfig failed on rank 1"));
    CHECK_THAT(*l, Catch::Contains("the stand-in NCCL init failed on purpose"));
  }
}
