// The replays of CUDA graphs compared across ranks: the call log's replay
// line (one point per replay, its running fingerprint folding in each
// replayed graph's fingerprint of its calls) and the rule that compares
// ranks' replay lines as it compares their collectives, and where they
// ended. Ranks are CallLogs fed by the test, replays recorded as the
// graph's host node records them (lib/watch/graph_replays.cpp); no GPU.
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include "cc/cc.h"
#include "common/call_desc.hpp"
#include "lib/core/call_log.hpp"
#include "rendezvous/protocol.hpp"
#include "rendezvous/rules/call_check.hpp"
#include "tests/unit/call_descs.hpp"

using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using cc::CallDesc;
using cc::CallKind;
using cc::CallPoint;
using cc::core::CallLog;
using cc::rv::rules::CallCheck;
using cc::rv::rules::CallMismatch;
using cc::test::allreduce;

namespace {

// A graph's calls, and what its host node records at each replay.
struct Graph {
  std::vector<CallDesc> calls;
  uint64_t fingerprint() const {
    uint64_t f = 0;
    for (const CallDesc& c : calls) f = cc::fingerprint_step(f, c);
    return f;
  }
  void replay(CallLog& log) const {
    log.record_replay(fingerprint(), calls.front(), static_cast<int32_t>(calls.size()));
  }
};

const Graph one_allreduce{{allreduce(8)}};
const Graph two_allreduces{{allreduce(16), allreduce(8)}};
const Graph same_first_other_second{{allreduce(16), allreduce(4)}};

struct Rank {
  explicit Rank(int r) : rank(r), log(2, 2000) {}
  cc::rv::rules::CallReport report() {
    return {rank, "h" + std::to_string(rank), static_cast<uint32_t>(10 + rank), log.take_report(),
            0};
  }
  std::optional<CallMismatch> beat(CallCheck& check) { return check.report(report()); }
  std::optional<CallMismatch> end(CallCheck& check) {
    const uint64_t last = log.collectives(), replays = log.replays();
    return check.end(report(), last, replays);
  }
  int rank;
  CallLog log;
};

const char* const kAdvice =
    ". Every rank must replay the same CUDA graphs, as many times and in the same order (each "
    "graph's calls were compared as it was captured); a replay counts when the GPU reaches it, "
    "so synchronize the stream a graph was launched on before cc_comm_destroy";

}  // namespace

TEST_CASE("the call log numbers graph replays on a line of their own") {
  CallLog a(2, 16), b(2, 16);
  a.record(allreduce(8), 1, 0, 0);
  for (int i = 0; i < 3; ++i) one_allreduce.replay(a);
  two_allreduces.replay(a);
  CHECK(a.replays() == 4);
  CHECK(a.collectives() == 1);  // replays are no calls
  for (int i = 0; i < 3; ++i) one_allreduce.replay(b);
  same_first_other_second.replay(b);
  const std::vector<CallPoint> pa = a.take_report(), pb = b.take_report();
  REQUIRE(pa.size() == 5);  // the collective, then the four replays
  REQUIRE(pb.size() == 4);
  CHECK(pa[0].line == CallPoint::Line::collective);
  const CallPoint& last = pa[4];
  CHECK(last.line == CallPoint::Line::replay);
  CHECK(last.seq == 4);
  CHECK(last.peer == 2);
  CHECK(cc::graph_words(last) == "a graph of 2 calls (the first cc_allreduce 16 x FLOAT32 SUM)");
  CHECK(cc::graph_words(pa[1]) == "a graph of 1 call (the first cc_allreduce 8 x FLOAT32 SUM)");
  CHECK(pa[3].fingerprint == pb[2].fingerprint);  // the same three replays
  CHECK(pa[4].fingerprint != pb[3].fingerprint);  // another graph, though its first call is the same
  CHECK(a.take_report().empty());                 // each point is sent once
}

TEST_CASE("a heartbeat's replay points and a CallsEnd's last replay cross the wire") {
  CallLog log(2, 0);
  two_allreduces.replay(log);
  cc::rv::Heartbeat h{0, 1, 0, log.take_report()};
  cc::rv::FrameReader r;
  r.feed(cc::rv::encode_frame(1, h));
  const auto f = r.next();
  REQUIRE(f);
  const auto& back = std::get<cc::rv::Heartbeat>(f->message);
  REQUIRE(back.calls.size() == 1);
  CHECK(back.calls[0].line == CallPoint::Line::replay);
  CHECK(back.calls[0].peer == 2);
  cc::rv::CallsEnd e{1, 0, 7, {}, 0, 100};
  e.last_replay = 41;
  cc::rv::FrameReader r2;
  r2.feed(cc::rv::encode_frame(2, e));
  const auto f2 = r2.next();
  REQUIRE(f2);
  CHECK(std::get<cc::rv::CallsEnd>(f2->message).last_replay == 41);
}

