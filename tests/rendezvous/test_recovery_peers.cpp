// Recovery without a GPU: ranks are recovery_member processes (control
// channel, watchdog and the library's recovery step, no NCCL) on an
// in-process server, as under cc-run or cc-rendezvous. Killed ranks, shrink,
// regrow with replacements early and late, a second death, a replacement
// that never comes, stale processes, two jobs.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "rendezvous/server.hpp"
#include "tests/rendezvous/recovery_process.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

using cc::test::field;
using cc::test::kill_ranks;
using Member = cc::test::RecoveryMember;
using Members = cc::test::RecoveryMembers;

Members start_job(int port, const std::string& job, int world,
                  std::vector<std::string> extra = {}) {
  return cc::test::start_recovery_job("127.0.0.1", port, job, world, std::move(extra));
}

}  // namespace

TEST_CASE("8 ranks, 2 killed: every survivor shrinks to the same membership") {
  auto server = cc::test::start_local_server();
  auto ms = start_job(server->port(), "shrink-8", 8);
  kill_ranks(ms, {2, 5});
  for (auto& [r, m] : ms) {
    const std::string f = m->next("FAILED");
    INFO("rank " << r << ": " << f);
    CHECK(f.find("gen=0 rank ") != std::string::npos);
    CHECK(f.find("cc_comm_shrink") != std::string::npos);  // the message says how to go on
  }
  for (auto& [r, m] : ms) m->say("shrink 10000");
  for (const auto& [r, l] : cc::test::check_shrunk(ms, "1", "0,1,3,4,6,7", "2,5")) {
    INFO("rank " << r << ": " << l);
    CHECK(field(l, "size") == "6");
    CHECK(field(l, "id") == "1");  // made by job rank 0, handed to everyone
  }
  // The new generation works as a membership: a death in it is heard there.
  cc::test::check_death_in_generation_1(ms, 7, {0, 3}, 5);  // job rank 7 is its rank 5
}

TEST_CASE("regrow: replacements fill the holes, early or late") {
  auto server = cc::test::start_local_server();
  const bool early = GENERATE(true, false);
  INFO((early ? "replacements first" : "survivors first"));
  auto ms = start_job(server->port(), early ? "regrow-early" : "regrow-late", 4);
  kill_ranks(ms, {1, 3});
  Members fresh;
  auto start_replacements = [&] {
    for (int r : {1, 3})
      fresh[r] =
          std::make_unique<Member>(server->port(), early ? "regrow-early" : "regrow-late", r, 4);
  };
  if (early) start_replacements();
  for (int r : {0, 2}) ms[r]->say("regrow 4 15000");
  if (!early) {
    usleep(300000);
    start_replacements();
  }
  cc::test::check_regrown(ms, {0, 2}, "1", "0,1,2,3", "1,3");
  for (int r : {1, 3}) {
    const std::string l = fresh[r]->next("READY");
    INFO("replacement " << r << ": " << l);
    CHECK(field(l, "rank") == std::to_string(r));
    CHECK(field(l, "gen") == "1");  // it knows to take its state from a survivor
    CHECK(field(l, "size") == "4");
    CHECK(field(l, "failed") == "1,3");
  }
  // All four are members of generation 1: a replacement that dies is heard.
  fresh[3]->kill_now();
  for (int r : {0, 2}) CHECK(ms[r]->next("FAILED gen=1").find("rank 3 (host") != std::string::npos);
  CHECK(fresh[1]->next("FAILED gen=1").find("rank 3 (host") != std::string::npos);
}

TEST_CASE("a second death during a shrink") {
  auto server = cc::test::start_local_server();
  SECTION("before the rendezvous decided: left out too") {
    auto ms = start_job(server->port(), "second-early", 5);
    kill_ranks(ms, {4});
    for (int r : {0, 1, 2}) ms[r]->say("shrink 10000");
    usleep(200000);
    kill_ranks(ms, {3});  // it never called
    for (int r : {0, 1, 2}) {
      const std::string l = ms[r]->next("RECOVERED");
      INFO(l);
      CHECK(field(l, "members") == "0,1,2");
      CHECK(field(l, "failed") == "3,4");
    }
  }
  SECTION("while the new communicator is made: the call fails with words, and again works") {
    auto ms = start_job(server->port(), "second-late", 5);
    kill_ranks(ms, {4});
    // "settle": as while NCCL builds the new communicator.
    for (int r : {0, 1, 2, 3}) ms[r]->say("shrink 10000 settle 1500");
    usleep(500000);
    kill_ranks(ms, {2});
    for (int r : {0, 1, 3}) {
      const std::string l = ms[r]->next("RECOVER_ERROR");
      INFO("rank " << r << ": " << l);
      CHECK(l.rfind("RECOVER_ERROR 11 ", 0) == 0);  // CC_ERR_PEER_FAILED
      CHECK(l.find("rank 2 (host") != std::string::npos);
      CHECK(l.find("generation 1") != std::string::npos);
      CHECK(l.find("failed while the new communicator was being made") != std::string::npos);
      CHECK(l.find("call cc_comm_shrink again") != std::string::npos);
    }
    for (int r : {0, 1, 3}) ms[r]->say("shrink 10000");
    for (int r : {0, 1, 3}) {
      const std::string l = ms[r]->next("RECOVERED");
      INFO("rank " << r << ": " << l);
      CHECK(field(l, "gen") == "2");
      CHECK(field(l, "members") == "0,1,3");
      CHECK(field(l, "failed") == "2");  // generation 1's rank 2, which was job rank 2
    }
  }
}

