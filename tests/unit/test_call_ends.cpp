// The ranks' calls compared to the exact op: where sparse reports leave a
// gap before a difference, the rule asks the two ranks for their points in
// between (from their flight recorders) and names the first op that differs;
// as a communicator ends, each rank's last call is compared too, so a
// skipped or an extra call is named, and cc's server answers every rank's
// CallsEnd with the verdict once all live ranks sent theirs. Ranks are
// CallLogs fed by the test; no sockets, no GPU.
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include "cc/cc.h"
#include "common/call_desc.hpp"
#include "lib/core/call_log.hpp"
#include "rendezvous/rules/call_check.hpp"
#include "tests/unit/call_descs.hpp"
#include "tests/unit/check_rank.hpp"
#include "tests/unit/server_core_harness.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using cc::CallDesc;
using cc::CallKind;
using cc::core::CallLog;
using cc::rv::rules::CallCheck;
using cc::rv::rules::CallMismatch;
using cc::rv::rules::CallsWant;

using cc::test::allreduce;
using cc::test::broadcast;

namespace {

using Rank = cc::test::CheckRank;

// Answers every want the check makes, each by the ranks it names, until a
// verdict or none is wanted.
std::optional<CallMismatch> answer_all(CallCheck& check, std::vector<Rank*> ranks) {
  while (std::optional<CallsWant> w = check.take_want()) {
    for (int32_t asked : w->ranks)
      for (Rank* r : ranks)
        if (r->rank == asked)
          if (auto m = r->answer(check, *w)) return m;
  }
  return std::nullopt;
}

// 200 calls of 8 x n floats (n = 1, 2, ...), rank 1's differing at op `at`
// as `how` says; both end. The verdict's message.
std::string ended_apart(const std::string& how, uint64_t at) {
  CallCheck check(true);
  Rank r0(0, 2), r1(1, 2);
  for (uint64_t n = 1; n <= 200; ++n) {
    r0.call(allreduce(8 * n));
    if (n != at) {
      r1.call(allreduce(8 * n));
      continue;
    }
    if (how == "count") r1.call(allreduce(4 * n));
    if (how == "type") r1.call(allreduce(8 * n, CC_BFLOAT16));
    if (how == "kind") r1.call({CallKind::allgather, 8 * n, CC_FLOAT32, -1, -1, false});
    if (how == "extra") r1.call({}), r1.call(allreduce(8 * n));
  }
  std::optional<CallMismatch> m = r0.end(check);
  if (!m) m = r1.end(check);
  if (!m) m = check.finish();
  if (!m) m = answer_all(check, {&r0, &r1});
  REQUIRE(m);
  CHECK(check.diverged());
  return m->words;
}

// The start of the message for a difference at op #n: rank 1 called
// `theirs` where rank 0 called `ours`.
std::string apart_at(int n, const std::string& theirs, const std::string& ours) {
  const std::string op = "op #" + std::to_string(n);
  return "rank 1 (host h1, pid 11) called " + op + " " + theirs +
         ", but rank 0 (host h0, pid 10) called " + op + " " + ours +
         "; the ranks diverged after op #" + std::to_string(n - 1);
}

}  // namespace

TEST_CASE("a difference first seen past where the ranks parted is named at its op") {
  CallCheck check(true);
  Rank r0(0, 2), r1(1, 2);
  r0.call(allreduce(8), 200);
  CHECK_FALSE(r0.beat(check));
  r1.call(allreduce(8), 149);
  r1.call(allreduce(9));  // op #150: NCCL would complete it, with garbage
  r1.call(allreduce(8), 50);
  CHECK_FALSE(r1.beat(check));  // the first difference seen is op #185's
  const std::optional<CallsWant> w = check.take_want();
  REQUIRE(w);
  CHECK(w->after == 127);  // op #128 agreed, and is asked again
  CHECK(w->through == 184);
  CHECK(w->ranks == std::vector<int32_t>{0, 1});
  CHECK_FALSE(check.take_want());  // once
  CHECK_FALSE(r0.answer(check, *w));
  const auto m = r1.answer(check, *w);
  REQUIRE(m);
  CHECK(m->seq == 150);
  CHECK_THAT(m->words, StartsWith("rank 1 (host h1, pid 11) called op #150 cc_allreduce 9 x "
                                  "FLOAT32 SUM, but rank 0 (host h0, pid 10) called op #150 "
                                  "cc_allreduce 8 x FLOAT32 SUM; the ranks diverged after op "
                                  "#149. Every rank must"));
}

