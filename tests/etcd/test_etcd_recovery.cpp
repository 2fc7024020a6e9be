// cc_comm_shrink and cc_comm_regrow with the rendezvous on etcd: ranks are
// recovery_member processes (the library's recovery step, the control
// channel and the watchdog, no NCCL) on a real one-member etcd cluster, as
// test_recovery_peers runs them on cc's own server. A killed rank is told
// through its expired lease; the survivors shrink or regrow to the same
// generation; a replacement fills a failed rank; a replacement that never
// comes, ranks that disagree and a stale process get words. cc-run with an
// etcd:// --master-addr hosts no server: a job survives any rank's death.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "tests/etcd/etcd_test.hpp"
#include "tests/rendezvous/recovery_process.hpp"

namespace {

using cc::test::field;
using cc::test::kill_ranks;
using cc::test::RecoveryMember;
using cc::test::RecoveryMembers;
using cc::test::shared_cluster;

// Heartbeats every 100 ms, 5 missed: a 1 s lease (etcd's TTLs are whole seconds).
const std::vector<std::string> kFast = {"--interval", "100", "--misses", "5"};

RecoveryMembers start_job(const std::string& job, int world) {
  return cc::test::start_recovery_job(shared_cluster().address(), 0, job, world, kFast);
}

std::unique_ptr<RecoveryMember> replacement(const std::string& job, int rank, int world) {
  return std::make_unique<RecoveryMember>(shared_cluster().address(), 0, job, rank, world, kFast);
}

}  // namespace

TEST_CASE("etcd: 5 ranks, 2 killed: every survivor shrinks to the same membership") {
  auto ms = start_job("shrink-5", 5);
  const auto killed = cc::test::Clock::now();
  kill_ranks(ms, {1, 3});
  for (auto& [r, m] : ms) {
    const std::string f = m->next("FAILED");
    INFO("rank " << r << ": " << f);
    CHECK(f.find("gen=0 rank ") != std::string::npos);
    CHECK(f.find("etcd lease expired") != std::string::npos);
  }
  // Told within the heartbeat window (1 s) + 1 s.
  CHECK(cc::test::ms_since(killed) < 2000 + 500);
  for (auto& [r, m] : ms) m->say("shrink 10000");
  for (const auto& [r, l] : cc::test::check_shrunk(ms, "1", "0,2,4", "1,3")) {
    INFO("rank " << r << ": " << l);
    CHECK(field(l, "size") == "3");
    CHECK(field(l, "method") == "id");  // these members cannot serve ncclCommShrink
    CHECK(field(l, "id") != "-");
  }
  // The new generation is a membership: a death in it is heard there, by its numbers.
  ms[4]->kill_now();
  for (int r : {0, 2}) {
    const std::string f = ms[r]->next("FAILED gen=1");
    INFO(f);
    CHECK(f.find("rank 2 (host") != std::string::npos);  // job rank 4 is rank 2 of generation 1
  }
  // And the survivors recover again, from generation 1.
  ms[4]->reap();
  ms.erase(4);
  for (int r : {0, 2}) ms[r]->say("shrink 10000");
  cc::test::check_shrunk(ms, "2", "0,2", "2");
}

TEST_CASE("etcd: regrow: a replacement fills the hole, early or late") {
  const bool early = GENERATE(true, false);
  const std::string job = early ? "regrow-early" : "regrow-late";
  INFO((early ? "replacement first" : "survivors first"));
  auto ms = start_job(job, 3);
  kill_ranks(ms, {1});
  for (int r : {0, 2}) CHECK(ms[r]->next("FAILED").find("gen=0") != std::string::npos);
  std::unique_ptr<RecoveryMember> fresh;
  if (early) fresh = replacement(job, 1, 3);
  for (int r : {0, 2}) ms[r]->say("regrow 3 15000");
  if (!early) {
    usleep(300000);
    fresh = replacement(job, 1, 3);
  }
  cc::test::check_regrown(ms, {0, 2}, "1", "0,1,2", "1");
  const std::string l = fresh->next("READY");
  INFO("replacement: " << l);
  CHECK(field(l, "rank") == "1");
  CHECK(field(l, "gen") == "1");  // it knows to take its state from a survivor
  CHECK(field(l, "size") == "3");
  CHECK(field(l, "failed") == "1");
  // The replacement is a member of generation 1: its death is heard.
  fresh->kill_now();
  for (int r : {0, 2}) CHECK(ms[r]->next("FAILED gen=1").find("rank 1 (host") != std::string::npos);
}

// As on a GPU: the survivors' NCCL fails after the death and each announces
// its abort in the old generation while the replacement already waits, its
// watch of that generation still open. It joined generation 1 and took those
// aborts for news of it: its init failed, and the regrow with it.
TEST_CASE("etcd: the survivors' aborts in the old generation are no news to the replacement") {
  auto ms = start_job("regrow-aborted", 3);
  kill_ranks(ms, {1});
  for (int r : {0, 2}) CHECK(ms[r]->next("FAILED").find("gen=0") != std::string::npos);
  auto fresh = replacement("regrow-aborted", 1, 3);
  usleep(300000);  // it claims its seat and waits as a replacement
  for (int r : {0, 2}) {
    ms[r]->say("abort NCCL reported an asynchronous error: remote process exited");
    CHECK(ms[r]->next("ABORT").rfind("ABORTED", 0) == 0);
  }
  for (int r : {0, 2}) ms[r]->say("regrow 3 15000");
  cc::test::check_regrown(ms, {0, 2}, "1", "0,1,2", "1");
  const std::string l = fresh->next("READY");
  INFO("replacement: " << l);
  CHECK(field(l, "gen") == "1");
  // The old news would come at once; none of generation 1 is due.
  const std::string heard = fresh->next("FAILED", std::chrono::milliseconds(1500));
  INFO("replacement: " << heard);
  CHECK(heard.rfind("(no ", 0) == 0);
  // It is a member of generation 1 all the same: its death is heard.
  fresh->kill_now();
  for (int r : {0, 2}) CHECK(ms[r]->next("FAILED gen=1").find("rank 1 (host") != std::string::npos);
}

