// A successor server's resumes (rendezvous/server_core/resume.cpp) driven
// through ServerCore with a fake clock: a communicator rebuilt from its
// members' Resumes, the refusals, the grace period's end, a Join or a
// Recover sent again, and the two ways a server stops; and the client's
// ResumeBook.
#include <catch2/catch.hpp>

#include <utility>
#include <vector>

#include "rendezvous/resume_book.hpp"
#include "tests/unit/server_core_harness.hpp"

using namespace std::chrono_literals;
namespace rv = cc::rv;
using cc::test::Harness;
using cc::test::join_msg;

namespace {

rv::ServerOptions successor(std::chrono::milliseconds grace = 1000ms) {
  rv::ServerOptions o;
  o.successor = true;
  o.resume_grace = grace;
  return o;
}

// Rank r of a generation of `world` ranks (job rank = rank unless given).
rv::Resume resume_of(int rank, int world, uint32_t generation = 0, int job_rank = -1) {
  rv::Resume r;
  r.info = join_msg(job_rank < 0 ? rank : job_rank, world, "h" + std::to_string(rank)).info;
  r.generation = generation;
  r.rank = rank;
  r.world_size = world;
  r.heartbeat_window_ms = 500;
  r.last_completed = 40 + static_cast<uint64_t>(rank);
  r.unique_id = {9, 9};
  return r;
}

void resume_ok(Harness& h, rv::ConnId c, const rv::Resume& r) {
  h.client(c);
  h.feed(c, r, 3);
  const auto v = h.take(c);
  REQUIRE(v.size() == 1);
  CHECK(v[0].request_id == 3);
  INFO((std::holds_alternative<rv::Error>(v[0].message) ? std::get<rv::Error>(v[0].message).message
                                                        : std::string()));
  CHECK(std::holds_alternative<rv::Ok>(v[0].message));
}

}  // namespace

TEST_CASE("resume: members rebuild their generation; heartbeats, progress and failures go on") {
  Harness h(successor());
  for (int r = 0; r < 3; ++r) resume_ok(h, 1 + r, resume_of(r, 3, 2));
  CHECK(h.core.job_busy("job"));
  CHECK(h.core.member_progress("job", 0, 2) == std::map<int32_t, uint64_t>{{0, 40}, {1, 41}, {2, 42}});
  h.feed(2, rv::Heartbeat{77}, 4);
  CHECK(std::holds_alternative<rv::HeartbeatAck>(h.one(2)));
  // Heartbeat windows (500 ms) restart at the resume: rank 2 stays silent.
  for (int i = 0; i < 2; ++i) {
    h.advance(200ms);
    h.feed(1, rv::Heartbeat{50}, 5);
    h.feed(2, rv::Heartbeat{51}, 5);
    CHECK(std::holds_alternative<rv::HeartbeatAck>(h.one(1)));
    CHECK(std::holds_alternative<rv::HeartbeatAck>(h.one(2)));
  }
  h.advance(200ms);
  auto ev = h.one_as<rv::PeerEvent>(1);
  CHECK(ev.kind == rv::PeerEventKind::failed);
  CHECK(ev.rank == 2);
  CHECK_THAT(ev.reason, Catch::Contains("no heartbeat"));
  // Its generation is this server's: the survivors shrink from it.
  h.client(11);
  h.client(12);
  rv::Recover rec;
  rec.info = resume_of(0, 3, 2).info;
  rec.generation = 2;
  rec.kind = rv::RecoverKind::shrink;
  rec.timeout_ms = 1000;
  h.feed(11, rec, 6);
  rec.info = resume_of(1, 3, 2).info;
  h.feed(12, rec, 6);
  CHECK(h.one_as<rv::RecoverIdWanted>(11).generation == 3);
  h.feed(11, rv::RecoverId{3, {5, 5}, 1000}, 7);
  for (rv::ConnId c : {rv::ConnId{11}, rv::ConnId{12}}) {
    const auto j = h.one_as<rv::Joined>(c);
    CHECK(j.generation == 3);
    CHECK(rv::world_size_of(j) == 2);
    CHECK(j.failed == std::vector<int32_t>{2});
  }
}

