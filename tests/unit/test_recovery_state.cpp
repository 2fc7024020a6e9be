// The recovery rules core (rendezvous/rules/recovery_state.*), as both
// backends feed it, with no server and no etcd: the counts it keeps per
// event (awaited, callers, a regrow's ranks without a process) against what
// a user sees (when the decision comes, who is named at a deadline), the
// refusals with their messages, the next generation it decides, and a recovery
// of 65,536 seats driven through every event once.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "rendezvous/rules/recovery_state.hpp"
#include "rendezvous/rules/words.hpp"

using namespace cc::rv;
using Catch::Matchers::Contains;
using rules::Recovery;
using rules::SeatState;

namespace {

MemberInfo process(int32_t job_rank, uint32_t pid, int32_t world = 4, int32_t nccl = 22809) {
  MemberInfo m;
  m.rank = job_rank;
  m.world_size = world;
  m.host = "h" + std::to_string(job_rank);
  m.pid = pid;
  m.nccl_version = nccl;
  m.comm_number = 1;
  return m;
}

// Generation 0 of communicator 1 of job 'j': job ranks 0..n-1, pid 100 + rank.
Recovery generation_of(int n) {
  std::vector<MemberInfo> seats;
  for (int32_t r = 0; r < n; ++r) seats.push_back(process(r, 100 + static_cast<uint32_t>(r), n));
  Recovery rec;
  rec.start("j", 1, 0, seats);
  return rec;
}

MemberInfo seat_process(int32_t r) { return process(r, 100 + static_cast<uint32_t>(r)); }

std::string late(const MemberInfo& m) {
  return rules::late_join_words(m, rules::communicator_where("j", 1));
}

}  // namespace

TEST_CASE("recovery core: a shrink is ready once every living seat called, not before") {
  Recovery rec = generation_of(4);
  CHECK(rec.awaited() == 4);
  CHECK_FALSE(rec.pending());
  CHECK_FALSE(rec.set_state(2, SeatState::dead, "its connection closed"));
  CHECK(rec.awaited() == 3);
  CHECK_FALSE(rec.call(seat_process(0), RecoverKind::shrink, 0, true));
  CHECK_FALSE(rec.call(seat_process(3), RecoverKind::shrink, 0, true));
  CHECK(rec.pending());
  CHECK_FALSE(rec.ready());
  CHECK(rec.late_words(900, "S", "", "idle") ==
        "cc_comm_shrink on job 'j', communicator 1, generation 0 did not complete within 900 ms: "
        "rank 1 (host h1, pid 101, generation 0) is alive but did not call cc_comm_shrink");
  CHECK_FALSE(rec.call(seat_process(1), RecoverKind::shrink, 0, true));
  REQUIRE(rec.ready());
  const rules::NextGeneration next = rec.decide();
  CHECK(next.method == RecoverMethod::nccl_shrink);
  REQUIRE(next.members.size() == 3);
  CHECK(next.members[0].rank == 0);
  CHECK(next.members[1].rank == 1);
  CHECK(next.members[2].rank == 3);
  CHECK(next.failed == std::vector<int32_t>{2});

  SECTION("one caller without ncclCommShrink: a new id for all") {
    rec.withdraw(3);
    CHECK_FALSE(rec.ready());
    CHECK_FALSE(rec.call(seat_process(3), RecoverKind::shrink, 0, false));
    CHECK(rec.decide().method == RecoverMethod::new_id);
  }
  SECTION("the decided generation becomes the current one, ranks renumbered") {
    rec.advance(next);
    CHECK(rec.generation() == 1u);
    CHECK_FALSE(rec.pending());
    CHECK(rec.awaited() == 3);
    CHECK(rec.seat_who(3) == "rank 2 (host h3, pid 103, generation 1)");
    CHECK_FALSE(rec.has_seat(2));
    const auto stale = rec.check_caller(seat_process(2), RecoverKind::shrink, 0);
    REQUIRE(stale);
    CHECK(stale->words ==
          "rank 2 (host h2, pid 102) cannot take part in the next generation of job 'j', "
          "communicator 1, generation 1: it is not one of its members. A process the job has "
          "given up on cannot come back: stop it; a new process started with RANK=2 joins as a "
          "replacement when the survivors call cc_comm_regrow");
  }
}

TEST_CASE("recovery core: a seat that left cleanly is not waited for, but may call") {
  Recovery rec = generation_of(3);
  rec.set_state(1, SeatState::gone);
  CHECK(rec.awaited() == 2);
  CHECK_FALSE(rec.call(seat_process(0), RecoverKind::shrink, 0, true));
  CHECK_FALSE(rec.call(seat_process(2), RecoverKind::shrink, 0, true));
  CHECK(rec.ready());
  CHECK_FALSE(rec.call(seat_process(1), RecoverKind::shrink, 0, true));
  CHECK(rec.decide().members.size() == 3);
}

