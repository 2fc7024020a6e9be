// The server's side of the watchdog, ServerCore driven directly
// with a fake sink and clock: a member's own heartbeat window (HeartbeatWindow), members
// that never heartbeat, and the Progress answer for "who is behind".
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "rendezvous/server_core.hpp"
#include "tests/unit/server_core_harness.hpp"

using namespace std::chrono_literals;
namespace rv = cc::rv;

namespace {

// A job of `world` members joined (connection r + 1 is rank r, on host-r).
struct Job : cc::test::Harness {
  explicit Job(int world, rv::ServerOptions o = {}) : Harness(std::move(o)) {
    for (int r = 0; r < world; ++r) {
      const auto id = static_cast<rv::ConnId>(r + 1);
      connect(id);
      feed(id,
           rv::Hello{"job", "host-" + std::to_string(r), 100u + static_cast<uint32_t>(r), "test"});
      rv::Join j;
      j.info.rank = r;
      j.info.world_size = world;
      j.info.comm_number = 1;
      j.info.host = "host-" + std::to_string(r);
      j.info.pid = 100u + static_cast<uint32_t>(r);
      j.info.nccl_version = 22809;
      if (r == 0) j.unique_id.assign(128, 1);
      feed(id, j);
    }
    for (int r = 0; r < world; ++r) {
      auto& v = sink.out[static_cast<rv::ConnId>(r + 1)];
      REQUIRE(std::holds_alternative<rv::Joined>(v.back().message));
      v.clear();
    }
  }
  std::vector<rv::PeerEvent> events(rv::ConnId id) {
    std::vector<rv::PeerEvent> ev;
    for (const auto& s : sink.out[id])
      if (auto* e = std::get_if<rv::PeerEvent>(&s.message)) ev.push_back(*e);
    return ev;
  }
};

}  // namespace

TEST_CASE("members that never heartbeat are never dropped (no server-side timeout)") {
  Job job(2);
  job.advance(3600s);
  CHECK(job.sink.closed.empty());
  CHECK(job.events(1).empty());
}

TEST_CASE("a member that asked to be watched is announced after its own window") {
  Job job(3);
  job.feed(2, rv::HeartbeatWindow{1500});
  REQUIRE(std::holds_alternative<rv::Ok>(job.sink.out[2].back().message));
  job.advance(1000ms);
  job.feed(2, rv::Heartbeat{5});
  REQUIRE(std::holds_alternative<rv::HeartbeatAck>(job.sink.out[2].back().message));
  job.advance(1400ms);  // 1400 ms since the last heartbeat: still inside the window
  CHECK(job.sink.closed.count(2) == 0);
  job.advance(200ms);
  REQUIRE(job.sink.closed.count(2) == 1);
  CHECK(job.sink.closed[2].find("no heartbeat for 1500 ms") != std::string::npos);
  for (rv::ConnId other : {rv::ConnId{1}, rv::ConnId{3}}) {
    auto ev = job.events(other);
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].kind == rv::PeerEventKind::failed);
    CHECK(ev[0].rank == 1);
    CHECK(ev[0].host == "host-1");
    CHECK(ev[0].pid == 101);
  }
  // The members that did not ask are still there.
  job.advance(3600s);
  CHECK(job.sink.closed.size() == 1);
}

TEST_CASE("a watched member that leaves cleanly is not announced") {
  Job job(2);
  job.feed(2, rv::HeartbeatWindow{500});
  job.feed(2, rv::Leave{});
  job.advance(10s);
  CHECK(job.sink.closed.count(2) == 0);
  CHECK(job.events(1).empty());
}

TEST_CASE("HeartbeatWindow{0} stops the heartbeat deadline") {
  Job job(2);
  job.feed(1, rv::HeartbeatWindow{500});
  job.feed(1, rv::HeartbeatWindow{0});
  job.advance(10s);
  CHECK(job.sink.closed.empty());
}

TEST_CASE("progress names the other members furthest behind, or one rank") {
  Job job(4);
  job.feed(3, rv::Heartbeat{42});
  job.feed(1, rv::Heartbeat{40});  // the asker: never in its own answer
  job.feed(4, rv::Heartbeat{41});
  job.advance(700ms);
  job.feed(2, rv::Heartbeat{41});
  job.sink.out[1].clear();
  job.feed(1, rv::ProgressQuery{1, -1});
  REQUIRE(job.sink.out[1].size() == 1);
  const auto* p = std::get_if<rv::Progress>(&job.sink.out[1][0].message);
  REQUIRE(p != nullptr);
  REQUIRE(p->members.size() == 2);  // ranks 1 and 3 at #41, sorted by rank
  CHECK(p->members[0].rank == 1);
  CHECK(p->members[0].last_completed == 41);
  CHECK(p->members[0].host == "host-1");
  CHECK(p->members[0].pid == 101);
  CHECK(p->members[0].silent_ms == 0);
  CHECK(p->members[1].rank == 3);
  CHECK(p->members[1].silent_ms == 700);
  // One rank by number, the asker included.
  job.sink.out[1].clear();
  job.feed(1, rv::ProgressQuery{1, 2});
  const auto* two = std::get_if<rv::Progress>(&job.sink.out[1].at(0).message);
  REQUIRE(two != nullptr);
  REQUIRE(two->members.size() == 1);
  CHECK(two->members[0].last_completed == 42);
  job.sink.out[1].clear();
  job.feed(1, rv::ProgressQuery{1, 0});
  CHECK(std::get<rv::Progress>(job.sink.out[1].at(0).message).members.at(0).last_completed == 40);
  // Another generation of the job: nobody.
  job.sink.out[1].clear();
  job.feed(1, rv::ProgressQuery{9, -1});
  const auto* none = std::get_if<rv::Progress>(&job.sink.out[1].at(0).message);
  REQUIRE(none != nullptr);
  CHECK(none->members.empty());
}