TEST_CASE("resume: refusals in words") {
  SECTION("a server that is no successor") {
    Harness h;
    h.client(1);
    h.feed(1, resume_of(0, 2));
    CHECK_THAT(h.refusal(1, CC_ERR_RENDEZVOUS), Catch::Contains("takes no resumes"));
  }
  SECTION("members that disagree") {
    Harness h(successor());
    resume_ok(h, 1, resume_of(0, 3));
    h.client(2);
    h.feed(2, resume_of(1, 4));
    CHECK_THAT(h.refusal(2, CC_ERR_MISMATCH),
               Catch::Contains("of 4 ranks") && Catch::Contains("of 3 ranks") &&
                   Catch::Contains("rank 0 (host h0"));
    rv::Resume other_id = resume_of(1, 3);
    other_id.unique_id = {1};
    h.feed(2, other_id);
    CHECK_THAT(h.refusal(2, CC_ERR_MISMATCH), Catch::Contains("1 bytes of NCCL id"));
    h.feed(2, resume_of(1, 3, 0, 0));  // rank 1 with rank 0's job rank
    CHECK_THAT(h.refusal(2, CC_ERR_MISMATCH), Catch::Contains("job rank 0"));
  }
  SECTION("a seat already resumed, and one whose connection ended") {
    Harness h(successor());
    resume_ok(h, 1, resume_of(0, 3));
    resume_ok(h, 2, resume_of(1, 3));
    h.client(3);
    h.feed(3, resume_of(0, 3));
    CHECK_THAT(h.refusal(3, CC_ERR_MISMATCH), Catch::Contains("already resumed"));
    h.core.on_disconnect(2, rv::ServerCore::kClientClosed, h.now);
    CHECK(std::get<rv::PeerEvent>(h.one(1)).rank == 1);  // announced as any drop
    h.feed(3, resume_of(1, 3));
    CHECK_THAT(h.refusal(3, CC_ERR_PEER_FAILED), Catch::Contains("cannot come back"));
  }
  SECTION("after the grace period") {
    Harness h(successor(500ms));
    h.client(1);
    h.advance(600ms);
    h.feed(1, resume_of(0, 2));
    CHECK_THAT(h.refusal(1, CC_ERR_PEER_FAILED), Catch::Contains("grace period of 500 ms"));
  }
}

TEST_CASE("resume: who never resumes is failed when the grace period ends, not before") {
  Harness h(successor(1000ms));
  resume_ok(h, 1, resume_of(0, 4, 1, 0));
  resume_ok(h, 2, resume_of(1, 4, 1, 2));  // a shrunk generation: job ranks 0, 2, ?, ?
  for (int i = 0; i < 9; ++i) {
    h.advance(100ms);
    for (rv::ConnId c : {rv::ConnId{1}, rv::ConnId{2}}) {
      h.feed(c, rv::Heartbeat{1}, 9);
      CHECK(std::holds_alternative<rv::HeartbeatAck>(h.one(c)));
    }
  }
  h.advance(150ms);
  for (rv::ConnId c : {rv::ConnId{1}, rv::ConnId{2}}) {
    const auto ev = h.one_as<rv::PeerEvent>(c);
    CHECK(ev.kind == rv::PeerEventKind::failed);
    CHECK(ev.rank == 2);
    CHECK(ev.with == std::vector<int32_t>{3});
    CHECK_THAT(ev.reason, Catch::Contains("ranks 2, 3") && Catch::Contains("did not resume"));
  }
  // The two go on as the rules say: a shrink leaves ranks 2 and 3 out.
  h.client(11);
  h.client(12);
  rv::Recover rec;
  rec.generation = 1;
  rec.kind = rv::RecoverKind::shrink;
  rec.timeout_ms = 1000;
  rec.can_shrink = true;
  rec.info = resume_of(0, 4, 1, 0).info;
  h.feed(11, rec);
  rec.info = resume_of(1, 4, 1, 2).info;
  h.feed(12, rec);
  const auto j = h.one_as<rv::Joined>(11);
  CHECK(j.method == rv::RecoverMethod::nccl_shrink);
  CHECK(j.failed == std::vector<int32_t>{2, 3});
  CHECK(rv::world_size_of(j) == 2);
}

