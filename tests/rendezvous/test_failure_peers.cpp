// Peer-failure detection without a GPU: ranks are failure_member processes
// (control channel + watchdog, no NCCL) joined through an in-process server
// started as cc-run and the embedded server start it (no server-side
// heartbeat timeout: each member declares its own window).
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/server.hpp"
#include "tests/rendezvous/member_process.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string this_host() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

// One rank: the member program, talking over its stdin and stdout.
class Member : public cc::test::ChildProcess {
 public:
  Member(int port, const std::string& job, int rank, int world,
         const std::vector<std::string>& extra = {})
      : ChildProcess(cc::test::member_args("FAILURE_MEMBER", port, job, rank, world, extra)) {}
  void kill_now(int sig) { signal(sig); }
};

std::vector<std::unique_ptr<Member>> start_job(int port, const std::string& job, int world,
                                               std::vector<std::string> extra = {}) {
  std::vector<std::unique_ptr<Member>> ms;
  for (int r = 0; r < world; ++r)
    ms.push_back(std::make_unique<Member>(port, job, r, world, extra));
  for (int r = 0; r < world; ++r) {
    auto l = ms[r]->line(milliseconds(20000));
    INFO("rank " << r << " said: " << l.value_or("(nothing)"));
    REQUIRE(l == "READY " + std::to_string(r));
  }
  return ms;
}

long long ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t).count();
}

}  // namespace

TEST_CASE("a rank killed with SIGKILL is named to every other rank within 200 ms") {
  auto server = cc::test::start_local_server();
  auto ms = start_job(server->port(), "kill-one", 4);
  const pid_t victim = ms[2]->pid();
  const auto t0 = Clock::now();
  ms[2]->kill_now(SIGKILL);
  for (int r : {0, 1, 3}) {
    auto l = ms[r]->line(milliseconds(2000));
    const long long took = ms_since(t0);
    INFO("rank " << r << " said after " << took << " ms: " << l.value_or("(nothing)"));
    REQUIRE(l.has_value());
    CHECK(l->rfind("FAILED ", 0) == 0);
    CHECK(l->find("rank 2 (host " + this_host() + ", pid " + std::to_string(victim) + ")") !=
          std::string::npos);
    CHECK(l->find("failed") != std::string::npos);
    CHECK(l->find("Look at that rank's output") != std::string::npos);
    CHECK(took <= 200);
  }
}

TEST_CASE("an abort is announced once to every other rank, in its own words") {
  auto server = cc::test::start_local_server();
  auto ms = start_job(server->port(), "abort-one", 3);
  const auto t0 = Clock::now();
  ms[1]->say("abort rank 1 gave up: CUDA out of memory");
  for (int r : {0, 2}) {
    auto l = ms[r]->line(milliseconds(2000));
    INFO("rank " << r << " said: " << l.value_or("(nothing)"));
    REQUIRE(l.has_value());
    CHECK(l->rfind("FAILED rank 1 (host " + this_host() + ", pid " + std::to_string(ms[1]->pid()) +
                       ") aborted the job: rank 1 gave up: CUDA out of memory",
                   0) == 0);
    CHECK(ms_since(t0) <= 500);
  }
  // The aborting rank is not told of its own abort (it may hear of the
  // others, which exit on their FAILED, even before it says ABORTED).
  for (int i = 0; i < 2; ++i) {
    const auto own = ms[1]->line(milliseconds(300));
    INFO("rank 1 said: " << own.value_or("(nothing)"));
    CHECK(own.value_or("").find("FAILED rank 1 ") == std::string::npos);
  }
}

TEST_CASE("a clean leave is not a failure, and a member that never heartbeats is not dropped") {
  auto server = cc::test::start_local_server();
  // Rank 2 is a plain client: it joins but never asks to be watched.
  auto ms = start_job(server->port(), "leave-one", 3);
  Member plain(server->port(), "leave-plain", 0, 1, {"--no-watch"});
  REQUIRE(plain.line(milliseconds(20000)) == "READY 0");
  ms[1]->say("leave");
  REQUIRE(ms[1]->line(milliseconds(5000)) == "LEFT");
  // Past several heartbeat intervals of nothing: no one hears of a failure.
  CHECK_FALSE(ms[0]->line(milliseconds(1500)).has_value());
  CHECK_FALSE(ms[2]->line(milliseconds(10)).has_value());
  plain.say("behind 1");  // still connected and answered after 1.5 s of silence
  auto b = plain.line(milliseconds(5000));
  REQUIRE(b.has_value());
  CHECK(b->rfind("BEHIND ", 0) == 0);
}