TEST_CASE("recovery core: a seat that dies while it calls stops taking part, named as failed") {
  Recovery rec = generation_of(3);
  CHECK_FALSE(rec.call(seat_process(0), RecoverKind::shrink, 0, true));
  CHECK_FALSE(rec.call(seat_process(1), RecoverKind::shrink, 0, true));
  CHECK(rec.set_state(1, SeatState::dead, "it missed its heartbeats"));
  CHECK_FALSE(rec.taking_part(1));
  CHECK(rec.stale_words(seat_process(1)) ==
        "rank 1 (host h1, pid 101) cannot take part in the next generation of job 'j', "
        "communicator 1, generation 0: it was declared failed (it missed its heartbeats). A "
        "process the job has given up on cannot come back: stop it; a new process started with "
        "RANK=1 joins as a replacement when the survivors call cc_comm_regrow");
  CHECK_FALSE(rec.set_state(1, SeatState::alive));  // dead stays dead for the rules' message
  CHECK_FALSE(rec.call(seat_process(2), RecoverKind::shrink, 0, true));
  REQUIRE(rec.ready());
  CHECK(rec.decide().failed == std::vector<int32_t>{1});
}

TEST_CASE("recovery core: refusals, to the caller alone or to every caller") {
  Recovery rec = generation_of(4);
  SECTION("another process on a seat's rank") {
    const auto r = rec.call(process(1, 999), RecoverKind::shrink, 0, true);
    REQUIRE(r);
    CHECK_FALSE(r->ends_attempt);
    CHECK_THAT(r->refusal.words,
               Contains("its rank is held by rank 1 (host h1, pid 101, generation 0)"));
  }
  SECTION("a second call of one seat") {
    CHECK_FALSE(rec.call(seat_process(0), RecoverKind::shrink, 0, true));
    const auto r = rec.call(seat_process(0), RecoverKind::shrink, 0, true);
    REQUIRE(r);
    CHECK(r->refusal.code == CC_ERR_INVALID_USAGE);
    CHECK_FALSE(r->ends_attempt);
    CHECK(rec.callers() == 1);
  }
  SECTION("ranks that disagree end the attempt; the next attempt starts afresh") {
    CHECK_FALSE(rec.call(seat_process(0), RecoverKind::regrow, 4, true));
    const auto r = rec.call(seat_process(1), RecoverKind::shrink, 0, true);
    REQUIRE(r);
    CHECK(r->ends_attempt);
    CHECK(r->refusal.words ==
          "ranks disagree on how job 'j', communicator 1, generation 0 goes on: rank 0 (host h0, "
          "pid 100, generation 0) called cc_comm_regrow(nranks=4), rank 1 (host h1, pid 101, "
          "generation 0) called cc_comm_shrink; every survivor must make the same call");
    rec.end_attempt();
    CHECK_FALSE(rec.pending());
    CHECK(rec.awaited() == 4);
    CHECK_FALSE(rec.call(seat_process(1), RecoverKind::shrink, 0, true));
    CHECK(rec.kind() == RecoverKind::shrink);
  }
  SECTION("a regrow too small for a survivor ends the attempt") {
    const auto r = rec.call(seat_process(3), RecoverKind::regrow, 2, true);
    REQUIRE(r);
    CHECK(r->ends_attempt);
    CHECK(r->refusal.code == CC_ERR_INVALID_ARGUMENT);
    CHECK_THAT(r->refusal.words, Contains("regrow to at least 4 ranks, or shrink"));
  }
  SECTION("a size no job has is refused to its caller; the others go on") {
    const auto r = rec.call(seat_process(0), RecoverKind::regrow, 0, true);
    REQUIRE(r);
    CHECK_FALSE(r->ends_attempt);
    CHECK(r->refusal.words ==
          "rank 0 (host h0, pid 100, generation 0) called cc_comm_regrow(nranks=0) on job 'j', "
          "communicator 1, generation 0; pass the job's size (1 to 65536 ranks)");
    CHECK_FALSE(rec.pending());
  }
}

