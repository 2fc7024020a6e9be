// How a recovery on etcd is decided (rendezvous/etcd/recovery_decision.*),
// over snapshots made here, no etcd: who is alive, gone or dead; who is
// awaited; which ranks of a regrow have no process; when the decision is
// ready and what it holds (members by new rank, ranks left out or replaced,
// the method, the roster); and the words of a refusal and of a deadline, as
// cc's own server says them. The etcd suite runs the same rules against a
// real cluster (tests/etcd/test_etcd_recovery.cpp).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "rendezvous/etcd/recovery_decision.hpp"
#include "rendezvous/rules/recovery_rules.hpp"

using namespace cc::rv;
using namespace cc::rv::etcd;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t kLease = 7;
const char* const kJob = "j";

MemberRecord record_of(int32_t rank, uint32_t pid, int32_t world_size = 4) {
  MemberRecord m;
  m.info.rank = rank;
  m.info.world_size = world_size;
  m.info.host = "h";
  m.info.pid = pid;
  return m;
}

Held held(const MemberRecord& m, int64_t lease) {
  KeyValue kv;
  kv.key = "member/" + std::to_string(m.info.rank);
  kv.value = encode(m);
  kv.lease = lease;
  return Held(kv);
}

// Generation 0 of communicator 3: job ranks 0..n-1, each a process of pid
// 100 + rank whose member key is on its lease.
Snapshot living(int n) {
  Snapshot s;
  for (int32_t r = 0; r < n; ++r) {
    s.members.push_back(r);
    s.seats.insert_or_assign(r, held(record_of(r, 100 + static_cast<uint32_t>(r)), kLease));
  }
  return s;
}

// The request of job rank `rank` (the process of pid `pid`), asked at `revision`.
void ask(Snapshot* s, int32_t rank, uint32_t pid, RecoverKind kind, int32_t nranks,
         int64_t revision, bool can_shrink = true, bool replacement = false,
         int32_t world_size = 4) {
  MemberRecord m = record_of(rank, pid, world_size);
  m.recovering = true;
  m.kind = kind;
  m.nranks = nranks;
  m.can_shrink = can_shrink;
  m.replacement = replacement;
  s->asks.insert_or_assign(rank, m);
  s->ask_order.insert_or_assign(rank, revision);
}

// The words of the refusal `d` makes, which must be one with `code`.
std::string refused(const Decision& d, cc_result_t code) {
  const auto refusal = d.refusal();
  REQUIRE(refusal);
  CHECK(refusal->first == code);
  return refusal->second;
}

std::string who_in_gen0(int rank) {
  return "rank " + std::to_string(rank) + " (host h, pid " + std::to_string(100 + rank) +
         ", generation 0)";
}

}  // namespace

TEST_CASE("recovery decision: a shrink waits for every living member and leaves out the dead") {
  Snapshot s = living(4);
  s.seats.erase(2);  // rank 2's key went with its lease
  const Decision d(s, kJob, Gen{3, 0});
  CHECK(d.state(2) == Decision::SeatState::dead);
  CHECK(d.state(3) == Decision::SeatState::alive);

  ask(&s, 1, 101, RecoverKind::shrink, 0, 10);
  ask(&s, 0, 100, RecoverKind::shrink, 0, 11);
  CHECK_FALSE(d.ready());
  CHECK(d.awaited() == std::vector<std::string>{who_in_gen0(3)});
  CHECK(d.survivors() == std::vector<int32_t>{0, 1});
  REQUIRE(d.first());
  CHECK(d.first()->info.rank == 1);  // the first to ask

  ask(&s, 3, 103, RecoverKind::shrink, 0, 12);
  REQUIRE(d.ready());
  CHECK_FALSE(d.refusal());
  bool need_id = true;
  RosterRecord roster;
  const ResultRecord r = d.decide(&need_id, &roster);
  CHECK(r.ok);
  CHECK(r.members == std::vector<int32_t>{0, 1, 3});
  CHECK(r.failed == std::vector<int32_t>{2});
  CHECK(r.world_size == 3);
  CHECK(r.method == static_cast<uint8_t>(RecoverMethod::nccl_shrink));
  CHECK_FALSE(need_id);
  REQUIRE(roster.members.size() == 3);
  CHECK(roster.members[2].rank == 2);
  CHECK(roster.members[2].pid == 103u);

  SECTION("one survivor without ncclCommShrink: a new NCCL id for all") {
    ask(&s, 3, 103, RecoverKind::shrink, 0, 12, /*can_shrink=*/false);
    const ResultRecord again = d.decide(&need_id, &roster);
    CHECK(again.method == static_cast<uint8_t>(RecoverMethod::new_id));
    CHECK(need_id);
  }
}

