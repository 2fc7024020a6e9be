// A communicator's start without a GPU: threads play ranks against rank 0's
// embedded server on loopback. The reachability test runs for real between
// ranks that say they are on different hosts; a rank's failed init reaches
// the others with its own message; a rank that vanishes is named.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/comm/init_listener.hpp"
#include "lib/comm/preflight_probe.hpp"
#include "lib/comm/startup.hpp"
#include "tests/common/free_port.hpp"
#include "tests/unit/rank_thread.hpp"
#include "tests/unit/rendezvous_request.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using namespace cc::test;

cc::settings::Getenv env_of(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

// Rank `rank` of `world`; `host_key` is its host to NCCL (ranks of one key
// are not tested against each other).
cc::comm::StartRequest request(int rank, int world, int port, const std::string& job,
                               const std::string& host_key,
                               std::map<std::string, std::string> vars = {}) {
  cc::comm::StartRequest r;
  r.rendezvous = cc::test::rendezvous_request(rank, world, port, job, 10s);
  r.getenv = env_of(std::move(vars));
  r.set_env = false;
  r.host_key_override = host_key;
  r.addr_override = "127.0.0.1";
  return r;
}

std::future<RankOutcome> start_rank(cc::comm::StartRequest r) {
  return cc::test::start_rank_thread(cc::comm::start, std::move(r));
}

std::vector<RankOutcome> start_all(std::vector<cc::comm::StartRequest> requests) {
  std::vector<std::future<RankOutcome>> futures;
  for (auto& r : requests) futures.push_back(start_rank(std::move(r)));
  std::vector<RankOutcome> out;
  for (auto& f : futures) out.push_back(f.get());
  return out;
}

void finish(std::vector<RankOutcome>& ranks, const std::string& job) {
  for (auto& r : ranks)
    if (r.result.client) (void)r.result.client->leave();
  for (auto& r : ranks) r.result.client.reset();
  for (auto& r : ranks)
    if (r.result.server) r.result.server->release(job, 2000ms);
}

}  // namespace

TEST_CASE("startup: ranks on one host have nothing to test; on several they test and pass") {
  const int port = free_port();
  SECTION("one host") {
    auto ranks =
        start_all({request(0, 3, port, "one-host", "A"), request(1, 3, port, "one-host", "A"),
                   request(2, 3, port, "one-host", "A")});
    for (auto& r : ranks) {
      INFO(r.status.message);
      CHECK(r.status.ok());
      CHECK(r.result.unique_id == kId);
      REQUIRE(r.result.members.size() == 1);  // rank 0, named for when its server goes
      CHECK(r.result.members[0].rank == 0);
    }
    finish(ranks, "one-host");
  }
  SECTION("three hosts, the connections made over loopback") {
    auto ranks = start_all({request(0, 3, port, "three", "A"), request(1, 3, port, "three", "B"),
                            request(2, 3, port, "three", "C")});
    for (auto& r : ranks) {
      INFO(r.status.message);
      CHECK(r.status.ok());
    }
    finish(ranks, "three");
  }
  SECTION("one rank with CC_PREFLIGHT=0: nobody waits, nothing fails") {
    auto ranks = start_all({request(0, 2, port, "off", "A"),
                            request(1, 2, port, "off", "B", {{"CC_PREFLIGHT", "0"}})});
    for (auto& r : ranks) {
      INFO(r.status.message);
      CHECK(r.status.ok());
    }
    finish(ranks, "off");
  }
}