TEST_CASE("recovery core: a regrow counts its ranks without a process, and takes replacements") {
  Recovery rec = generation_of(4);
  rec.set_state(1, SeatState::dead, "killed");
  rec.set_state(3, SeatState::dead, "killed");
  const MemberInfo early = process(3, 703);
  CHECK_FALSE(rec.replacement(early, late(early)));  // before the regrow: it waits
  CHECK_FALSE(rec.call(seat_process(0), RecoverKind::regrow, 5, true));
  CHECK_FALSE(rec.call(seat_process(2), RecoverKind::regrow, 5, true));
  CHECK_FALSE(rec.ready());
  CHECK_THAT(rec.late_words(10, "MASTER_ADDR and job id", "", "idle"),
             Contains("ranks 1, 4 never came: no replacement joined for them; start a process "
                      "with RANK=1 (and the others) and the job's MASTER_ADDR and job id"));
  const MemberInfo one = process(1, 701, 5), four = process(4, 704, 5);
  CHECK_FALSE(rec.replacement(one, late(one)));
  CHECK_FALSE(rec.replacement(four, late(four), {9, 9}));
  REQUIRE(rec.ready());
  // The early one came with WORLD_SIZE=4 for a regrow to 5: refused alone.
  const auto wrong = rec.take_wrong_replacements();
  REQUIRE(wrong.size() == 1);
  CHECK(wrong[0].first.pid == 703u);
  CHECK_THAT(wrong[0].second.words, Contains("give it WORLD_SIZE=5"));
  CHECK_FALSE(rec.ready());
  CHECK(rec.pending());
  const MemberInfo three = process(3, 713, 5);
  CHECK_FALSE(rec.replacement(three, late(three)));
  REQUIRE(rec.ready());
  CHECK(rec.take_wrong_replacements().empty());
  const rules::NextGeneration next = rec.decide();
  CHECK(next.method == RecoverMethod::new_id);
  REQUIRE(next.members.size() == 5);
  CHECK(next.members[1].pid == 701u);
  CHECK(next.members[3].pid == 713u);
  CHECK(next.replacement == std::vector<bool>{false, true, false, true, true});
  CHECK(next.failed == std::vector<int32_t>{1, 3});
  CHECK(next.replacement_id.empty());  // rank 0 survived

  SECTION("a replacement that goes makes its rank a hole again") {
    rec.replacement_gone(4);
    CHECK_FALSE(rec.ready());
    CHECK(rec.waiting_replacement(4) == nullptr);
  }
}

TEST_CASE("recovery core: a replacement is refused for a living rank, a waiting one, other NCCL") {
  Recovery rec = generation_of(3);
  const MemberInfo twin = process(1, 555, 3);
  const auto alive = rec.replacement(twin, late(twin));
  REQUIRE(alive);
  CHECK_THAT(alive->words,
             Contains("and rank 1 is alive in job 'j', communicator 1, generation 0: rank 1 "
                      "(host h1, pid 101, generation 0)"));
  rec.set_state(1, SeatState::dead, "killed");
  CHECK_FALSE(rec.replacement(twin, late(twin)));
  const MemberInfo second = process(1, 556, 3);
  const auto waiting = rec.replacement(second, late(second));
  REQUIRE(waiting);
  CHECK_THAT(waiting->words, Contains("but one is already waiting: rank 1 (host h1, pid 555)"));
  rec.set_state(2, SeatState::dead, "killed");
  const MemberInfo old_nccl = process(2, 557, 3, 21805);
  const auto nccl = rec.replacement(old_nccl, late(old_nccl));
  REQUIRE(nccl);
  CHECK_THAT(nccl->words, Contains("has NCCL 2.18.5, but its ranks have NCCL 2.28"));
}

TEST_CASE("recovery core: a replacement for rank 0 brings the next generation's id") {
  Recovery rec = generation_of(2);
  rec.set_state(0, SeatState::dead, "killed");
  CHECK_FALSE(rec.call(seat_process(1), RecoverKind::regrow, 2, true));
  const MemberInfo zero = process(0, 900, 2);
  CHECK_FALSE(rec.replacement(zero, late(zero), {1, 2, 3}));
  REQUIRE(rec.ready());
  CHECK(rec.decide().replacement_id == std::vector<uint8_t>{1, 2, 3});
}

TEST_CASE("recovery core: 65,536 seats, every event once, the decision right") {
  constexpr int kSeats = 1 << 16;
  Recovery rec = generation_of(kSeats);
  for (int32_t r = 0; r < kSeats; r += 1024) rec.set_state(r, SeatState::dead, "killed");
  for (int32_t r = 0; r < kSeats; ++r) {
    if (r % 1024 == 0) continue;
    REQUIRE_FALSE(rec.call(seat_process(r), RecoverKind::regrow, kSeats, true));
    REQUIRE(rec.ready() == false);  // the dead ranks are holes until replaced
  }
  CHECK(rec.awaited() == 0);
  for (int32_t r = 0; r < kSeats; r += 1024) {
    const MemberInfo m = process(r, 70000 + static_cast<uint32_t>(r), kSeats);
    REQUIRE_FALSE(rec.replacement(m, late(m)));
  }
  REQUIRE(rec.ready());
  const rules::NextGeneration next = rec.decide();
  CHECK(next.members.size() == static_cast<size_t>(kSeats));
  CHECK(next.failed.size() == static_cast<size_t>(kSeats / 1024));
  CHECK(next.members[1024].pid == 71024u);
}
