// The rendezvous server's recovery rules (rendezvous/server_core/recovery.cpp),
// driven through ServerCore with a fake clock: who goes on after a failure,
// replacements, stale processes, deadlines, two jobs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <vector>

#include "rendezvous/rules/recovery_rules.hpp"
#include "tests/unit/server_core_harness.hpp"

using namespace std::chrono_literals;
namespace rv = cc::rv;
using cc::test::Harness;
using cc::test::join_msg;
using cc::test::ranks_of;

namespace {

// The new generation's job ranks as a member works them out (the server
// sends rank 0 only), from the job ranks of the generation before.
std::vector<int32_t> shrunk(const rv::Joined& j, const std::vector<int32_t>& before) {
  return cc::rv::rules::next_generation_members(before, rv::RecoverKind::shrink, j);
}
std::vector<int32_t> regrown(const rv::Joined& j) {
  return cc::rv::rules::next_generation_members({}, rv::RecoverKind::regrow, j);
}

// A new process started with rank r: pid 2000 + r.
rv::Join replacement(int r, int world, uint32_t timeout_ms = 1000) {
  rv::Join j = join_msg(r, world, "h" + std::to_string(r), timeout_ms);
  j.info.pid = static_cast<uint32_t>(2000 + r);
  return j;
}

// Member r of a job joins on connection base + r, from host "h<r>" with pid 1000 + r;
// its recovery connection is base + 100 + r.
struct Job {
  Harness& h;
  rv::ConnId base;
  int world;
  std::string id = "job";
  std::map<int, std::vector<uint8_t>> seats{};  // by job rank, from its Joined

  rv::ConnId member(int r) const { return base + static_cast<rv::ConnId>(r); }
  rv::ConnId recovery(int r) const { return base + 100 + static_cast<rv::ConnId>(r); }

  void join_all() {
    for (int r = 0; r < world; ++r) h.client(member(r), id);
    for (int r = 0; r < world; ++r) h.feed(member(r), join_msg(r, world, "h" + std::to_string(r)));
    for (int r = 0; r < world; ++r) {
      const auto joined = h.one_as<rv::Joined>(member(r));
      CHECK(joined.seat.size() >= 16);
      seats[r] = joined.seat;
    }
  }
  // A replacement() for rank r connects on `conn` and joins.
  void replace(rv::ConnId conn, int r, uint32_t timeout_ms = 1000, uint32_t request_id = 1) {
    h.client(conn, id);
    h.feed(conn, replacement(r, world, timeout_ms), request_id);
  }
  // replace(), refused as a mismatch: the refusal's message.
  std::string replace_refused(rv::ConnId conn, int r) {
    replace(conn, r);
    return h.refusal(conn, CC_ERR_MISMATCH);
  }
  // The process of job rank r dies: every connection of it drops.
  void kill(int r, bool recovery_too = false) {
    h.core.on_disconnect(member(r), "the client closed the connection (end of stream)");
    if (recovery_too) h.core.on_disconnect(recovery(r), "end of stream");
  }
  rv::Recover recover(int r, uint32_t generation, rv::RecoverKind kind, int nranks = 0,
                      bool can_shrink = false, uint32_t timeout_ms = 1000) const {
    rv::Recover m;
    m.info = join_msg(r, world, "h" + std::to_string(r)).info;
    m.generation = generation;
    m.kind = kind;
    m.nranks = nranks;
    m.can_shrink = can_shrink;
    m.timeout_ms = timeout_ms;
    if (auto s = seats.find(r); s != seats.end()) m.seat = s->second;
    return m;
  }
  // Survivor r asks on a fresh connection (recovery(r) unless given).
  void ask(int r, uint32_t generation, rv::RecoverKind kind, int nranks = 0,
           bool can_shrink = false, uint32_t timeout_ms = 1000, rv::ConnId conn = 0) {
    if (conn == 0) conn = recovery(r);
    h.client(conn, id);
    h.feed(conn, recover(r, generation, kind, nranks, can_shrink, timeout_ms), 50);
  }
  void shrink(int r, uint32_t generation = 0, bool can_shrink = false, uint32_t timeout_ms = 1000) {
    ask(r, generation, rv::RecoverKind::shrink, 0, can_shrink, timeout_ms);
  }
  void regrow(int r, int nranks, uint32_t generation = 0, uint32_t timeout_ms = 1000) {
    ask(r, generation, rv::RecoverKind::regrow, nranks, false, timeout_ms);
  }
};

rv::Joined joined_of(Harness& h, rv::ConnId c) { return h.one_as<rv::Joined>(c); }

void drain(Harness& h, const std::vector<rv::ConnId>& conns) {
  for (rv::ConnId c : conns) h.take(c);
}

}  // namespace