TEST_CASE("a rank whose flight recorder lacks the points leaves words that give a range") {
  CallCheck check(true);
  Rank r0(0, 2), r1(1, 2);
  CallLog empty(2, 0);  // CC_TRACE_BUFFER=0 on rank 1
  r0.call(allreduce(8), 200);
  CHECK_FALSE(r0.beat(check));
  for (int i = 0; i < 200; ++i) empty.record(allreduce(i == 149 ? 9 : 8), i + 1, 0, 0);
  CHECK_FALSE(check.report(r1.report(empty.take_report())));
  std::optional<CallsWant> w = check.take_want();
  REQUIRE(w);
  CHECK_FALSE(r0.answer(check, *w));
  const auto m = check.report(r1.report(empty.points_in(w->after, w->through, 256), w->id));
  REQUIRE(m);
  CHECK_THAT(m->words, Contains("the ranks' calls agree up to op #128 and differ after it"));
}

TEST_CASE("as ranks end, a difference in their last ten calls names its op and both calls") {
  CHECK_THAT(ended_apart("count", 195), StartsWith(apart_at(195, "cc_allreduce 780 x FLOAT32 SUM",
                                                            "cc_allreduce 1560 x FLOAT32 SUM")));
  CHECK_THAT(ended_apart("type", 199), StartsWith(apart_at(199, "cc_allreduce 1592 x BFLOAT16 SUM",
                                                           "cc_allreduce 1592 x FLOAT32 SUM")));
}

TEST_CASE("as ranks end, a difference in the middle is found in their flight recorders") {
  CHECK_THAT(ended_apart("count", 50), StartsWith(apart_at(50, "cc_allreduce 200 x FLOAT32 SUM",
                                                           "cc_allreduce 400 x FLOAT32 SUM")));
  CHECK_THAT(ended_apart("kind", 50), StartsWith(apart_at(50, "cc_allgather 400 x FLOAT32",
                                                          "cc_allreduce 400 x FLOAT32 SUM")));
  CHECK_THAT(ended_apart("extra", 50),
             StartsWith(apart_at(50, "cc_barrier", "cc_allreduce 400 x FLOAT32 SUM")));
  CHECK_THAT(ended_apart("skip", 50), StartsWith(apart_at(50, "cc_allreduce 408 x FLOAT32 SUM",
                                                          "cc_allreduce 400 x FLOAT32 SUM")));
}

TEST_CASE("ranks that make the same calls but end at another op: a skip or an extra call") {
  CallCheck check(true);
  Rank r0(0, 3), r1(1, 3), r2(2, 3);
  r0.call(allreduce(8), 200);
  r1.call(allreduce(8), 199);  // skipped one of twenty identical neighbours
  r2.call(allreduce(8), 200);
  CHECK_FALSE(r0.end(check));
  CHECK_FALSE(r2.end(check));
  const auto m = r1.end(check);  // ended where rank 0 went on: no need to wait for finish()
  REQUIRE(m);
  CHECK(m->seq == 200);
  CHECK_THAT(m->words,
             StartsWith("rank 0 (host h0, pid 10) called op #200 cc_allreduce 8 x FLOAT32 SUM, but "
                        "rank 1 (host h1, pid 11) made no op #200: it ended (cc_comm_destroy) "
                        "after op #199; the ranks diverged after op #199"));
}