TEST_CASE("startup: a malformed CC_PREFLIGHT is refused before anything waits") {
  RankOutcome r =
      start_rank(request(0, 1, free_port(), "bad", "A", {{"CC_PREFLIGHT", "maybe"}})).get();
  CHECK(r.status.code == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(r.status.message, Catch::Contains("CC_PREFLIGHT='maybe'"));
}

TEST_CASE("startup: a rank that cannot start says why, and every other rank stops with its words") {
  const int port = free_port();
  auto ranks = start_all({request(0, 3, port, "nosock", "A"),
                          request(1, 3, port, "nosock", "B", {{"NCCL_SOCKET_IFNAME", "nosuchif0"}}),
                          request(2, 3, port, "nosock", "C")});
  CHECK(ranks[1].status.code == CC_ERR_SYSTEM);
  CHECK_THAT(ranks[1].status.message,
             Catch::Contains("rank 1 (host host1, pid 1001)") &&
                 Catch::Contains("NCCL_SOCKET_IFNAME=nosuchif0 matches no running interface"));
  for (int r : {0, 2}) {
    INFO("rank " << r);
    CHECK(ranks[r].status.code == CC_ERR_PEER_FAILED);
    CHECK_THAT(ranks[r].status.message,
               Catch::Contains("rank " + std::to_string(r) + " (host host" + std::to_string(r)) &&
                   Catch::Contains("rank 1 (host host1, pid 1001) could not start") &&
                   Catch::Contains("NCCL_SOCKET_IFNAME=nosuchif0 matches no running interface"));
  }
  finish(ranks, "nosock");
}

TEST_CASE("startup: after the start, a failed init and a vanished rank are news to the others") {
  const int port = free_port();
  auto ranks = start_all({request(0, 3, port, "news", "A"), request(1, 3, port, "news", "A"),
                          request(2, 3, port, "news", "A")});
  for (auto& r : ranks) REQUIRE(r.status.ok());
  auto watch = [&](int rank) {
    return std::make_unique<cc::comm::InitListener>(*ranks[static_cast<size_t>(rank)].result.client,
                                                    "rank " + std::to_string(rank), rank, 1,
                                                    ranks[0].result.members, true);
  };
  auto w0 = watch(0);
  auto w1 = watch(1);
  auto w2 = watch(2);
  CHECK_FALSE(w0->news());
  SECTION("rank 2's own failure reaches ranks 0 and 1 in its words; they leave quietly") {
    const cc::Status own = w2->conclude(
        cc::make_status(CC_ERR_NCCL,
                        "ncclCommInitRankConfig failed on rank 2 (host host2, pid 1002): "
                        "invalid usage: Failed to initialize any NET plugin"));
    CHECK(own.code == CC_ERR_NCCL);  // its own message, unchanged
    for (auto* w : {w0.get(), w1.get()}) {
      auto news = w->news_within(2000ms);
      REQUIRE(news);
      CHECK(news->code == CC_ERR_PEER_FAILED);
      CHECK_THAT(news->message, Catch::Contains("rank 2 (host host2, pid 1002) could not start") &&
                                    Catch::Contains("Failed to initialize any NET plugin"));
      CHECK(w->heard());
    }
    const cc::Status out = w0->conclude(cc::make_status(CC_ERR_TIMEOUT, "NCCL stopped"));
    CHECK(out.code == CC_ERR_TIMEOUT);  // already heard: its own status stays, it only leaves
  }
  SECTION("rank 1 vanishes: named with how its connection ended") {
    ranks[1].result.client.reset();
    auto news = w0->news_within(2000ms);
    REQUIRE(news);
    CHECK(news->code == CC_ERR_PEER_FAILED);
    CHECK_THAT(news->message,
               Catch::Contains("rank 1 (host host1, pid 1001) was lost during init"));
  }
  SECTION("an own failure right after the news takes the news' words") {
    (void)w2->conclude(cc::make_status(CC_ERR_CUDA, "cudaMalloc failed: out of memory"));
    const cc::Status out =
        w0->conclude(cc::make_status(CC_ERR_NCCL, "remote process exited or network error"));
    CHECK(out.code == CC_ERR_PEER_FAILED);
    CHECK_THAT(out.message, Catch::Contains("cudaMalloc failed: out of memory"));
  }
  finish(ranks, "news");
}

TEST_CASE("startup: rank 0's failure reaches the others before its embedded server stops") {
  const int port = free_port();
  auto ranks = start_all({request(0, 2, port, "rank0", "A"), request(1, 2, port, "rank0", "A")});
  for (auto& r : ranks) REQUIRE(r.status.ok());
  cc::comm::InitListener w0(*ranks[0].result.client, "rank 0", 0, 1, ranks[0].result.members, true);
  cc::comm::InitListener w1(*ranks[1].result.client, "rank 1", 1, 1, ranks[1].result.members, true);
  (void)w0.conclude(cc::make_status(CC_ERR_NCCL, "rank 0's NCCL said no"));
  auto release = std::async(std::launch::async, [&] {
    ranks[0].result.client.reset();
    ranks[0].result.server->release("rank0", 1000ms);  // what discard does
  });
  auto news = w1.news_within(2000ms);
  REQUIRE(news);
  CHECK_THAT(news->message, Catch::Contains("rank 0 (host host0, pid 1000) could not start") &&
                                Catch::Contains("rank 0's NCCL said no"));
  (void)w1.conclude(*news, true);  // leaves: the server may stop now
  release.get();
  ranks[0].result.server.reset();
  ranks[1].result.client.reset();
}

TEST_CASE("startup: test connections reach a listener, and say what failed otherwise") {
  std::unique_ptr<cc::comm::PreflightListener> listener;
  REQUIRE(cc::comm::PreflightListener::open("127.0.0.1", "lo", &listener).ok());
  const uint64_t tag = cc::comm::preflight_tag("job", 3);
  CHECK(tag != cc::comm::preflight_tag("job", 4));
  listener->start(tag, 5);
  const uint32_t port = static_cast<uint32_t>(listener->port());
  const uint32_t closed = static_cast<uint32_t>(free_port());
  auto results = cc::comm::probe_targets({{5, "h", 1, "127.0.0.1", port},
                                          {6, "h", 1, "127.0.0.1", port},
                                          {7, "h", 1, "127.0.0.1", closed}},
                                         tag, 0, 1000ms);
  REQUIRE(results.size() == 3);
  CHECK(results[0].rank == 5);
  CHECK(results[0].reached);
  CHECK_FALSE(results[1].reached);  // rank 6 was asked for, rank 5 answered
  CHECK_THAT(results[1].words, Catch::Contains("answered as rank 5"));
  CHECK_FALSE(results[2].reached);
  CHECK(results[2].error == ECONNREFUSED);
  CHECK_THAT(results[2].words, Catch::Contains("connect: Connection refused"));
  CHECK(listener->answered() == 2);
  // Another generation of the job is another tag: no success either.
  auto other = cc::comm::probe_targets({{5, "h", 1, "127.0.0.1", port}}, tag + 1, 0, 1000ms);
  CHECK_FALSE(other[0].reached);
}