TEST_CASE("recovery: 8 ranks, 2 killed: every survivor gets the same membership") {
  Harness h;
  Job job{h, 1, 8};
  job.join_all();
  job.kill(2);
  job.kill(5);
  const std::vector<int> survivors = {0, 1, 3, 4, 6, 7};
  // Each survivor heard of both deaths on its connection.
  for (int r : survivors) {
    auto v = h.take(job.member(r));
    REQUIRE(v.size() == 2);
    CHECK(std::get<rv::PeerEvent>(v[0].message).rank == 2);
    CHECK(std::get<rv::PeerEvent>(v[1].message).rank == 5);
  }
  // Nothing is decided while a live survivor has not asked.
  for (int r : {7, 3, 0, 6, 1}) job.shrink(r);
  for (int r : survivors) CHECK(h.take(job.recovery(r)).empty());
  job.shrink(4);
  // No ncclCommShrink: the survivor with the lowest job rank makes the id.
  auto wanted = h.take(job.recovery(0));
  REQUIRE(wanted.size() == 1);
  CHECK(wanted[0].request_id == 50);
  CHECK(std::get<rv::RecoverIdWanted>(wanted[0].message).generation == 1);
  for (int r : {1, 3, 4, 6, 7}) CHECK(h.take(job.recovery(r)).empty());
  h.feed(job.recovery(0), rv::RecoverId{1, {9, 8, 7}, 1000}, 51);

  std::vector<rv::Joined> got;
  for (int r : survivors) {
    auto v = h.take(job.recovery(r));
    REQUIRE(v.size() == 1);
    CHECK(v[0].request_id == (r == 0 ? 51u : 50u));
    got.push_back(std::get<rv::Joined>(v[0].message));
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const rv::Joined& j = got[i];
    CHECK(j.generation == 1);
    CHECK(j.rank == static_cast<int32_t>(i));  // dense, in job-rank order
    CHECK(shrunk(j, {0, 1, 2, 3, 4, 5, 6, 7}) == std::vector<int32_t>{0, 1, 3, 4, 6, 7});
    CHECK(j.failed == std::vector<int32_t>{2, 5});
    CHECK(j.unique_id == std::vector<uint8_t>{9, 8, 7});
    CHECK(j.method == rv::RecoverMethod::new_id);
    CHECK(j.world_size == 6);
    CHECK(ranks_of(j.members) == std::vector<int32_t>{0});  // rank 0 only, as after a join
  }
}

TEST_CASE("recovery: a shrink uses ncclCommShrink only when every survivor can") {
  Harness h;
  Job job{h, 1, 4};
  job.join_all();
  job.kill(1);
  SECTION("all can") {
    for (int r : {0, 2, 3}) job.shrink(r, 0, true);
    for (int r : {0, 2, 3}) {
      const rv::Joined j = joined_of(h, job.recovery(r));
      CHECK(j.method == rv::RecoverMethod::nccl_shrink);
      CHECK(j.unique_id.empty());
      CHECK(j.failed == std::vector<int32_t>{1});
    }
  }
  SECTION("one cannot (its NCCL lacks ncclCommShrink, or its communicator was aborted)") {
    job.shrink(0, 0, true);
    job.shrink(2, 0, false);
    job.shrink(3, 0, true);
    CHECK(std::holds_alternative<rv::RecoverIdWanted>(h.one(job.recovery(0))));
    h.feed(job.recovery(0), rv::RecoverId{1, {1}, 1000});
    for (int r : {0, 2, 3})
      CHECK(joined_of(h, job.recovery(r)).method == rv::RecoverMethod::new_id);
  }
}

