// cc_comm_shrink and cc_comm_regrow with an etcd address: ranks are
// recovery_member processes (the library's recovery step, the control
// channel and the watchdog, no NCCL) on a real etcd cluster, and cc's server
// is where the election put it: in the test process (its store client was
// the job's first candidate), or in cc-run. The recovery's rules are the
// server's and are tested there (tests/rendezvous); these cases hold the
// paths an etcd address takes: survivors shrink on the elected server, etcd
// losing its own leader meanwhile costs nothing, and cc-run's agents host
// the job so that any rank's death is survived.
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cc/cc.h"
#include "tests/etcd/etcd_test.hpp"
#include "tests/rendezvous/recovery_process.hpp"

namespace {

using cc::test::field;
using cc::test::kill_ranks;
using cc::test::RecoveryMember;
using cc::test::RecoveryMembers;
using cc::test::shared_cluster;

// Heartbeats every 100 ms, 5 missed.
const std::vector<std::string> kFast = {"--interval", "100", "--misses", "5"};

// This process hosts the job's server: its store client campaigns first.
struct HostHere {
  cc_store_t store = nullptr;
  HostHere(const std::string& address, const std::string& job) {
    cc_config_t config = CC_CONFIG_INIT;
    config.timeout_ms = 10000;
    const cc_result_t r = cc_store_connect(&store, address.c_str(), 0, job.c_str(), &config);
    INFO(cc_last_error());
    REQUIRE(r == CC_SUCCESS);
  }
  ~HostHere() { cc_store_close(store); }
};

// The process among `pids` that listens on TCP `port` (from /proc: the
// listening socket's inode, then whose descriptors hold it); -1 if none.
pid_t listening_on(int port, const std::vector<pid_t>& pids) {
  std::ifstream tcp("/proc/net/tcp");
  std::string line, inode;
  char hex[8];
  std::snprintf(hex, sizeof hex, "%04X", port);
  while (std::getline(tcp, line)) {
    std::istringstream in(line);
    std::string sl, local, remote, state, queues, timer, retr, uid, timeout, node;
    in >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> node;
    if (state == "0A" && local.size() > 5 && local.substr(local.size() - 4) == hex) inode = node;
  }
  if (inode.empty()) return -1;
  const std::string want = "socket:[" + inode + "]";
  for (pid_t pid : pids) {
    const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) continue;
    while (dirent* e = readdir(d)) {
      char target[64] = {};
      const std::string fd = dir + "/" + e->d_name;
      if (readlink(fd.c_str(), target, sizeof target - 1) > 0 && want == target) {
        closedir(d);
        return pid;
      }
    }
    closedir(d);
  }
  return -1;
}

}  // namespace

TEST_CASE("etcd: 5 ranks, 2 killed: every survivor shrinks to the same membership") {
  HostHere host(shared_cluster().address(), "shrink-5");
  auto ms = cc::test::start_recovery_job(shared_cluster().address(), 0, "shrink-5", 5, kFast);
  const auto killed = cc::test::Clock::now();
  kill_ranks(ms, {1, 3});
  for (auto& [r, m] : ms) {
    const std::string f = m->next("FAILED");
    INFO("rank " << r << ": " << f);
    CHECK(f.find("gen=0 rank ") != std::string::npos);
  }
  // Told within the heartbeat window (500 ms) + 1 s.
  CHECK(cc::test::ms_since(killed) < 1500 + 500);
  for (auto& [r, m] : ms) m->say("shrink 10000");
  for (const auto& [r, l] : cc::test::check_shrunk(ms, "1", "0,2,4", "1,3")) {
    INFO("rank " << r << ": " << l);
    CHECK(field(l, "size") == "3");
    CHECK(field(l, "id") != "-");
  }
  // The new generation is a membership: a death in it is heard there, by its numbers.
  cc::test::check_death_in_generation_1(ms, 4, {0, 2}, 2);  // job rank 4 is its rank 2
}

TEST_CASE("etcd: etcd's leader killed while the survivors shrink: they agree, without an error") {
  auto cluster = cc::test::start_cluster(cc::test::members(3));
  HostHere host(cluster->address(), "leader");
  auto ms = cc::test::start_recovery_job(cluster->address(), 0, "leader", 4, kFast);
  kill_ranks(ms, {3});
  for (auto& [r, m] : ms) CHECK(m->next("FAILED").find("gen=0") != std::string::npos);
  ms[0]->say("shrink 20000");
  const int leader = cluster->leader();
  REQUIRE(leader >= 0);
  cluster->kill(leader);
  for (int r : {1, 2}) ms[r]->say("shrink 20000");
  cc::test::check_shrunk(ms, "1", "0,1,2", "3");
}