TEST_CASE("a rank that ended before another reported past its end is named while it runs") {
  CallCheck check(true);
  Rank r0(0, 2), r1(1, 2);
  r0.call(allreduce(8), 20);
  r0.call(broadcast(8, 0));  // an extra call rank 1 never makes
  CHECK_FALSE(r0.beat(check));
  r1.call(allreduce(8), 20);
  const auto m = r1.end(check);
  REQUIRE(m);
  CHECK_THAT(m->words, StartsWith("rank 0 (host h0, pid 10) called op #21 cc_broadcast 8 x "
                                  "FLOAT32 root 0, but rank 1 (host h1, pid 11) made no op #21"));
}

TEST_CASE("ranks that end alike agree; a rank gone is not waited for nor named") {
  CallCheck check(true);
  Rank r0(0, 3), r1(1, 3), r2(2, 3);
  for (Rank* r : {&r0, &r1}) r->call(allreduce(8), 300);
  r2.call(allreduce(8), 120);
  CHECK_FALSE(r2.beat(check));
  CHECK_FALSE(r0.end(check));
  CHECK_FALSE(r1.end(check));
  CHECK_FALSE(check.gone(2));  // died at op #120: a death, not a difference
  CHECK_FALSE(check.finish());
  CHECK_FALSE(check.pending_want());
  CHECK_FALSE(check.diverged());
}

TEST_CASE("without a driver that asks, a late difference is told as a range at once") {
  CallCheck check;
  Rank r0(0, 2), r1(1, 2);
  r0.call(allreduce(8), 200);
  CHECK_FALSE(r0.beat(check));
  r1.call(allreduce(8), 149);
  r1.call(allreduce(9));
  r1.call(allreduce(8), 50);
  const auto m = r1.beat(check);
  REQUIRE(m);
  CHECK(m->seq == 185);
  CHECK_FALSE(check.take_want());
}

TEST_CASE("CallsEnd and CallsWanted cross the wire; a heartbeat answering one too") {
  cc::rv::CallsEnd e{3, 1, 200, {}, 7, 5000};
  CallLog log(2, 0);
  log.record(allreduce(8), 1, 0, 0);
  e.calls = log.take_report();
  cc::test::check_round_trip(e);
  cc::test::check_round_trip(cc::rv::CallsWanted{3, 1, 2, -1, 9, 40, 80});
  cc::rv::Heartbeat h{41, 2, 1, {}};
  h.answers = 9;
  cc::test::check_round_trip(h);
}

namespace {

// Ranks 0..n-1 of communicator 0 on connections 1..n, joined.
void join_all(cc::test::Harness& h, int n) {
  for (int r = 0; r < n; ++r) h.client(static_cast<cc::rv::ConnId>(r + 1));
  for (int r = 0; r < n; ++r)
    h.feed(static_cast<cc::rv::ConnId>(r + 1), cc::test::join_msg(r, n, "h" + std::to_string(r)));
  for (int r = 0; r < n; ++r) h.take(static_cast<cc::rv::ConnId>(r + 1));
}

cc::rv::CallsEnd calls_end(Rank& r) {
  return {0, 0, r.log.collectives(), r.log.take_report(), 0, 5000};
}

}  // namespace

TEST_CASE("cc's server answers every rank's CallsEnd once all have ended: agreement") {
  cc::test::Harness h;
  join_all(h, 2);
  Rank r0(0, 2), r1(1, 2);
  for (Rank* r : {&r0, &r1}) r->call(allreduce(8), 100);
  h.feed(1, calls_end(r0), 5);
  CHECK(h.take(1).empty());  // waits for rank 1
  h.feed(2, calls_end(r1), 6);
  for (cc::rv::ConnId c : {1, 2}) {
    const auto sent = h.take(c);
    REQUIRE(sent.size() == 1);
    CHECK(sent[0].request_id == (c == 1 ? 5u : 6u));
    CHECK(std::holds_alternative<cc::rv::Ok>(sent[0].message));
  }
}