TEST_CASE("etcd: a recovery that cannot complete ends in words") {
  SECTION("a replacement that never comes is named at the deadline") {
    auto ms = start_job("never", 3);
    kill_ranks(ms, {2});
    for (int r : {0, 1}) ms[r]->next("FAILED");
    const auto t0 = cc::test::Clock::now();
    for (int r : {0, 1}) ms[r]->say("regrow 3 2000");
    for (int r : {0, 1}) {
      const std::string l = cc::test::recover_error(*ms[r], CC_ERR_TIMEOUT);
      INFO(l);
      CHECK(l.find("cc_comm_regrow(nranks=3) on job 'never', communicator 1, generation 0 did not "
                   "complete within") != std::string::npos);
      CHECK(l.find("rank 2 never came: no replacement joined for it; start a process with "
                   "RANK=2") != std::string::npos);
    }
    CHECK(cc::test::ms_since(t0) < 2000 + 3000);
    // A later attempt starts afresh: with a replacement now, it completes.
    auto fresh = replacement("never", 2, 3);
    for (int r : {0, 1}) ms[r]->say("regrow 3 15000");
    for (int r : {0, 1}) CHECK(field(ms[r]->next("RECOVERED"), "members") == "0,1,2");
    CHECK(field(fresh->next("READY"), "gen") == "1");
  }
  SECTION("survivors that disagree all get the same words") {
    auto ms = start_job("disagree", 3);
    kill_ranks(ms, {0});
    for (int r : {1, 2}) ms[r]->next("FAILED");
    ms[1]->say("shrink 10000");
    usleep(200000);
    ms[2]->say("regrow 3 10000");
    for (int r : {1, 2}) {
      const std::string l = cc::test::recover_error(*ms[r], CC_ERR_MISMATCH);
      INFO(l);
      CHECK(l.find("ranks disagree on how job 'disagree', communicator 1, generation 0 goes on: "
                   "rank 1 (host") != std::string::npos);
      CHECK(l.find("called cc_comm_shrink, rank 2 (host") != std::string::npos);
      CHECK(l.find("called cc_comm_regrow(nranks=3); every survivor must make the same call") !=
            std::string::npos);
    }
  }
  SECTION("a second start of a rank that is alive is refused at once") {
    auto ms = start_job("stale", 2);
    auto twin = replacement("stale", 1, 2);
    const std::string l = twin->next("ERROR");
    INFO(l);
    CHECK(l.find("ERROR " + std::to_string(CC_ERR_MISMATCH) + " ") == 0);
    CHECK(l.find("after it had completed, and rank 1 is alive in job 'stale', communicator 1, "
                 "generation 0") != std::string::npos);
  }
}

TEST_CASE("etcd: the leader killed while the survivors shrink: they agree, without an error") {
  auto cluster = cc::test::start_cluster(cc::test::members(3));
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

TEST_CASE("etcd: a death while the new communicator is made: the call fails, and again works") {
  auto ms = start_job("second-late", 5);
  kill_ranks(ms, {4});
  for (int r : {0, 1, 2, 3}) ms[r]->next("FAILED");
  // "settle": as while NCCL builds the new communicator, long enough for
  // the death below to be told (its lease is 1 s).
  for (int r : {0, 1, 2, 3}) ms[r]->say("shrink 10000 settle 4000");
  usleep(500000);
  kill_ranks(ms, {2});
  for (int r : {0, 1, 3}) {
    const std::string l = cc::test::recover_error(*ms[r], CC_ERR_PEER_FAILED);
    INFO("rank " << r << ": " << l);
    CHECK(l.find("rank 2 (host") != std::string::npos);
    CHECK(l.find("generation 1") != std::string::npos);
    CHECK(l.find("failed while the new communicator was being made") != std::string::npos);
    CHECK(l.find("call cc_comm_shrink again") != std::string::npos);
  }
  // Each recovers from the generation it was given, whose rank 2 (job rank 2) is gone.
  for (int r : {0, 1, 3}) ms[r]->say("shrink 10000");
  cc::test::check_shrunk(ms, "2", "0,1,3", "2");
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
  // No rank and no cc-run hosts the rendezvous: rank 0's death takes nothing with it.
  auto [lines, code] = cc_run_job({"-n", "3", "--max-restarts", "0", "--job-id", "cc-run-shrink"},
                                  {"--interval", "100", "--misses", "5", "--auto", "shrink",
                                   "--die-rank", "0"});
  INFO(joined(lines));
  CHECK(code == 137);  // rank 0's status
  CHECK(has_line(lines, "[rank 1] RECOVERED gen=1 rank=0 size=2 members=1,2 failed=0 "));
  CHECK(has_line(lines, "[rank 2] RECOVERED gen=1 rank=1 size=2 members=1,2 failed=0 "));
}
