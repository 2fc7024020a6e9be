// What the server core's output and counters cost as a job grows, counted
// rather than timed: the bytes a join of W ranks queues (however often its
// ranks join), the NAT notices a Joined carries, the size of the status
// report with huge joining generations, and the bytes the store limits count
// for what a key holds (against the heap's figures: server_core_heap.cpp).

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "rendezvous/server_core.hpp"
#include "tests/unit/server_core_harness.hpp"
#include "tools/cc-rendezvous/status_render.hpp"

using namespace std::chrono_literals;
namespace rv = cc::rv;
using cc::test::Harness;

namespace {

// Counts what the core sends, encoded as a connection would carry it, and
// keeps nothing.
class CountingSink : public rv::Sink {
 public:
  void send(rv::ConnId, uint32_t request_id, const rv::Message& m) override {
    frame_.clear();
    rv::append_frame(frame_, request_id, m);
    bytes += frame_.size();
    if (std::holds_alternative<rv::Joined>(m)) ++joined;
    if (std::holds_alternative<rv::Error>(m)) ++errors;
  }
  void close(rv::ConnId, const std::string&) override {}

  size_t bytes = 0;
  size_t joined = 0;
  size_t errors = 0;

 private:
  std::vector<uint8_t> frame_;
};

struct Counted {
  CountingSink sink;
  rv::ServerCore core{rv::ServerOptions{}, sink};
  rv::Clock::time_point now = rv::Clock::time_point{} + 1000s;

  void feed(rv::ConnId id, const rv::Message& m, uint32_t rid = 1) {
    core.on_bytes(id, rv::encode_frame(rid, m), now);
  }
  void client(rv::ConnId id, const std::string& job) {
    REQUIRE(core.on_connect(id, "10.1.0.1:" + std::to_string(id), now));
    feed(id, rv::Hello{job, "host", static_cast<uint32_t>(id), "test"});
  }
};

// Rank r of a world of w, on host r / 8, in communicator `generation`.
rv::Join rank_join(int r, int w, uint32_t comm_number) {
  rv::Join j = cc::test::join_msg(r, w, "bench-host-" + std::to_string(r / 8), 0);
  j.info.comm_number = comm_number;
  if (r == 0) j.unique_id.assign(128, 0x5a);
  return j;
}

}  // namespace

TEST_CASE("bounds: a join of W ranks queues O(W) bytes, however often its ranks join") {
  // Each Joined carries the id, rank 0's host and pid and a frame header: a
  // few hundred bytes, not a list of W members (which made it O(W^2)).
  constexpr size_t kPerMember = 512;
  SECTION("one join of 2048 ranks") {
    constexpr int kW = 2048;
    Counted c;
    for (int r = 0; r < kW; ++r) c.client(static_cast<rv::ConnId>(r + 1), "wide");
    const size_t after_hellos = c.sink.bytes;
    for (int r = 0; r < kW; ++r) c.feed(static_cast<rv::ConnId>(r + 1), rank_join(r, kW, 1), 2);
    CHECK(c.sink.errors == 0);
    CHECK(c.sink.joined == static_cast<size_t>(kW));
    const size_t queued = c.sink.bytes - after_hellos;
    INFO("bytes queued for the join: " << queued);
    CHECK(queued <= kPerMember * kW);
  }
  SECTION("256 ranks joining 64 communicators on the same connections") {
    constexpr int kW = 256;
    constexpr uint32_t kTimes = 64;
    Counted c;
    for (int r = 0; r < kW; ++r) c.client(static_cast<rv::ConnId>(r + 1), "often");
    const size_t after_hellos = c.sink.bytes;
    for (uint32_t g = 1; g <= kTimes; ++g)
      for (int r = 0; r < kW; ++r)
        c.feed(static_cast<rv::ConnId>(r + 1), rank_join(r, kW, g), 1 + g);
    CHECK(c.sink.errors == 0);
    CHECK(c.sink.joined == kW * kTimes);
    const size_t queued = c.sink.bytes - after_hellos;
    INFO("bytes queued for the joins: " << queued);
    CHECK(queued <= kPerMember * kW * kTimes);
  }
}

