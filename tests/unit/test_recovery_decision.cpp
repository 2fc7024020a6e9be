// How a recovery on etcd is decided (rendezvous/etcd/recovery_decision.*:
// the shared recovery rules fed from what etcd holds), over snapshots and
// watch events made here, no etcd: who is alive, gone or dead; who is
// awaited; which ranks of a regrow have no process; when the decision is
// ready and what it holds (members by new rank, ranks left out or replaced,
// the method, the roster); and the words of a refusal and of a deadline, as
// cc's own server says them. The etcd suite runs the same rules against a
// real cluster (tests/etcd/test_etcd_recovery.cpp).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "rendezvous/etcd/keys.hpp"
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

// The rules fed from snapshot `s` of a recovery from `from`, as the
// coordinator loads one.
Tracker loaded(const Snapshot& s, Gen from = Gen{3, 0}) {
  Tracker t(kJob, from);
  t.load(s);
  return t;
}

// The words of the refusal that ends the attempt, which must be one with `code`.
std::string refused(const Tracker& t, cc_result_t code) {
  const auto& refusal = t.refusal();
  REQUIRE(refusal);
  CHECK(refusal->code == code);
  return refusal->words;
}

// The living members the rules still wait for, in words.
std::vector<std::string> awaited(const Tracker& t, int n) {
  std::vector<std::string> out;
  for (int32_t r = 0; r < n; ++r)
    if (t.rules().has_seat(r) && t.rules().state(r) == rules::SeatState::alive &&
        !t.rules().taking_part(r))
      out.push_back(t.rules().seat_who(r));
  return out;
}

std::string who_in_gen0(int rank) {
  return "rank " + std::to_string(rank) + " (host h, pid " + std::to_string(100 + rank) +
         ", generation 0)";
}

}  // namespace

TEST_CASE("recovery decision: a shrink waits for every living member and leaves out the dead") {
  Snapshot s = living(4);
  s.seats.erase(2);  // rank 2's key went with its lease
  CHECK(seat_state(s, 2) == rules::SeatState::dead);
  CHECK(seat_state(s, 3) == rules::SeatState::alive);

  ask(&s, 1, 101, RecoverKind::shrink, 0, 10);
  ask(&s, 0, 100, RecoverKind::shrink, 0, 11);
  {
    const Tracker t = loaded(s);
    CHECK_FALSE(t.rules().ready());
    CHECK(awaited(t, 4) == std::vector<std::string>{who_in_gen0(3)});
    CHECK(t.rules().taking_part(0));
    CHECK(t.rules().taking_part(1));
    CHECK(t.rules().callers() == 2);
  }
  ask(&s, 3, 103, RecoverKind::shrink, 0, 12);
  const Tracker t = loaded(s);
  REQUIRE(t.rules().ready());
  CHECK_FALSE(t.refusal());
  bool need_id = true;
  RosterRecord roster;
  const ResultRecord r = t.decide(&need_id, &roster);
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
    const ResultRecord again = loaded(s).decide(&need_id, &roster);
    CHECK(again.method == static_cast<uint8_t>(RecoverMethod::new_id));
    CHECK(need_id);
  }
}

TEST_CASE("recovery decision: a member that left cleanly is gone, not awaited") {
  Snapshot s = living(3);
  s.seats.insert_or_assign(1, held(record_of(1, 101), 0));  // off its lease
  CHECK(seat_state(s, 1) == rules::SeatState::gone);
  ask(&s, 0, 100, RecoverKind::shrink, 0, 10);
  ask(&s, 2, 102, RecoverKind::shrink, 0, 11);
  const Tracker t = loaded(s);
  REQUIRE(t.rules().ready());
  bool need_id = false;
  RosterRecord roster;
  CHECK(t.decide(&need_id, &roster).failed == std::vector<int32_t>{1});
}