TEST_CASE("recovery: a second death during a shrink") {
  Harness h;
  Job job{h, 1, 4};
  job.join_all();
  job.kill(3);
  drain(h, {job.member(0), job.member(1), job.member(2)});
  SECTION("a rank that dies before it asked is left out too") {
    job.shrink(0, 0, true);
    job.shrink(1, 0, true);
    CHECK(h.take(job.recovery(0)).empty());
    job.kill(2);
    for (int r : {0, 1}) {
      const rv::Joined j = joined_of(h, job.recovery(r));
      CHECK(shrunk(j, {0, 1, 2, 3}) == std::vector<int32_t>{0, 1});
      CHECK(j.failed == std::vector<int32_t>{2, 3});
    }
  }
  SECTION("a rank that dies after it asked is left out") {
    job.shrink(1, 0, true);
    job.kill(1, true);
    job.shrink(0, 0, true);
    job.shrink(2, 0, true);
    for (int r : {0, 2}) {
      const rv::Joined j = joined_of(h, job.recovery(r));
      CHECK(shrunk(j, {0, 1, 2, 3}) == std::vector<int32_t>{0, 2});
      CHECK(j.failed == std::vector<int32_t>{1, 3});
    }
  }
  SECTION("the id maker that dies is replaced by the next") {
    job.shrink(2);
    job.shrink(1);
    job.shrink(0);
    CHECK(std::holds_alternative<rv::RecoverIdWanted>(h.one(job.recovery(0))));
    job.kill(0, true);
    CHECK(std::holds_alternative<rv::RecoverIdWanted>(h.one(job.recovery(1))));
    h.feed(job.recovery(1), rv::RecoverId{1, {5}, 1000});
    for (int r : {1, 2}) {
      const rv::Joined j = joined_of(h, job.recovery(r));
      CHECK(shrunk(j, {0, 1, 2, 3}) == std::vector<int32_t>{1, 2});
      CHECK(j.failed == std::vector<int32_t>{0, 3});
      CHECK(j.unique_id == std::vector<uint8_t>{5});
    }
  }
  SECTION("a death after the decision fails the new generation; its members recover from it") {
    for (int r : {0, 1, 2}) job.shrink(r, 0, true);
    for (int r : {0, 1, 2}) REQUIRE(joined_of(h, job.recovery(r)).generation == 1);
    // Rank 2 dies while the others build NCCL: its death reaches generation 1
    // through its new connection, and generation 0 through its old one.
    job.kill(2, true);
    for (int r : {0, 1}) {
      auto ev = std::get<rv::PeerEvent>(h.one(job.recovery(r)));
      CHECK(ev.rank == 2);  // its rank in generation 1
      auto old = std::get<rv::PeerEvent>(h.one(job.member(r)));
      CHECK(old.rank == 2);
    }
    // Their attempt failed: they leave the new connection and call again,
    // naming the generation of the communicator they hold (0).
    for (int r : {0, 1}) {
      h.feed(job.recovery(r), rv::Leave{});
      h.core.on_disconnect(job.recovery(r), "closed");
      h.sink.out.erase(job.recovery(r));
      h.sink.closed.erase(job.recovery(r));
    }
    for (int r : {0, 1}) job.shrink(r, 0, true);
    for (int r : {0, 1}) {
      const rv::Joined j = joined_of(h, job.recovery(r));
      CHECK(j.generation == 2);
      CHECK(shrunk(j, {0, 1, 2}) == std::vector<int32_t>{0, 1});
      CHECK(j.failed == std::vector<int32_t>{2});  // in generation 1's numbering
    }
  }
}

TEST_CASE("recovery: failures reach only their own generation; progress is per generation") {
  Harness h;
  Job job{h, 1, 3};
  job.join_all();
  job.kill(2);
  drain(h, {job.member(0), job.member(1)});
  for (int r : {0, 1}) job.shrink(r, 0, true);
  for (int r : {0, 1}) REQUIRE(joined_of(h, job.recovery(r)).generation == 1);
  // Rank 1 drops its failed parent without a leave: generation 1 hears nothing.
  h.core.on_disconnect(job.member(1), "closed");
  CHECK(h.take(job.recovery(0)).empty());
  CHECK(std::get<rv::PeerEvent>(h.one(job.member(0))).rank == 1);
  h.feed(job.recovery(0), rv::Heartbeat{7});
  h.feed(job.recovery(1), rv::Heartbeat{9});
  drain(h, {job.recovery(0), job.recovery(1)});
  CHECK(h.core.member_progress("job", 0, 1) == std::map<int32_t, uint64_t>{{0, 7}, {1, 9}});
  h.feed(job.recovery(1), rv::ProgressQuery{0, -1, 1});
  const auto p = std::get<rv::Progress>(h.one(job.recovery(1)));
  REQUIRE(p.members.size() == 1);
  CHECK(p.members[0].rank == 0);
  CHECK(p.members[0].last_completed == 7);
  // Losing the parent connection without a leave made rank 1's process dead.
  job.ask(1, 1, rv::RecoverKind::shrink, 0, true, 1000, 601);
  CHECK_THAT(h.refusal(601, CC_ERR_MISMATCH), Catch::Contains("declared failed"));
}