TEST_CASE("bounds: Joined carries a few NAT notices and counts the rest") {
  constexpr int kW = 64;
  Harness h;
  for (int r = 0; r < kW; ++r) h.client(static_cast<rv::ConnId>(r + 1));
  for (int r = 0; r < kW; ++r) {
    rv::Join j = cc::test::join_msg(r, kW, "nat-host-" + std::to_string(r));
    j.info.nccl_addr = "172.17.0.2";  // the bridge's address; connections come from 10.0.0.x
    h.feed(static_cast<rv::ConnId>(r + 1), j);
  }
  const auto j = h.one_as<rv::Joined>(kW);
  size_t lines = 1;
  for (char ch : j.notice) lines += ch == '\n' ? 1 : 0;
  INFO(j.notice);
  CHECK(lines == 9);  // 8 notices and the count of the others
  CHECK_THAT(j.notice, Catch::StartsWith("rank 0 (host nat-host-0") &&
                           Catch::Contains("a NAT or a Docker bridge sits between them") &&
                           Catch::EndsWith("and 56 more ranks of this generation the same (the "
                                           "server's log names them)"));
}

TEST_CASE("bounds: status stays within its budget with 300 joining generations of 100000") {
  constexpr int kWorld = 100000;
  constexpr uint32_t kComms = 300;
  Harness h;
  for (uint32_t g = 1; g <= kComms; ++g) {
    h.client(g, "huge");
    rv::Join j = cc::test::join_msg(0, kWorld, "h0", 600000);
    j.info.comm_number = g;
    h.feed(g, j);
  }
  h.client(1000, "");
  h.feed(1000, rv::StatusQuery{});
  const auto report = h.one_as<rv::StatusReport>(1000);
  const size_t size = rv::encode_frame(1, report).size();
  INFO("report bytes: " << size);
  CHECK(size <= rv::kStatusBudget + (64u << 10));
  REQUIRE(report.jobs.size() == 1);
  const auto& gens = report.jobs[0].comms;
  REQUIRE(gens.size() == kComms);  // each generation's own line fits
  size_t listed = 0;
  for (const auto& g : gens) {
    CHECK(g.world_size == kWorld);
    CHECK(g.joined == 1);
    listed += g.missing.size();
  }
  CHECK(gens[0].missing.size() == 4096);
  CHECK(gens[0].missing.front() == 1);
  CHECK(gens[0].missing.back() == 4096);
  CHECK(gens.back().missing.empty());
  CHECK(listed * 4 <= rv::kStatusBudget / 4);  // the missing lists' share of the budget

  const std::string text = cc::tools::rendezvous::status_text(report, "127.0.0.1:29500");
  CHECK_THAT(text, Catch::Contains("missing: ranks 1-4096 and 95903 more (99999 of 100000) not "
                                   "joined yet\n"));
  CHECK_THAT(text, Catch::Contains("missing: 99999 of 100000 ranks not joined yet (not listed: "
                                   "the report is full; ask for this job with --job)\n"));
}

TEST_CASE("bounds: the store limits count what a key holds") {
  constexpr size_t k = rv::ServerCore::kKeyOverhead;
  Counted c;
  c.client(1, "store");
  const auto counted = [&] { return c.core.metrics(c.now).store_bytes; };
  c.feed(1, rv::Set{"a", {1, 2, 3}});
  CHECK(counted() == 1 + 3 + k);
  c.feed(1, rv::Set{"a", {}});  // a smaller value: the key stays
  CHECK(counted() == 1 + k);
  c.feed(1, rv::Add{"n", 12});  // "12"
  CHECK(counted() == 1 + k + 1 + 2 + k);
  c.feed(1, rv::Del{"a"});
  c.feed(1, rv::Del{"n"});
  CHECK(counted() == 0);
  CHECK(c.sink.errors == 0);

  CHECK(c.sink.errors == 0);
}