TEST_CASE("recovery decision: a survivor of a failed attempt is alive through its earlier key") {
  // Generation 1 failed after its decision; rank 1's process let go of it
  // (its key of 1 is off its lease) and still holds generation 0's
  // communicator (that key is on its lease).
  Snapshot s = living(2);
  s.seats.insert_or_assign(1, held(record_of(1, 101), 0));
  s.parents.insert_or_assign(1, held(record_of(1, 101), kLease));
  CHECK(seat_state(s, 1) == rules::SeatState::alive);
  ask(&s, 0, 100, RecoverKind::shrink, 0, 10);
  CHECK_FALSE(loaded(s, Gen{3, 1}).rules().ready());
  CHECK(awaited(loaded(s, Gen{3, 1}), 2) ==
        std::vector<std::string>{"rank 1 (host h, pid 101, generation 1)"});
  ask(&s, 1, 101, RecoverKind::shrink, 0, 11);
  const Tracker t = loaded(s, Gen{3, 1});
  CHECK(t.rules().taking_part(1));
  CHECK(t.rules().ready());

  SECTION("another process under the earlier key is not the same survivor") {
    s.parents.insert_or_assign(1, held(record_of(1, 999), kLease));
    CHECK(seat_state(s, 1) == rules::SeatState::gone);
  }
}

TEST_CASE("recovery decision: a request from another process on a survivor's rank is not its") {
  Snapshot s = living(2);
  ask(&s, 0, 100, RecoverKind::shrink, 0, 10);
  ask(&s, 1, 555, RecoverKind::shrink, 0, 11);  // not rank 1's process, not a replacement
  const Tracker t = loaded(s);
  CHECK_FALSE(t.rules().taking_part(1));
  CHECK_FALSE(t.rules().ready());
  CHECK(awaited(t, 2) == std::vector<std::string>{who_in_gen0(1)});
  MemberInfo other = record_of(1, 555).info;
  const auto stale = t.rules().check_caller(other, RecoverKind::shrink, 0);
  REQUIRE(stale);
  CHECK_THAT(stale->words, Contains("its rank is held by " + who_in_gen0(1)));
}