TEST_CASE("resume: a Join sent again takes its seat; a Recover sent again waits for the rebuild") {
  Harness h(successor(1000ms));
  rv::Resume first = resume_of(0, 3);
  first.heartbeat_window_ms = 0;  // unwatched: this test sends no heartbeat
  resume_ok(h, 1, first);
  // Rank 1's Joined never came from the server that went: it joins again.
  h.client(2);
  h.feed(2, join_msg(1, 3, "h1"), 4);
  const auto joined = h.one_as<rv::Joined>(2);
  CHECK(joined.unique_id == std::vector<uint8_t>{9, 9});
  CHECK(joined.rank == 1);
  CHECK(rv::world_size_of(joined) == 3);
  // Rank 2 is gone; rank 0 had already asked for a shrink, and sends it again.
  h.client(11);
  rv::Recover rec;
  rec.info = resume_of(0, 3).info;
  rec.kind = rv::RecoverKind::shrink;
  rec.can_shrink = true;
  rec.timeout_ms = 5000;
  h.feed(11, rec, 8);
  CHECK(h.take(11).empty());
  h.client(12);
  rec.info = join_msg(1, 3, "h1").info;
  h.feed(12, rec, 8);
  CHECK(h.take(12).empty());
  h.advance(1100ms);  // the grace ends: rank 2 failed, the shrink decided
  CHECK(h.one_as<rv::PeerEvent>(1).rank == 2);
  for (rv::ConnId c : {rv::ConnId{11}, rv::ConnId{12}}) {
    const auto j = h.one_as<rv::Joined>(c);
    CHECK(j.generation == 1);
    CHECK(j.failed == std::vector<int32_t>{2});
  }
}

// The leader dies while a rank dies: the replacement cc-run starts joins on
// the server that took over before (or after) the survivors resume. Its
// Join waits for the rebuild, then is a replacement as on any server; the
// resumes are not refused as a communicator joined anew.
TEST_CASE("resume: a replacement's Join before or among the resumes waits for the rebuild") {
  Harness h(successor(1000ms));
  rv::DurableWrite key;  // the job had keys on the server that went
  key.job = "job";
  key.key = "ckpt";
  key.value = std::vector<uint8_t>{1};
  h.core.restore(key);
  const auto unwatched = [](int rank) {  // this test sends no heartbeat
    rv::Resume r = resume_of(rank, 3, 2);
    r.heartbeat_window_ms = 0;
    return r;
  };
  rv::Join repl = join_msg(2, 3, "h2");
  repl.info.pid = 2002;
  SECTION("before any resume") {
    h.client(9);
    h.feed(9, repl, 4);
    CHECK(h.take(9).empty());
    for (int r = 0; r < 2; ++r) resume_ok(h, 1 + r, unwatched(r));
  }
  SECTION("after the first resume") {
    resume_ok(h, 1, unwatched(0));
    h.client(9);
    h.feed(9, repl, 4);
    CHECK(h.take(9).empty());
    resume_ok(h, 2, unwatched(1));
  }
  CHECK(h.take(9).empty());
  h.advance(1100ms);  // the grace ends: rank 2 never resumed, its replacement waits
  for (rv::ConnId c : {rv::ConnId{1}, rv::ConnId{2}}) {
    const auto ev = h.one_as<rv::PeerEvent>(c);
    CHECK(ev.kind == rv::PeerEventKind::failed);
    CHECK(ev.rank == 2);
  }
  CHECK(h.take(9).empty());
  rv::Recover rec;
  rec.generation = 2;
  rec.kind = rv::RecoverKind::regrow;
  rec.nranks = 3;
  rec.timeout_ms = 1000;
  for (int r = 0; r < 2; ++r) {
    h.client(11 + r);
    rec.info = resume_of(r, 3, 2).info;
    h.feed(11 + r, rec, 6);
  }
  CHECK(h.one_as<rv::RecoverIdWanted>(11).generation == 3);
  h.feed(11, rv::RecoverId{3, {5, 5}, 1000}, 7);
  for (const auto& [c, rank] : std::vector<std::pair<rv::ConnId, int>>{{11, 0}, {12, 1}, {9, 2}}) {
    const auto j = h.one_as<rv::Joined>(c);
    CHECK(j.generation == 3);
    CHECK(j.rank == rank);  // the replacement takes the failed seat
    CHECK(rv::world_size_of(j) == 3);
    CHECK(j.failed == std::vector<int32_t>{2});
  }
}