TEST_CASE("recovery: regrow takes replacements that come early or late") {
  Harness h;
  Job job{h, 1, 4};
  job.join_all();
  job.kill(1);
  job.kill(3);
  drain(h, {job.member(0), job.member(2)});
  SECTION("early: the replacements wait for the regrow") {
    job.replace(301, 1, 1000, 70);
    job.replace(303, 3, 1000, 71);
    CHECK(h.take(301).empty());
    job.regrow(2, 4);
    CHECK(h.take(303).empty());
    job.regrow(0, 4);
  }
  SECTION("late: the survivors wait for the replacements") {
    job.regrow(0, 4);
    job.regrow(2, 4);
    h.advance(300ms);
    job.replace(303, 3, 1000, 71);
    CHECK(h.take(job.recovery(0)).empty());
    job.replace(301, 1, 1000, 70);
  }
  CHECK(std::holds_alternative<rv::RecoverIdWanted>(h.one(job.recovery(0))));
  h.feed(job.recovery(0), rv::RecoverId{1, {3, 3}, 1000});
  std::map<rv::ConnId, int> rank_of = {
      {job.recovery(0), 0}, {301, 1}, {job.recovery(2), 2}, {303, 3}};
  for (const auto& [conn, r] : rank_of) {
    const rv::Joined j = joined_of(h, conn);
    CHECK(j.generation == 1);
    CHECK(j.rank == r);  // survivors keep their numbers; replacements take the failed ones
    CHECK(regrown(j) == std::vector<int32_t>{0, 1, 2, 3});
    CHECK(j.world_size == 4);
    CHECK(ranks_of(j.members) == std::vector<int32_t>{0});
    CHECK(j.failed == std::vector<int32_t>{1, 3});
    CHECK(j.unique_id == std::vector<uint8_t>{3, 3});
  }
  // A second replacement for rank 1 is stale now.
  CHECK_THAT(job.replace_refused(401, 1),
             Catch::Contains("rank 1 is alive in job 'job', communicator 0, "
                             "generation 1: rank 1 (host h1, pid 2001, generation 1)") &&
                 Catch::Contains("came for an older generation"));
}

TEST_CASE("recovery: a replacement for rank 0 brings the id") {
  Harness h;
  Job job{h, 1, 3};
  job.join_all();
  job.kill(0);
  job.replace(300, 0);
  job.regrow(1, 3);
  job.regrow(2, 3);
  for (rv::ConnId c : {rv::ConnId{300}, job.recovery(1), job.recovery(2)}) {
    const rv::Joined j = joined_of(h, c);
    CHECK(j.unique_id == std::vector<uint8_t>{4, 2});  // from the replacement's Join
    CHECK(j.failed == std::vector<int32_t>{0});
  }
}