TEST_CASE("recovery decision: a regrow waits for a replacement for every rank without one") {
  Snapshot s = living(4);
  s.seats.erase(1);
  for (int32_t r : {0, 2, 3})
    ask(&s, r, 100 + static_cast<uint32_t>(r), RecoverKind::regrow, 4, 10 + r);
  {
    const Tracker t = loaded(s);
    CHECK(awaited(t, 4).empty());
    CHECK_FALSE(t.rules().ready());
    CHECK_THAT(t.late_words(5000),
               Contains("cc_comm_regrow(nranks=4) on job 'j', communicator 3, generation 0 did "
                        "not complete within 5000 ms") &&
                   Contains("rank 1 never came: no replacement joined for it; start a process "
                            "with RANK=1"));
  }
  ask(&s, 1, 777, RecoverKind::regrow, 0, 20, false, /*replacement=*/true);
  Tracker t = loaded(s);
  CHECK(t.rules().waiting_replacement(1) != nullptr);
  REQUIRE(t.rules().ready());
  CHECK_FALSE(t.refusal());
  CHECK(t.take_wrong_replacements().empty());
  bool need_id = false;
  RosterRecord roster;
  const ResultRecord r = t.decide(&need_id, &roster);
  CHECK(r.members == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(r.failed == std::vector<int32_t>{1});
  CHECK(r.method == static_cast<uint8_t>(RecoverMethod::new_id));
  CHECK(need_id);
  REQUIRE(roster.members.size() == 4);
  CHECK(roster.members[1].pid == 777u);

  SECTION("a replacement with another world size is refused in words, and the regrow waits") {
    ask(&s, 1, 777, RecoverKind::regrow, 0, 20, false, true, /*world_size=*/3);
    Tracker wrong = loaded(s);
    REQUIRE(wrong.rules().ready());
    const auto refusals = wrong.take_wrong_replacements();
    REQUIRE(refusals.size() == 1);
    CHECK(refusals[0].first.pid == 777u);
    CHECK(refusals[0].second.code == CC_ERR_MISMATCH);
    CHECK_THAT(refusals[0].second.words, Contains("came as a replacement with a world size of 3") &&
                                             Contains("regrow to 4; give it WORLD_SIZE=4"));
    CHECK_FALSE(wrong.rules().ready());  // rank 1 has no process again
    CHECK_FALSE(wrong.refusal());        // the survivors' attempt goes on
  }
}

TEST_CASE("recovery decision: a replacement for a living rank is not one") {
  Snapshot s = living(2);
  ask(&s, 0, 100, RecoverKind::regrow, 2, 10);
  ask(&s, 1, 777, RecoverKind::regrow, 0, 11, false, /*replacement=*/true);
  const Tracker t = loaded(s);
  CHECK(t.rules().waiting_replacement(1) == nullptr);
  CHECK_FALSE(t.rules().ready());
  CHECK(awaited(t, 2) == std::vector<std::string>{who_in_gen0(1)});
  CHECK_THAT(t.late_words(100), Contains(who_in_gen0(1) + " is alive but did not call "
                                                          "cc_comm_regrow"));
}

TEST_CASE("recovery decision: ranks that disagree, or a regrow that cannot be, are refused") {
  Snapshot s = living(4);

  SECTION("shrink against regrow: the first to ask sets the call") {
    ask(&s, 2, 102, RecoverKind::regrow, 4, 9);
    ask(&s, 0, 100, RecoverKind::shrink, 0, 10);
    const std::string words = refused(loaded(s), CC_ERR_MISMATCH);
    CHECK(words == "ranks disagree on how job 'j', communicator 3, generation 0 goes on: " +
                       who_in_gen0(2) + " called cc_comm_regrow(nranks=4), " + who_in_gen0(0) +
                       " called cc_comm_shrink; every survivor must make the same call");
  }
  SECTION("two regrow sizes") {
    ask(&s, 0, 100, RecoverKind::regrow, 4, 10);
    ask(&s, 1, 101, RecoverKind::regrow, 5, 11);
    const std::string words = refused(loaded(s), CC_ERR_MISMATCH);
    CHECK_THAT(words, Contains(who_in_gen0(0) + " called cc_comm_regrow(nranks=4), " +
                               who_in_gen0(1) + " called cc_comm_regrow(nranks=5)"));
  }
  SECTION("a regrow too small for a survivor's job rank") {
    ask(&s, 3, 103, RecoverKind::regrow, 2, 10);
    const std::string words = refused(loaded(s), CC_ERR_INVALID_ARGUMENT);
    CHECK_THAT(words, Contains("a survivor keeps its job rank 3") &&
                          Contains("regrow to at least 4 ranks, or shrink"));
  }
  SECTION("a regrow past the limit is refused to its caller alone") {
    const auto words = loaded(s).rules().check_caller(record_of(0, 100).info, RecoverKind::regrow,
                                                      rules::kMaxRegrowRanks + 1);
    REQUIRE(words);
    CHECK(words->code == CC_ERR_INVALID_ARGUMENT);
    CHECK(words->words == who_in_gen0(0) + " called cc_comm_regrow(nranks=" +
                              std::to_string(rules::kMaxRegrowRanks + 1) +
                              ") on job 'j', communicator 3, generation 0; pass the job's size "
                              "(1 to " +
                              std::to_string(rules::kMaxRegrowRanks) + " ranks)");
  }
}

TEST_CASE("recovery decision: at a deadline with nobody deciding, the words say so") {
  Snapshot s = living(2);
  ask(&s, 0, 100, RecoverKind::shrink, 0, 10);
  ask(&s, 1, 101, RecoverKind::shrink, 0, 11);
  CHECK(loaded(s).late_words(250) ==
        "cc_comm_shrink on job 'j', communicator 3, generation 0 did not complete within 250 ms: "
        "the coordinator (the first survivor to call) was still deciding");
}

TEST_CASE("recovery decision: watched changes move the rules as a new snapshot would") {
  // The coordinator loads one snapshot, then applies each change: the
  // state it reaches must be the one a fresh load of the same keys gives.
  const Keys keys("/cc", kJob);
  const Gen from{3, 0}, next{3, 1};
  Snapshot s = living(3);
  Tracker t = loaded(s);
  auto event = [&](WatchEvent::Type type, const std::string& key, const MemberRecord* m,
                   int64_t lease, int64_t revision) {
    WatchEvent e;
    e.type = type;
    e.kv.key = key;
    if (m != nullptr) e.kv.value = encode(*m);
    e.kv.lease = lease;
    e.kv.create_revision = e.kv.mod_revision = revision;
    if (auto jr = keys.member_rank(from, key)) {
      if (type == WatchEvent::Type::del)
        s.seats.erase(*jr);
      else
        s.seats.insert_or_assign(*jr, Held(e.kv));
    } else if (auto ask_rank = keys.member_rank(next, key)) {
      if (type == WatchEvent::Type::del) {
        s.asks.erase(*ask_rank);
        s.ask_order.erase(*ask_rank);
      } else {
        s.asks.insert_or_assign(*ask_rank, *m);
        s.ask_order.insert_or_assign(*ask_rank, revision);
      }
    }
    t.on_event(keys, s, e);
  };
  MemberRecord shrink0 = record_of(0, 100);
  shrink0.recovering = true;
  MemberRecord shrink2 = record_of(2, 102);
  shrink2.recovering = true;
  event(WatchEvent::Type::put, keys.member(next, 0), &shrink0, kLease, 20);
  CHECK(t.rules().callers() == 1);
  CHECK(t.rules().awaited() == 2);
  event(WatchEvent::Type::del, keys.member(from, 1), nullptr, 0, 21);  // rank 1 dies
  CHECK(t.rules().state(1) == rules::SeatState::dead);
  CHECK(t.rules().awaited() == 1);
  event(WatchEvent::Type::put, keys.member(next, 2), &shrink2, kLease, 22);
  REQUIRE(t.rules().ready());
  const Tracker fresh = loaded(s);
  REQUIRE(fresh.rules().ready());
  bool a = false, b = false;
  RosterRecord ra, rb;
  CHECK(t.decide(&a, &ra).members == fresh.decide(&b, &rb).members);
  CHECK(t.decide(&a, &ra).failed == std::vector<int32_t>{1});

  SECTION("a caller that goes is no longer counted; the attempt ends with the last one") {
    event(WatchEvent::Type::del, keys.member(next, 2), nullptr, 0, 23);
    CHECK_FALSE(t.rules().ready());
    CHECK(t.rules().awaited() == 1);
    event(WatchEvent::Type::del, keys.member(next, 0), nullptr, 0, 24);
    CHECK_FALSE(t.rules().pending());
    MemberRecord regrow0 = record_of(0, 100);  // a new attempt may ask anything
    regrow0.recovering = true;
    regrow0.kind = RecoverKind::regrow;
    regrow0.nranks = 3;
    event(WatchEvent::Type::put, keys.member(next, 0), &regrow0, kLease, 25);
    CHECK_FALSE(t.refusal());
    CHECK(t.rules().kind() == RecoverKind::regrow);
  }
}

TEST_CASE("a recovery's result names its members in runs: O(ranks lost) bytes, read back alike") {
  ResultRecord r;
  r.ok = true;
  r.world_size = 131072 - 9;
  for (int32_t jr = 0; jr < 131072; ++jr)
    if (jr != 70000 && (jr < 8192 || jr >= 8200)) r.members.push_back(jr);
  r.failed = {8192, 8193, 8194, 8195, 8196, 8197, 8198, 8199, 70000};
  r.method = 1;
  const std::string text = encode(r);
  CHECK(text.size() < 300);  // 3 runs, not 131,063 ranks
  ResultRecord back;
  REQUIRE(decode(text, &back));
  CHECK(back.members == r.members);
  CHECK(back.failed == r.failed);
  CHECK(back.world_size == r.world_size);

  // An earlier cc's record, every rank listed, is read too.
  ResultRecord small;
  REQUIRE(decode(R"({"ok":true,"id":"","world":2,"checked":5,"members":[0,2],"failed":[1],)"
                 R"("method":1})",
                 &small));
  CHECK(small.members == std::vector<int32_t>{0, 2});
  // Runs that hold more ranks than the world are refused, not trusted.
  CHECK_FALSE(decode(R"({"ok":true,"id":"","world":2,"checked":5,"member_runs":[[0,3]],)"
                     R"("failed":[],"method":1})",
                     &small));
}