TEST_CASE("etcd: the rank hosting the job's server killed: the others resume, are told, shrink") {
  // No store client here: the ranks themselves are the job's candidates.
  auto ms = cc::test::start_recovery_job(shared_cluster().address(), 0, "host-killed", 4, kFast);
  std::string out;
  REQUIRE(shared_cluster().etcdctl({"get", "cc/job/host-killed/leader", "--print-value-only"},
                                   &out) == 0);
  const int port = std::atoi(out.substr(out.rfind(':') + 1).c_str());
  std::vector<pid_t> pids;
  for (auto& [r, m] : ms) pids.push_back(m->pid());
  const pid_t host = listening_on(port, pids);
  INFO("the leader key says " << out);
  REQUIRE(host > 0);
  int host_rank = -1;
  for (auto& [r, m] : ms)
    if (m->pid() == host) host_rank = r;
  const auto killed = cc::test::Clock::now();
  kill_ranks(ms, {host_rank});
  for (auto& [r, m] : ms) {
    const std::string f = m->next("FAILED");
    INFO("rank " << r << ": " << f);
    CHECK(f.find("gen=0 rank " + std::to_string(host_rank)) != std::string::npos);
  }
  // The lease (5 s), the election, the resumes and the grace period.
  const long long told_ms = cc::test::ms_since(killed);
  CHECK(told_ms < 5000 + 5000 + 5000);
  std::printf("etcd: the host's death told %lld ms after the kill\n", told_ms);
  for (auto& [r, m] : ms) m->say("shrink 20000");
  std::string members, failed = std::to_string(host_rank);
  for (int r = 0; r < 4; ++r)
    if (r != host_rank) members += (members.empty() ? "" : ",") + std::to_string(r);
  cc::test::check_shrunk(ms, "1", members, failed);
}

namespace {

// cc-run -n N --master-addr <the cluster> ARGS... -- recovery_member env RANK_ARGS...:
// every output line, and cc-run's exit status.
std::pair<std::vector<std::string>, int> cc_run_job(const std::vector<std::string>& run_args,
                                                    const std::vector<std::string>& member_args) {
  const char* run = std::getenv("CC_RUN");
  const char* member = std::getenv("RECOVERY_MEMBER");
  REQUIRE(run != nullptr);
  REQUIRE(member != nullptr);
  std::vector<std::string> args = {run, "--master-addr", shared_cluster().address()};
  args.insert(args.end(), run_args.begin(), run_args.end());
  args.insert(args.end(), {"--", member, "env"});
  args.insert(args.end(), member_args.begin(), member_args.end());
  cc::test::ChildProcess job(args);
  std::vector<std::string> lines;
  while (auto l = job.line(std::chrono::milliseconds(60000))) lines.push_back(*l);
  const int status = job.reap();
  return {lines, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

bool has_line(const std::vector<std::string>& lines, const std::string& prefix) {
  for (const auto& l : lines)
    if (l.rfind(prefix, 0) == 0) return true;
  return false;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

}  // namespace

TEST_CASE("etcd: cc-run with an etcd address: a rank killed and started again rejoins by regrow") {
  auto [lines, code] = cc_run_job({"-n", "4", "--max-restarts", "1", "--job-id", "cc-run-regrow"},
                                  {"--interval", "100", "--misses", "5", "--auto", "regrow",
                                   "--die-rank", "1"});
  INFO(joined(lines));
  CHECK(code == 0);
  for (int r : {0, 2, 3})
    CHECK(has_line(lines, "[rank " + std::to_string(r) + "] RECOVERED gen=1 rank=" +
                              std::to_string(r) + " size=4 members=0,1,2,3 failed=1 "));
  CHECK(has_line(lines, "[rank 1] READY rank=1 gen=1 size=4 failed=1"));
}

TEST_CASE("etcd: cc-run with an etcd address: rank 0 killed, the others shrink and go on") {
  // cc-run's agent, not rank 0, is the job's candidate: rank 0's death takes
  // nothing with it.
  auto [lines, code] = cc_run_job({"-n", "3", "--max-restarts", "0", "--job-id", "cc-run-shrink"},
                                  {"--interval", "100", "--misses", "5", "--auto", "shrink",
                                   "--die-rank", "0"});
  INFO(joined(lines));
  CHECK(code == 137);  // rank 0's status
  CHECK(has_line(lines, "[rank 1] RECOVERED gen=1 rank=0 size=2 members=1,2 failed=0 "));
  CHECK(has_line(lines, "[rank 2] RECOVERED gen=1 rank=1 size=2 members=1,2 failed=0 "));
}
