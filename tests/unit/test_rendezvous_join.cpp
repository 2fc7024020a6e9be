// A communicator's rendezvous without a GPU: threads play the ranks. Rank 0
// hosts the embedded server (or the job uses an external one), every rank
// receives rank 0's id, and failures come back as text to every rank.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "lib/comm/rendezvous_join.hpp"
#include "rendezvous/server.hpp"
#include "tests/common/free_port.hpp"
#include "tests/unit/rank_thread.hpp"
#include "tests/unit/rendezvous_request.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using namespace cc::test;

// Rank `rank` of `world`, with a GPU of its own.
cc::comm::RendezvousRequest request(int rank, int world, int port,
                                    std::chrono::milliseconds timeout, const std::string& job) {
  cc::comm::RendezvousRequest r = cc::test::rendezvous_request(rank, world, port, job, timeout);
  r.info.gpu_uuid = "GPU-" + std::to_string(rank);
  return r;
}

std::future<RankOutcome> start_rank(cc::comm::RendezvousRequest r) {
  return cc::test::start_rank_thread(cc::comm::rendezvous_join, std::move(r));
}

}  // namespace

TEST_CASE("every rank receives rank 0's id through the embedded server") {
  const int port = free_port();
  std::vector<std::future<RankOutcome>> ranks;
  // The others first: they retry until rank 0's server is up.
  for (int r = 2; r >= 0; --r) ranks.push_back(start_rank(request(r, 3, port, 10s, "job-a")));
  std::vector<RankOutcome> out;
  for (auto& f : ranks) out.push_back(f.get());
  for (auto& o : out) {
    INFO(o.status.message);
    CHECK(o.status.ok());
    CHECK(o.result.unique_id == kId);
    CHECK(o.result.client != nullptr);  // the control channel stays open
    CHECK(o.result.comm_number == 1u);
  }
  CHECK(out[2].result.server != nullptr);  // rank 0 (started last) holds the server
  CHECK(out[0].result.server == nullptr);
  for (auto& o : out) CHECK(o.result.client->leave().ok());
  for (auto& o : out) o.result.client.reset();
  out[2].result.server->release("job-a", 2000ms);
}

TEST_CASE("a rank that never comes is named to every rank that waits") {
  const int port = free_port();
  auto r0 = start_rank(request(0, 3, port, 1500ms, "job-b"));
  auto r1 = start_rank(request(1, 3, port, 1500ms, "job-b"));
  const auto t0 = Clock::now();
  for (auto* f : {&r0, &r1}) {
    RankOutcome o = f->get();
    CHECK(o.status.code == CC_ERR_TIMEOUT);
    CHECK_THAT(o.status.message, Catch::Contains("joining communicator 1 of job 'job-b' at "
                                                 "127.0.0.1:" +
                                                 std::to_string(port) + " failed"));
    CHECK_THAT(o.status.message, Catch::Contains("rank 2 of 3 never joined"));
  }
  CHECK(Clock::now() - t0 < 6s);
}

TEST_CASE("ranks that disagree on the world size are refused with words") {
  const int port = free_port();
  auto r0 = start_rank(request(0, 2, port, 5s, "job-c"));
  auto r1 = start_rank(request(1, 3, port, 5s, "job-c"));
  RankOutcome o0 = r0.get(), o1 = r1.get();
  CHECK_FALSE(o0.status.ok());
  CHECK(o1.status.code == CC_ERR_MISMATCH);
  CHECK_THAT(o1.status.message,
             Catch::StartsWith("rank 1 (host host1, pid 1001): joining communicator"));
}

TEST_CASE("with an external server rank 0 starts none") {
  cc::rv::ServerOptions so;
  so.bind_addr = "127.0.0.1";
  so.port = 0;
  std::unique_ptr<cc::rv::Server> server;
  REQUIRE(cc::rv::Server::start(so, &server).ok());
  auto q0 = request(0, 2, server->port(), 5s, "job-d");
  auto q1 = request(1, 2, server->port(), 5s, "job-d");
  q0.config.rendezvous = CC_RENDEZVOUS_EXTERNAL;
  q1.config.rendezvous = CC_RENDEZVOUS_EXTERNAL;
  auto r0 = start_rank(q0);
  auto r1 = start_rank(q1);
  RankOutcome o0 = r0.get(), o1 = r1.get();
  CHECK(o0.status.ok());
  CHECK(o1.status.ok());
  CHECK(o0.result.server == nullptr);
  CHECK(o1.result.unique_id == kId);
  server->stop();
}

TEST_CASE("no server at the address: an error naming it, at the deadline") {
  const int port = free_port();
  const auto t0 = Clock::now();
  RankOutcome o = start_rank(request(1, 2, port, 800ms, "job-e")).get();
  CHECK_FALSE(o.status.ok());
  CHECK_THAT(o.status.message,
             Catch::StartsWith(
                 "rank 1 (host host1, pid 1001): could not reach the rendezvous at 127.0.0.1:" +
                 std::to_string(port)));
  CHECK(Clock::now() - t0 < 5s);
}

TEST_CASE("generations count per job within a process") {
  const uint32_t a1 = cc::comm::next_comm_number("gen-job-x");
  const uint32_t a2 = cc::comm::next_comm_number("gen-job-x");
  const uint32_t b1 = cc::comm::next_comm_number("gen-job-y");
  CHECK(a1 == 1u);
  CHECK(a2 == 2u);
  CHECK(b1 == 1u);
}