TEST_CASE("resume: a handover answers nothing and tells every client; a failing stop tells a "
          "client with a session first") {
  SECTION("handover") {
    Harness h;
    h.client(1);
    h.feed(1, rv::Get{"never", 10000}, 5);
    h.core.stop(rv::StopMode::handover);
    const auto ev = h.one_as<rv::PeerEvent>(1);
    CHECK(ev.kind == rv::PeerEventKind::server_stopping);
    CHECK_THAT(ev.reason, Catch::Contains("handing its jobs over"));
    CHECK(h.sink.closed.count(1) == 1);
  }
  SECTION("fail") {
    Harness h;
    h.connect(1);
    h.feed(1, rv::Hello{"job", "h", 1, "test", {1, 2}});
    h.take(1);
    h.feed(1, rv::Get{"never", 10000}, 5);
    h.core.stop();
    const auto v = h.take(1);
    REQUIRE(v.size() == 2);
    CHECK(std::get<rv::PeerEvent>(v[0].message).kind == rv::PeerEventKind::server_stopping);
    CHECK(v[1].request_id == 5);
    CHECK(std::holds_alternative<rv::Error>(v[1].message));
  }
}

TEST_CASE("resume book: memberships to resume, requests to send again with their time left") {
  rv::ResumeBook book;
  CHECK_FALSE(book.member());
  book.window(700ms);
  rv::Joined j;
  j.unique_id = {1, 2};
  j.generation = 2;
  j.rank = 1;
  j.world_size = 3;
  book.joined(join_msg(4, 5, "h4").info, j);
  book.completed(99);
  REQUIRE(book.resumes().size() == 1);
  const rv::Resume& r = book.resumes()[0];
  CHECK(r.info.rank == 4);
  CHECK(r.rank == 1);
  CHECK(r.world_size == 3);
  CHECK(r.generation == 2);
  CHECK(r.heartbeat_window_ms == 700);
  CHECK(r.last_completed == 99);
  CHECK(r.unique_id == std::vector<uint8_t>{1, 2});
  CHECK_THAT(book.who(), Catch::Contains("rank 1 (host h4"));

  const auto now = rv::ResumeBook::Clock::now();
  book.await(7, rv::Get{"k", 10000}, now + 5250ms);
  book.await(3, rv::Set{"s", {1}}, now + 30s);
  CHECK(book.take_for_sending(7));
  CHECK_FALSE(book.take_for_sending(7));
  const auto again = book.to_send_again(now);
  REQUIRE(again.size() == 2);
  CHECK(again[0].first == 3);  // by request id
  CHECK(again[1].first == 7);
  CHECK(std::get<rv::Get>(again[1].second).timeout_ms == 5000);
  CHECK_FALSE(book.take_for_sending(3));  // written by the failover
  book.done(3);
  book.done(7);
  CHECK(book.awaited() == 0);
  book.left();
  CHECK_FALSE(book.member());
}