TEST_CASE("a server that dies releases every rank, named as rank 0 when it lived there") {
  SECTION("embedded in rank 0") {
    auto server = cc::test::start_local_server();
    auto ms = start_job(server->port(), "server-dies", 3);
    const pid_t rank0 = ms[0]->pid();
    const auto t0 = Clock::now();
    server->stop();
    for (int r : {1, 2}) {
      auto l = ms[r]->line(milliseconds(3000));
      INFO("rank " << r << " said: " << l.value_or("(nothing)"));
      REQUIRE(l.has_value());
      CHECK(l->rfind("FAILED rank 0 (host " + this_host() + ", pid " + std::to_string(rank0) + ")",
                     0) == 0);
      CHECK(l->find("rendezvous server") != std::string::npos);
      CHECK(ms_since(t0) <= 1000);
    }
  }
  SECTION("a separate server (cc-run, cc-rendezvous)") {
    auto server = cc::test::start_local_server();
    auto ms = start_job(server->port(), "daemon-dies", 2, {"--external"});
    server->stop();
    for (int r : {0, 1}) {
      auto l = ms[r]->line(milliseconds(3000));
      INFO("rank " << r << " said: " << l.value_or("(nothing)"));
      REQUIRE(l.has_value());
      CHECK(l->rfind("FAILED the rendezvous server at 127.0.0.1:", 0) == 0);
      CHECK(l->find("is gone") != std::string::npos);
    }
  }
}

TEST_CASE("a stopped rank (no heartbeats) is named after its heartbeat window") {
  auto server = cc::test::start_local_server();
  // 100 ms x 3 misses: a 300 ms window.
  auto ms = start_job(server->port(), "silent-one", 3, {"--interval", "100", "--misses", "3"});
  const pid_t victim = ms[1]->pid();
  const auto t0 = Clock::now();
  ms[1]->kill_now(SIGSTOP);
  for (int r : {0, 2}) {
    auto l = ms[r]->line(milliseconds(3000));
    const long long took = ms_since(t0);
    INFO("rank " << r << " said after " << took << " ms: " << l.value_or("(nothing)"));
    REQUIRE(l.has_value());
    CHECK(l->find("rank 1 (host " + this_host() + ", pid " + std::to_string(victim) + ") failed") !=
          std::string::npos);
    CHECK(l->find("no heartbeat for 300 ms") != std::string::npos);
    CHECK(took >= 150);
    CHECK(took <= 1500);
  }
  ms[1]->kill_now(SIGKILL);
}

TEST_CASE("the rendezvous names the rank that is behind") {
  auto server = cc::test::start_local_server();
  std::vector<std::unique_ptr<Member>> ms;
  const std::vector<std::string> done = {"42", "41", "42"};
  for (int r = 0; r < 3; ++r)
    ms.push_back(std::make_unique<Member>(
        server->port(), "behind", r, 3,
        std::vector<std::string>{"--interval", "50", "--completed", done[r]}));
  for (int r = 0; r < 3; ++r)
    REQUIRE(ms[r]->line(milliseconds(20000)) == "READY " + std::to_string(r));
  // Let a heartbeat carry each rank's number.
  const auto until = Clock::now() + milliseconds(5000);
  std::string words;
  while (Clock::now() < until) {
    ms[0]->say("behind 43");
    words = ms[0]->line(milliseconds(5000)).value_or("");
    // Under a sanitizer rank 2's first heartbeat may come later than rank 1's.
    if (words.find("#41") != std::string::npos && words.find("rank 2") == std::string::npos) break;
    usleep(50000);
  }
  INFO(words);
  CHECK(words.rfind("BEHIND behind: rank 1 (host " + this_host() + ", pid " +
                        std::to_string(ms[1]->pid()) + ") last completed op #41",
                    0) == 0);
  CHECK(words.find("rank 2") == std::string::npos);
  // Nobody is behind op #42 except rank 1 at #41, once rank 0's heartbeat has
  // carried its #42 too (it may come late under a sanitizer).
  std::string w2;
  for (const auto until2 = Clock::now() + milliseconds(5000); Clock::now() < until2;) {
    ms[2]->say("behind 42");
    w2 = ms[2]->line(milliseconds(5000)).value_or("");
    if (w2.find("rank 0") == std::string::npos) break;
    usleep(50000);
  }
  INFO(w2);
  CHECK(w2.find("rank 1") != std::string::npos);
  CHECK(w2.find("rank 0") == std::string::npos);
  ms[2]->say("behind 41");
  auto w3 = ms[2]->line(milliseconds(5000)).value_or("");
  CHECK(w3.find("none is known to be behind") != std::string::npos);
}