TEST_CASE("cc's server asks an ended rank for points and tells every rank the op") {
  cc::test::Harness h;
  join_all(h, 3);
  Rank r0(0, 3), r1(1, 3), r2(2, 3);
  for (uint64_t n = 1; n <= 200; ++n)
    for (Rank* r : {&r0, &r1, &r2}) r->call(allreduce(r == &r1 && n == 50 ? 16 : 8));
  h.feed(1, calls_end(r0), 5);
  h.feed(2, calls_end(r1), 5);
  // Ranks 0 and 1 differ at op #64, their first common point: both are asked
  // for the calls before it, in the answer to their CallsEnd.
  for (auto [c, r] : {std::pair<cc::rv::ConnId, Rank*>{1, &r0}, {2, &r1}}) {
    const auto w = h.one_as<cc::rv::CallsWanted>(c);
    CHECK(w.after == 0);
    CHECK(w.through == 63);
    h.feed(c, cc::rv::CallsEnd{0, 0, r->log.collectives(), r->log.points_in(w.after, w.through, 256),
                               w.id, 5000},
           7);
  }
  for (cc::rv::ConnId c : {1, 2}) {
    const std::string words = h.refusal(c, CC_ERR_MISMATCH);
    CHECK_THAT(words, StartsWith("rank 1 (host h1, pid 1001) called op #50 cc_allreduce 16 x "
                                 "FLOAT32 SUM, but rank 0 (host h0, pid 1000) called op #50 "
                                 "cc_allreduce 8 x FLOAT32 SUM; the ranks diverged after op #49"));
  }
  // Rank 2, still running, is told as it would be by a heartbeat's difference.
  const auto ev = h.one_as<cc::rv::PeerEvent>(3);
  CHECK(ev.kind == cc::rv::PeerEventKind::mismatch);
  // And its own CallsEnd gets the same message.
  h.feed(3, calls_end(r2), 8);
  CHECK_THAT(h.refusal(3, CC_ERR_MISMATCH), StartsWith("rank 1 (host h1, pid 1001) called op #50"));
}

TEST_CASE("cc's server: a rank that dies before it ends is a death, not a mismatch") {
  cc::test::Harness h;
  join_all(h, 3);
  Rank r0(0, 3), r1(1, 3);
  for (Rank* r : {&r0, &r1}) r->call(allreduce(8), 60);
  h.feed(1, calls_end(r0), 5);
  h.feed(2, calls_end(r1), 5);
  CHECK(h.take(1).empty());
  h.core.on_disconnect(3, cc::rv::ServerCore::kClientClosed, h.now);
  for (cc::rv::ConnId c : {1, 2}) {
    const auto sent = h.take(c);
    INFO("connection " << c);
    REQUIRE(sent.size() == 2);  // rank 2's failure, then the verdict
    CHECK(std::get<cc::rv::PeerEvent>(sent[0].message).kind == cc::rv::PeerEventKind::failed);
    CHECK(std::holds_alternative<cc::rv::Ok>(sent[1].message));
  }
}

namespace {

// Split 1 (color 0) of communicator 0, in which rank r of the parent is
// rank n - 1 - r: its CallsEnd on the parent's connection.
cc::rv::CallsEnd split_end(Rank& child, int32_t nranks) {
  cc::rv::CallsEnd e = calls_end(child);
  e.split = 1;
  e.split_rank = child.rank;
  e.split_ranks = nranks;
  return e;
}

}  // namespace