TEST_CASE("a replacement that never comes is named at the deadline") {
  auto server = cc::test::start_local_server();
  auto ms = start_job(server->port(), "never", 4);
  kill_ranks(ms, {2});
  const auto t0 = Clock::now();
  for (int r : {0, 1, 3}) ms[r]->say("regrow 4 1500");
  for (int r : {0, 1, 3}) {
    const std::string l = ms[r]->next("RECOVER_ERROR");
    INFO("rank " << r << ": " << l);
    CHECK(l.rfind("RECOVER_ERROR 10 ", 0) == 0);  // CC_ERR_TIMEOUT
    CHECK(l.find("did not complete within") != std::string::npos);
    CHECK(l.find("rank 2 never came: no replacement joined for it; start a process with RANK=2") !=
          std::string::npos);
  }
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
  CHECK(took >= 1000);
  CHECK(took <= 8000);
  // The survivors go on without it instead.
  for (int r : {0, 1, 3}) ms[r]->say("shrink 10000");
  for (int r : {0, 1, 3}) CHECK(field(ms[r]->next("RECOVERED"), "members") == "0,1,3");
}

TEST_CASE("stale processes are refused with words") {
  auto server = cc::test::start_local_server();
  SECTION("a second start of a rank that is alive") {
    auto ms = start_job(server->port(), "stale-alive", 3);
    Member again(server->port(), "stale-alive", 1, 3);
    const std::string l = again.next("ERROR");
    INFO(l);
    CHECK(l.rfind("ERROR 9 ", 0) == 0);  // CC_ERR_MISMATCH
    CHECK(l.find("rank 1 is alive in job 'stale-alive', communicator 1, generation 0") !=
          std::string::npos);
    CHECK(l.find("came for an older generation, or was started twice") != std::string::npos);
  }
  SECTION("a replacement after another one took the rank") {
    auto ms = start_job(server->port(), "stale-late", 3);
    kill_ranks(ms, {1});
    Member first(server->port(), "stale-late", 1, 3);
    for (int r : {0, 2}) ms[r]->say("regrow 3 10000");
    CHECK(field(first.next("READY"), "gen") == "1");
    Member second(server->port(), "stale-late", 1, 3);
    const std::string l = second.next("ERROR");
    INFO(l);
    CHECK(l.find("rank 1 is alive in job 'stale-late', communicator 1, generation 1: rank 1 "
                 "(host") != std::string::npos);
  }
  SECTION("a rank that was given up on for its silence") {
    auto ms = start_job(server->port(), "stale-silent", 3, {"--interval", "100", "--misses", "3"});
    ms[2]->kill_now(SIGSTOP);
    for (int r : {0, 1}) CHECK(ms[r]->next("FAILED").find("no heartbeat") != std::string::npos);
    for (int r : {0, 1}) ms[r]->say("shrink 10000");
    for (int r : {0, 1}) CHECK(field(ms[r]->next("RECOVERED"), "members") == "0,1");
    ms[2]->kill_now(SIGCONT);
    ms[2]->say("shrink 5000");
    const std::string l = ms[2]->next("RECOVER_ERROR");
    INFO(l);
    CHECK(l.rfind("RECOVER_ERROR 9 ", 0) == 0);
    CHECK(l.find("cannot take part in the next generation") != std::string::npos);
    CHECK(l.find("A process the job has given up on cannot come back") != std::string::npos);
  }
}

TEST_CASE("two jobs on one server recover independently") {
  auto server = cc::test::start_local_server();
  auto a = start_job(server->port(), "job-a", 3);
  auto b = start_job(server->port(), "job-b", 3);
  kill_ranks(a, {0});
  // Job a's survivors know which rank failed; job b heard nothing.
  CHECK(a[1]->next("FAILED").find("rank 0 (host") != std::string::npos);
  a[1]->say("failed");
  CHECK(a[1]->next("FAILED_RANKS") == "FAILED_RANKS gen=0 0");
  for (int r : {0, 1, 2}) b[r]->say("failed");
  for (int r : {0, 1, 2}) CHECK(b[r]->next("FAILED_RANKS") == "FAILED_RANKS gen=0 -");
  for (int r : {1, 2}) a[r]->say("shrink 10000");
  for (int r : {1, 2}) {
    const std::string l = a[r]->next("RECOVERED");
    CHECK(field(l, "members") == "1,2");
    CHECK(field(l, "id") == "2");  // made by job rank 1
  }
  // Job b's ranks can shrink too, with no failure: the same ranks, one generation more.
  for (int r : {0, 1, 2}) b[r]->say("shrink 10000");
  for (int r : {0, 1, 2}) {
    const std::string l = b[r]->next("RECOVERED");
    CHECK(field(l, "gen") == "1");
    CHECK(field(l, "members") == "0,1,2");
    CHECK(field(l, "failed") == "-");
  }
}