TEST_CASE("ranks that replay the same graphs as often are told nothing") {
  CallCheck check(true);
  Rank r0(0), r1(1);
  for (Rank* r : {&r0, &r1}) {
    r->log.record(allreduce(8), 1, 0, 0);
    for (int i = 0; i < 100; ++i) (i % 3 == 0 ? two_allreduces : one_allreduce).replay(r->log);
  }
  CHECK_FALSE(r0.beat(check));
  CHECK_FALSE(r1.beat(check));
  CHECK_FALSE(r0.end(check));
  CHECK_FALSE(r1.end(check));
  CHECK_FALSE(check.finish());
  CHECK_FALSE(check.diverged());
}

TEST_CASE("a rank that replays another graph is named at that replay, both graphs in words") {
  CallCheck check(true);
  Rank r0(0), r1(1);
  for (int i = 0; i < 2; ++i)
    for (Rank* r : {&r0, &r1}) one_allreduce.replay(r->log);
  one_allreduce.replay(r0.log);
  two_allreduces.replay(r1.log);  // replay #3
  CHECK_FALSE(r0.beat(check));
  const auto m = r1.beat(check);
  REQUIRE(m);
  CHECK(m->seq == 3);
  CHECK(m->words ==
        std::string("graph replay #3: rank 1 (host h1, pid 11) replayed a graph of 2 calls (the "
                    "first cc_allreduce 16 x FLOAT32 SUM), but rank 0 (host h0, pid 10) replayed "
                    "a graph of 1 call (the first cc_allreduce 8 x FLOAT32 SUM); their replays "
                    "agree up to graph replay #2") +
            kAdvice);
}

TEST_CASE("two graphs alike in their first call and size are still told apart") {
  CallCheck check(true);
  Rank r0(0), r1(1);
  two_allreduces.replay(r0.log);
  same_first_other_second.replay(r1.log);
  CHECK_FALSE(r0.beat(check));
  const auto m = r1.beat(check);
  REQUIRE(m);
  CHECK_THAT(m->words, StartsWith("graph replay #1: rank 1 (host h1, pid 11) and rank 0 (host h0, "
                                  "pid 10) both replayed a graph of 2 calls (the first "
                                  "cc_allreduce 16 x FLOAT32 SUM), but not the same graph"));
}

TEST_CASE("ranks that end after another number of replays differ") {
  CallCheck check(true);
  Rank r0(0), r1(1);
  for (Rank* r : {&r0, &r1}) {
    r->log.record(allreduce(8), 1, 0, 0);
    for (int i = 0; i < 3; ++i) one_allreduce.replay(r->log);
  }
  one_allreduce.replay(r1.log);  // one replay more
  CHECK_FALSE(r0.end(check));
  std::optional<CallMismatch> m = r1.end(check);
  if (!m) m = check.finish();
  REQUIRE(m);
  CHECK(m->words == std::string("graph replay #4: rank 1 (host h1, pid 11) replayed a graph of 1 "
                                "call (the first cc_allreduce 8 x FLOAT32 SUM), but rank 0 (host "
                                "h0, pid 10) made no graph replay #4: it ended (cc_comm_destroy) "
                                "after graph replay #3") +
                        kAdvice);
}

TEST_CASE("a rank that replayed no graph at all, ending, is named too") {
  CallCheck check(true);
  Rank r0(0), r1(1);
  for (Rank* r : {&r0, &r1}) r->log.record(allreduce(8), 1, 0, 0);
  one_allreduce.replay(r1.log);
  CHECK_FALSE(r1.end(check));
  const auto m = r0.end(check);
  REQUIRE(m);
  CHECK_THAT(m->words, EndsWith(std::string("it ended (cc_comm_destroy) before any graph replay") +
                                kAdvice));
}

TEST_CASE("a difference among the collectives is told before one of the replays") {
  CallCheck check(true);
  Rank r0(0), r1(1);
  r0.log.record(allreduce(8), 1, 0, 0);
  r1.log.record(allreduce(9), 1, 0, 0);
  one_allreduce.replay(r0.log);
  two_allreduces.replay(r1.log);
  CHECK_FALSE(r0.beat(check));
  const auto m = r1.beat(check);
  REQUIRE(m);
  CHECK_THAT(m->words, StartsWith("rank 1 (host h1, pid 11) called op #1 cc_allreduce 9 x"));
}