TEST_CASE("recovery: what never comes is named at the deadline") {
  Harness h;
  Job job{h, 1, 4};
  job.join_all();
  SECTION("a replacement") {
    job.kill(2);
    for (int r : {0, 1, 3}) job.regrow(r, 4, 0, 500);
    h.advance(499ms);
    CHECK(h.take(job.recovery(0)).empty());
    h.advance(1ms);
    for (int r : {0, 1, 3}) {
      CHECK_THAT(h.refusal(job.recovery(r), CC_ERR_TIMEOUT),
                 Catch::StartsWith("cc_comm_regrow(nranks=4) on job 'job', communicator 0, "
                                   "generation 0 did not complete within 500 ms: rank 2 never "
                                   "came: no replacement joined for it; start a process with "
                                   "RANK=2"));
    }
    // The survivors may call again: the generation is still 0.
    job.kill(3);
    h.core.on_disconnect(job.recovery(3), "gone");
    for (int r : {0, 1}) {
      h.core.on_disconnect(job.recovery(r), "gone");
      h.sink.out.erase(job.recovery(r));
      job.shrink(r, 0, true);
    }
    for (int r : {0, 1}) CHECK(joined_of(h, job.recovery(r)).failed == std::vector<int32_t>{2, 3});
  }
  SECTION("a survivor that does not call") {
    job.kill(3);
    job.shrink(0, 0, false, 300);
    job.shrink(1, 0, false, 400);
    h.advance(300ms);
    for (int r : {0, 1}) {
      CHECK_THAT(h.refusal(job.recovery(r), CC_ERR_TIMEOUT),
                 Catch::Contains("rank 2 (host h2, pid 1002, generation 0) is alive but "
                                 "did not call cc_comm_shrink"));
    }
  }
  SECTION("a replacement that no regrow takes") {
    job.kill(1);
    job.replace(301, 1, 600);
    for (int r : {0, 2, 3}) job.shrink(r, 0, true);  // they shrink instead
    for (int r : {0, 2, 3}) CHECK(joined_of(h, job.recovery(r)).generation == 1);
    h.advance(600ms);
    CHECK_THAT(h.refusal(301, CC_ERR_TIMEOUT),
               Catch::Contains("rank 1 waited 600 ms as a replacement") &&
                   Catch::Contains("no cc_comm_regrow took it"));
  }
}

TEST_CASE("recovery: stale processes and disagreements are refused with words") {
  rv::ServerOptions o;
  o.heartbeat_timeout = 300ms;
  Harness h(o);
  Job job{h, 1, 3};
  job.join_all();
  SECTION("a replacement for a rank that is alive") {
    CHECK_THAT(job.replace_refused(301, 1),
               Catch::Contains("rank 1 (host h1, pid 2001) joined communicator 0 of "
                               "job 'job' after it had completed") &&
                   Catch::Contains("stop it"));
  }
  SECTION("two replacements for one rank") {
    job.kill(1);
    job.replace(301, 1);
    h.client(302);
    rv::Join again = replacement(1, 3);
    again.info.pid = 3001;
    h.feed(302, again);
    CHECK_THAT(h.error_of(h.one(302)).message,
               Catch::Contains("one is already waiting: rank 1 (host h1, pid 2001)"));
    CHECK(h.take(301).empty());
  }
  SECTION("a rank declared failed for its silence cannot come back") {
    // Ranks 0 and 2 heartbeat; rank 1 stays silent past the window.
    h.advance(200ms);
    for (int r : {0, 2}) h.feed(job.member(r), rv::Heartbeat{1});
    h.advance(100ms);
    CHECK_THAT(h.sink.closed[job.member(1)], Catch::Contains("no heartbeat for 300 ms"));
    job.shrink(1);
    CHECK_THAT(h.refusal(job.recovery(1), CC_ERR_MISMATCH),
               Catch::Contains("rank 1 (host h1, pid 1001) cannot take part in the "
                               "next generation of job 'job', communicator 0, "
                               "generation 0: it was declared failed (no heartbeat") &&
                   Catch::Contains("RANK=1"));
  }
  SECTION("a rank left out of the latest generation") {
    h.core.on_disconnect(job.member(2), "gone");
    job.shrink(0, 0, true);
    job.shrink(1, 0, true);
    h.advance(10ms);
    h.client(401);
    h.feed(401, job.recover(2, 0, rv::RecoverKind::shrink));
    CHECK_THAT(h.error_of(h.one(401)).message,
               Catch::Contains("rank 2 (host h2, pid 1002) cannot take part") &&
                   Catch::Contains("generation 1"));
  }
  SECTION("one survivor shrinks, another regrows") {
    job.kill(2);
    job.shrink(0);
    job.regrow(1, 3);
    for (int r : {0, 1}) {
      CHECK_THAT(h.refusal(job.recovery(r), CC_ERR_MISMATCH),
                 Catch::Contains("ranks disagree on how job 'job', communicator 0, generation 0 "
                                 "goes on: rank 0 (host h0, pid 1000, generation 0) called "
                                 "cc_comm_shrink, rank 1 (host h1, pid 1001, generation 0) "
                                 "called cc_comm_regrow(nranks=3)"));
    }
  }
  SECTION("a regrow to more ranks than any job has is refused, and the others go on") {
    job.kill(2);
    job.regrow(0, 1 << 30);
    CHECK_THAT(h.refusal(job.recovery(0), CC_ERR_INVALID_ARGUMENT),
               Catch::Contains("called cc_comm_regrow(nranks=1073741824)") &&
                   Catch::Contains("; pass the job's size (1 to 65536 ranks)"));
    job.ask(0, 0, rv::RecoverKind::shrink, 0, true, 1000, 501);  // it calls again: a shrink
    job.shrink(1, 0, true);
    const auto joined = h.one_as<rv::Joined>(501);
    CHECK(rv::world_size_of(joined) == 2);
  }
  SECTION("a communicator the server never completed") {
    h.client(401);
    rv::Recover r = job.recover(0, 0, rv::RecoverKind::shrink);
    r.info.comm_number = 7;
    h.feed(401, r);
    CHECK(h.error_of(h.one(401)).code == CC_ERR_INVALID_USAGE);
  }
}