TEST_CASE("a split child's CallsEnd crosses the wire; one of an older client has no split") {
  Rank child(1, 2);
  child.call(allreduce(8));
  cc::rv::CallsEnd e = split_end(child, 2);
  cc::test::check_round_trip(e);
  // The same frame without the split fields (16 bytes) and the last replay
  // (8), as a client without them sends it.
  std::vector<uint8_t> frame = cc::rv::encode_frame(1, e);
  frame.resize(frame.size() - 24);
  const uint32_t length = static_cast<uint32_t>(frame.size() - cc::rv::kHeaderSize);
  for (int i = 0; i < 4; ++i) frame[12 + i] = static_cast<uint8_t>(length >> (8 * i));
  cc::rv::FrameReader r;
  r.feed(frame);
  const auto f = r.next();
  REQUIRE(f);
  const auto& back = std::get<cc::rv::CallsEnd>(f->message);
  CHECK(back.split == 0);
  CHECK(back.last == 1);
  CHECK(back.calls.size() == 1);
}

TEST_CASE("cc's server compares a split child's ends among its ranks alone") {
  cc::test::Harness h;
  join_all(h, 3);
  // The child holds parent ranks 0 and 1 as its ranks 1 and 0; parent rank 2
  // is not in it. The parent's own calls are not compared here.
  Rank c0(0, 2), c1(1, 2);
  SECTION("ranks that agree are told so once both ended") {
    for (Rank* r : {&c0, &c1}) r->call(allreduce(8), 100);
    h.feed(1, split_end(c1, 2), 5);
    CHECK(h.take(1).empty());  // waits for the child's rank 0
    h.feed(2, split_end(c0, 2), 6);
    for (cc::rv::ConnId c : {1, 2}) CHECK(std::holds_alternative<cc::rv::Ok>(h.one(c)));
    CHECK(h.take(3).empty());
  }
  SECTION("ranks that differ are told the op in the child's numbers") {
    for (uint64_t n = 1; n <= 200; ++n)
      for (Rank* r : {&c0, &c1}) r->call(allreduce(r == &c1 && n == 50 ? 16 : 8));
    h.feed(1, split_end(c1, 2), 5);
    h.feed(2, split_end(c0, 2), 5);
    for (auto [conn, r] : {std::pair<cc::rv::ConnId, Rank*>{1, &c1}, {2, &c0}}) {
      const auto w = h.one_as<cc::rv::CallsWanted>(conn);
      CHECK(w.split == 1);
      cc::rv::CallsEnd again = split_end(*r, 2);
      again.calls = r->log.points_in(w.after, w.through, 256);
      again.answers = w.id;
      h.feed(conn, again, 7);
    }
    for (cc::rv::ConnId c : {1, 2})
      CHECK_THAT(h.refusal(c, CC_ERR_MISMATCH),
                 StartsWith("rank 1 (host h0, pid 1000) called op #50 cc_allreduce 16 x FLOAT32 "
                            "SUM, but rank 0 (host h1, pid 1001) called op #50 cc_allreduce 8 x "
                            "FLOAT32 SUM; the ranks diverged after op #49"));
    CHECK(h.take(3).empty());  // not a member of the child
  }
  SECTION("a child rank gone with its parent membership is not waited for") {
    for (Rank* r : {&c0, &c1}) r->call(allreduce(8), 40);
    // The child's rank 0 (parent rank 1) reported its line once, then dies.
    cc::rv::Heartbeat hb{0, 0, 0, c0.log.take_report()};
    hb.split = 1;
    hb.split_rank = 0;
    h.feed(2, hb);
    h.take(2);
    h.feed(1, split_end(c1, 2), 5);
    CHECK(h.take(1).empty());
    h.core.on_disconnect(2, cc::rv::ServerCore::kClientClosed, h.now);
    const auto sent = h.take(1);
    REQUIRE(sent.size() == 2);  // parent rank 1's failure, then the child's verdict
    CHECK(std::get<cc::rv::PeerEvent>(sent[0].message).kind == cc::rv::PeerEventKind::failed);
    CHECK(std::holds_alternative<cc::rv::Ok>(sent[1].message));
  }
}
