// cc-run's node agent follows the elected server (issues 44 and 48): a
// 3-member etcd, `cc-rendezvous --etcd` daemons, and a job of soak_member
// ranks (the rendezvous store as their all-reduce, no GPU) under a real
// cc-run whose agent carries their communicator's connections. The leading
// daemon is killed mid-job: the agent finds the next leader, its ranks
// resume their seats through it, and the job ends with the same weights on
// every rank in generation 0 (no rank failed, none recovered). With no
// daemon left, the ranks are failed at once with the agent's words, within
// its deadline.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/child_process.hpp"
#include "tests/common/free_port.hpp"
#include "tests/etcd/elected_daemons.hpp"
#include "tests/etcd/etcd_test.hpp"

namespace {

using cc::test::ChildOptions;
using cc::test::ChildProcess;
using cc::test::Clock;
using std::chrono::milliseconds;

// The ranks' heartbeat window (250 ms x 4) and so the agent's deadline to
// reach the next leader: the window and 7 s (tools/cc-run/node_agent.cpp).
const std::vector<std::string> kJobEnv = {"CC_HEARTBEAT_MS=250", "CC_HEARTBEAT_MISSES=4",
                                          "CC_LOG_LEVEL=info", "CC_TIMEOUT_MS=60000"};
constexpr long long kAgentDeadlineMs = 1000 + 7000;

using cc::test::Daemon;

void kill_daemon(std::vector<Daemon>& daemons, int port) {
  for (Daemon& d : daemons)
    if (d.port == port) {
      REQUIRE(::kill(d.process->pid(), SIGKILL) == 0);
      d.process->reap();
      return;
    }
  FAIL("no daemon on port " << port);
}

// cc-run -n N with the cluster's address and soak_member as its ranks; its
// stdout and stderr (the ranks' lines, prefixed "[rank R] ", and the logs)
// read line by line.
std::unique_ptr<ChildProcess> start_job(const cc::test::EtcdCluster& cluster,
                                        const std::string& prefix, const std::string& job,
                                        int ranks, int steps, int step_ms) {
  const char* run = std::getenv("CC_RUN");
  const char* member = std::getenv("SOAK_MEMBER");
  REQUIRE(run != nullptr);
  REQUIRE(member != nullptr);
  ChildOptions o;
  o.args = {run, "-n", std::to_string(ranks), "--master-addr", cluster.address(),
            "--job-id", job, "--max-restarts", "0", "--", member,
            "--steps", std::to_string(steps), "--step-ms", std::to_string(step_ms)};
  o.env = kJobEnv;
  o.env.push_back("CC_ETCD_PREFIX=" + prefix);
  o.pipe_stdout = true;
  o.stderr_to_stdout = true;
  o.stdin_null = true;
  return std::make_unique<ChildProcess>(o);
}

bool has(const std::string& line, const std::string& part) {
  return line.find(part) != std::string::npos;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

}  // namespace

TEST_CASE("agent failover: the leading daemon killed mid-job, cc-run's ranks resume through "
          "their agent and the job ends right") {
  auto cluster = cc::test::start_cluster(cc::test::members(3));
  const std::string prefix = "agent-fo";
  std::vector<Daemon> daemons = cc::test::start_daemons(*cluster, prefix, 3, "warn");
  const int first = cc::test::wait_leader(*cluster, prefix, 0, milliseconds(15000));
  REQUIRE(first != 0);

  constexpr int kRanks = 4, kSteps = 150;
  auto job = start_job(*cluster, prefix, "agent-fo-job", kRanks, kSteps, 40);
  std::vector<std::string> lines;
  Clock::time_point killed{};
  long long all_resumed_ms = -1, agent_reached_ms = -1;
  int resumed = 0;
  while (auto l = job->line(milliseconds(90000))) {
    lines.push_back(*l);
    if (killed == Clock::time_point{} && has(*l, "rank 0: step  40:")) {
      // Mid-job, between heartbeats and store traffic.
      killed = Clock::now();
      kill_daemon(daemons, first);
    }
    if (killed == Clock::time_point{}) continue;
    if (has(*l, "reached the next rendezvous server")) agent_reached_ms = cc::test::ms_since(killed);
    if (has(*l, "through cc-run's node agent") && has(*l, "resumed on the rendezvous server") &&
        ++resumed == kRanks)
      all_resumed_ms = cc::test::ms_since(killed);
  }
  const int status = job->reap();
  INFO(joined(lines));
  REQUIRE(killed != Clock::time_point{});
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  for (int r = 0; r < kRanks; ++r) {
    const std::string done = "[rank " + std::to_string(r) + "] rank " + std::to_string(r) +
                             ": weights identical across 4 ranks after 150 steps (generation 0)";
    bool found = false;
    for (const auto& l : lines) found = found || l.rfind(done, 0) == 0;
    CHECK(found);
  }
  for (const auto& l : lines) {
    CHECK_FALSE(has(l, "recovering"));
    CHECK_FALSE(has(l, "failed:"));
    CHECK_FALSE(has(l, "soak_member:"));
  }
  CHECK(agent_reached_ms >= 0);
  CHECK(resumed == kRanks);
  // The lease (2 s), the next daemon's start and the look-up, with slack for
  // a busy machine; within the agent's deadline in any case.
  CHECK(all_resumed_ms >= 0);
  CHECK(all_resumed_ms < kAgentDeadlineMs);
  std::printf("agent failover: the agent reached the next leader %lld ms after the kill; all %d "
              "ranks resumed through it %lld ms after it\n",
              agent_reached_ms, kRanks, all_resumed_ms);
}

TEST_CASE("agent failover: with no daemon left, the ranks fail at once with the agent's words, "
          "within its deadline") {
  auto cluster = cc::test::start_cluster(cc::test::members(3));
  const std::string prefix = "agent-fo-none";
  std::vector<Daemon> daemons = cc::test::start_daemons(*cluster, prefix, 2, "warn");
  const int first = cc::test::wait_leader(*cluster, prefix, 0, milliseconds(15000));
  REQUIRE(first != 0);

  // recovery_member: only its communicator's connection, through the agent;
  // after the first failure it tries to shrink, then ends.
  const char* run = std::getenv("CC_RUN");
  const char* member = std::getenv("RECOVERY_MEMBER");
  REQUIRE(run != nullptr);
  REQUIRE(member != nullptr);
  ChildOptions o;
  o.args = {run, "-n", "2", "--master-addr", cluster->address(), "--job-id", "agent-fo-none",
            "--max-restarts", "0", "--", member, "env", "--interval", "250", "--misses", "4",
            "--auto", "shrink"};
  o.env = kJobEnv;
  o.env.push_back("CC_ETCD_PREFIX=" + prefix);
  o.pipe_stdout = true;
  o.stderr_to_stdout = true;
  o.stdin_null = true;
  ChildProcess job(o);
  std::vector<std::string> lines;
  Clock::time_point killed{};
  int ready = 0;
  long long agent_told_ms = -1, ranks_told_ms = -1;
  int told = 0;
  while (auto l = job.line(milliseconds(60000))) {
    lines.push_back(*l);
    if (has(*l, "] READY rank=") && ++ready == 2) {
      std::this_thread::sleep_for(milliseconds(500));  // a few heartbeats
      for (Daemon& d : daemons)
        if (d.port != first) kill_daemon(daemons, d.port);
      killed = Clock::now();
      kill_daemon(daemons, first);
    }
    if (killed == Clock::time_point{}) continue;
    if (agent_told_ms < 0 && has(*l, "no next server took over within"))
      agent_told_ms = cc::test::ms_since(killed);
    // Each rank's watchdog hears the failure, in the agent's words.
    if (has(*l, "] FAILED gen=0 ") && has(*l, "no next server took over within") &&
        has(*l, "cc-rendezvous --etcd") && ++told == 2)
      ranks_told_ms = cc::test::ms_since(killed);
  }
  const int status = job.reap();
  INFO(joined(lines));
  REQUIRE(killed != Clock::time_point{});
  CHECK_FALSE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  CHECK(told == 2);
  // The agent gives up at its deadline, not at the ranks' 60 s timeout, and
  // its ranks hear it at once.
  CHECK(agent_told_ms >= kAgentDeadlineMs - 500);
  CHECK(agent_told_ms < kAgentDeadlineMs + 3000);
  CHECK(ranks_told_ms >= 0);
  CHECK(ranks_told_ms < kAgentDeadlineMs + 3000);
  std::printf("agent failover: with no leader left the agent failed its ranks %lld ms after the "
              "kill; both ranks told %lld ms after it\n",
              agent_told_ms, ranks_told_ms);
}