TEST_CASE("recovery: two jobs stay independent") {
  Harness h;
  Job a{h, 1, 3, "a"};
  Job b{h, 501, 3, "b"};
  a.join_all();
  b.join_all();
  a.kill(1);
  for (int r : {0, 1, 2}) CHECK(h.take(b.member(r)).empty());  // b hears nothing
  // b's ranks shrink too, with no failure: the same ranks, generation 1.
  for (int r : {0, 1, 2}) b.shrink(r, 0, true);
  for (int r : {0, 2}) a.shrink(r, 0, true);
  for (int r : {0, 1, 2}) {
    const rv::Joined j = joined_of(h, b.recovery(r));
    CHECK(j.generation == 1);
    CHECK(shrunk(j, {0, 1, 2}) == std::vector<int32_t>{0, 1, 2});
    CHECK(j.failed.empty());
  }
  for (int r : {0, 2}) {
    const rv::Joined j = joined_of(h, a.recovery(r));
    CHECK(shrunk(j, {0, 1, 2}) == std::vector<int32_t>{0, 2});
    CHECK(j.failed == std::vector<int32_t>{1});
  }
  // A replacement for b's rank 1 (alive) is refused; one for a's is taken.
  b.replace(901, 1);
  CHECK(h.error_of(h.one(901)).code == CC_ERR_MISMATCH);
  a.replace(902, 1);
  CHECK(h.take(902).empty());
}

TEST_CASE("recovery: a recovered generation outlives the failed one's connections") {
  // The survivors destroy their failed communicators after a shrink: their
  // first connections leave. The job's communicator state stays with the
  // recovery connections, so a later failure recovers from generation 1, and
  // a replacement for it is still taken as one.
  Harness h;
  Job job{h, 1, 4};
  job.join_all();
  job.kill(1);
  for (int r : {0, 2, 3}) job.shrink(r, 0, true);
  for (int r : {0, 2, 3}) CHECK(joined_of(h, job.recovery(r)).generation == 1);
  for (int r : {0, 2, 3}) {
    h.take(job.member(r));
    h.feed(job.member(r), rv::Leave{}, 7);
    const auto v = h.take(job.member(r));
    REQUIRE(v.size() == 1);
    CHECK(std::holds_alternative<rv::Ok>(v[0].message));
  }
  // Job rank 2 (rank 1 of generation 1) dies; ranks 0 and 3 hear it.
  h.core.on_disconnect(job.recovery(2), "end of stream");
  for (int r : {0, 3}) {
    auto v = h.take(job.recovery(r));
    REQUIRE(v.size() == 1);
    CHECK(std::get<rv::PeerEvent>(v[0].message).rank == 1);
  }
  job.ask(0, 1, rv::RecoverKind::shrink, 0, true, 1000, 300);
  job.ask(3, 1, rv::RecoverKind::shrink, 0, true, 1000, 303);
  for (rv::ConnId c : {rv::ConnId{300}, rv::ConnId{303}}) {
    const rv::Joined j = joined_of(h, c);
    CHECK(j.generation == 2);
    CHECK(shrunk(j, {0, 2, 3}) == std::vector<int32_t>{0, 3});
    CHECK(j.failed == std::vector<int32_t>{1});  // in generation 1's numbering
  }
  // A new process with job rank 1 is a replacement (it waits), not a new join.
  job.replace(400, 1);
  CHECK(h.take(400).empty());
}