TEST_CASE("recovery decision: a member that left cleanly is gone, not awaited") {
  Snapshot s = living(3);
  s.seats.insert_or_assign(1, held(record_of(1, 101), 0));  // off its lease
  const Decision d(s, kJob, Gen{3, 0});
  CHECK(d.state(1) == Decision::SeatState::gone);
  ask(&s, 0, 100, RecoverKind::shrink, 0, 10);
  ask(&s, 2, 102, RecoverKind::shrink, 0, 11);
  REQUIRE(d.ready());
  bool need_id = false;
  RosterRecord roster;
  CHECK(d.decide(&need_id, &roster).failed == std::vector<int32_t>{1});
}

TEST_CASE("recovery decision: a survivor of a failed attempt is alive through its earlier key") {
  // Generation 1 failed after its decision; rank 1's process let go of it
  // (its key of 1 is off its lease) and still holds generation 0's
  // communicator (that key is on its lease).
  Snapshot s = living(2);
  s.seats.insert_or_assign(1, held(record_of(1, 101), 0));
  s.parents.insert_or_assign(1, held(record_of(1, 101), kLease));
  const Decision d(s, kJob, Gen{3, 1});
  CHECK(d.state(1) == Decision::SeatState::alive);
  ask(&s, 0, 100, RecoverKind::shrink, 0, 10);
  CHECK_FALSE(d.ready());
  CHECK(d.awaited() == std::vector<std::string>{"rank 1 (host h, pid 101, generation 1)"});
  ask(&s, 1, 101, RecoverKind::shrink, 0, 11);
  CHECK(d.survivor_ask(1));
  CHECK(d.ready());

  SECTION("another process under the earlier key is not the same survivor") {
    s.parents.insert_or_assign(1, held(record_of(1, 999), kLease));
    CHECK(d.state(1) == Decision::SeatState::gone);
  }
}

TEST_CASE("recovery decision: a request from another process on a survivor's rank is not its") {
  Snapshot s = living(2);
  const Decision d(s, kJob, Gen{3, 0});
  ask(&s, 0, 100, RecoverKind::shrink, 0, 10);
  ask(&s, 1, 555, RecoverKind::shrink, 0, 11);  // not rank 1's process, not a replacement
  CHECK_FALSE(d.survivor_ask(1));
  CHECK_FALSE(d.ready());
  CHECK(d.awaited() == std::vector<std::string>{who_in_gen0(1)});
}

TEST_CASE("recovery decision: a regrow waits for a replacement for every rank without one") {
  Snapshot s = living(4);
  s.seats.erase(1);
  const Decision d(s, kJob, Gen{3, 0});
  for (int32_t r : {0, 2, 3})
    ask(&s, r, 100 + static_cast<uint32_t>(r), RecoverKind::regrow, 4, 10 + r);
  CHECK(d.awaited().empty());
  CHECK_FALSE(d.ready());
  CHECK(d.holes(4) == std::vector<int32_t>{1});
  CHECK_THAT(d.late_words(5000),
             Contains("cc_comm_regrow(nranks=4) on job 'j', communicator 3, generation 0 did not "
                      "complete within 5000 ms") &&
                 Contains("rank 1 never came: no replacement joined for it; start a process "
                          "with RANK=1"));

  ask(&s, 1, 777, RecoverKind::regrow, 0, 20, false, /*replacement=*/true);
  CHECK(d.replacement_ask(1));
  REQUIRE(d.ready());
  CHECK_FALSE(d.refusal());
  bool need_id = false;
  RosterRecord roster;
  const ResultRecord r = d.decide(&need_id, &roster);
  CHECK(r.members == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(r.failed == std::vector<int32_t>{1});
  CHECK(r.method == static_cast<uint8_t>(RecoverMethod::new_id));
  CHECK(need_id);
  REQUIRE(roster.members.size() == 4);
  CHECK(roster.members[1].pid == 777u);

  SECTION("a replacement with another world size is refused in words") {
    ask(&s, 1, 777, RecoverKind::regrow, 0, 20, false, true, /*world_size=*/3);
    const std::string words = refused(d, CC_ERR_MISMATCH);
    CHECK_THAT(words, Contains("came as a replacement with a world size of 3") &&
                          Contains("regrow to 4; give it WORLD_SIZE=4"));
  }
}

TEST_CASE("recovery decision: a replacement for a living rank is not one") {
  Snapshot s = living(2);
  const Decision d(s, kJob, Gen{3, 0});
  ask(&s, 0, 100, RecoverKind::regrow, 2, 10);
  ask(&s, 1, 777, RecoverKind::regrow, 0, 11, false, /*replacement=*/true);
  CHECK_FALSE(d.replacement_ask(1));
  CHECK_FALSE(d.ready());
  CHECK(d.awaited() == std::vector<std::string>{who_in_gen0(1)});
  CHECK_THAT(d.late_words(100), Contains(who_in_gen0(1) + " is alive but did not call "
                                                          "cc_comm_regrow"));
}

TEST_CASE("recovery decision: ranks that disagree, or a regrow that cannot be, are refused") {
  Snapshot s = living(4);
  const Decision d(s, kJob, Gen{3, 0});

  SECTION("shrink against regrow") {
    ask(&s, 2, 102, RecoverKind::regrow, 4, 9);
    ask(&s, 0, 100, RecoverKind::shrink, 0, 10);
    const std::string words = refused(d, CC_ERR_MISMATCH);
    CHECK(words == "ranks disagree on how job 'j', communicator 3, generation 0 goes on: " +
                       who_in_gen0(2) + " called cc_comm_regrow(nranks=4), " + who_in_gen0(0) +
                       " called cc_comm_shrink; every survivor must make the same call");
  }
  SECTION("two regrow sizes") {
    ask(&s, 0, 100, RecoverKind::regrow, 4, 10);
    ask(&s, 1, 101, RecoverKind::regrow, 5, 11);
    const std::string words = refused(d, CC_ERR_MISMATCH);
    CHECK_THAT(words, Contains(who_in_gen0(0) + " called cc_comm_regrow(nranks=4), " +
                               who_in_gen0(1) + " called cc_comm_regrow(nranks=5)"));
  }
  SECTION("a regrow too small for a survivor's job rank") {
    ask(&s, 3, 103, RecoverKind::regrow, 2, 10);
    const std::string words = refused(d, CC_ERR_INVALID_ARGUMENT);
    CHECK_THAT(words, Contains("a survivor keeps its job rank 3") &&
                          Contains("regrow to at least 4 ranks, or shrink"));
  }
  SECTION("a regrow past the limit") {
    ask(&s, 0, 100, RecoverKind::regrow, rules::kMaxRegrowRanks + 1, 10);
    const std::string words = refused(d, CC_ERR_INVALID_ARGUMENT);
    CHECK_THAT(words, Contains("pass the job's size (1 to " +
                               std::to_string(rules::kMaxRegrowRanks) + " ranks)"));
  }
}

TEST_CASE("recovery decision: at a deadline with nobody deciding, the words say so") {
  Snapshot s = living(2);
  const Decision d(s, kJob, Gen{3, 0});
  ask(&s, 0, 100, RecoverKind::shrink, 0, 10);
  ask(&s, 1, 101, RecoverKind::shrink, 0, 11);
  CHECK(d.late_words(250) ==
        "cc_comm_shrink on job 'j', communicator 3, generation 0 did not complete within 250 ms: "
        "the coordinator (the first survivor to call) was still deciding");
}
