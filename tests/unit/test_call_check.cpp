// Calls checked across ranks: a call's message and fingerprint, a
// communicator's call log (the points its heartbeats carry, the flight
// recorder's ring and file), the rule that compares ranks' points, and the
// server telling every member of a communicator at the first difference.
// Ranks are CallLogs fed by the test; no sockets, no GPU.
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cc/cc.h"
#include "common/call_desc.hpp"
#include "lib/core/call_log.hpp"
#include "lib/watch/trace_file.hpp"
#include "rendezvous/rules/call_check.hpp"
#include "tests/unit/call_descs.hpp"
#include "tests/unit/check_rank.hpp"
#include "tests/unit/server_core_harness.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using cc::CallDesc;
using cc::CallKind;
using cc::CallPoint;
using cc::core::CallLog;
using cc::rv::rules::CallCheck;
using cc::rv::rules::CallMismatch;
using cc::rv::rules::CallReport;

using cc::test::allgather;
using cc::test::allreduce;
using cc::test::barrier;
using cc::test::broadcast;
using cc::test::recv;
using cc::test::reduce;
using cc::test::send;

namespace {

// One rank of a communicator, its flight recorder 64 calls long.
struct Rank : cc::test::CheckRank {
  Rank(int r, int nranks) : CheckRank(r, nranks, 64) {}
};

// Every rank reports in turn; the first difference found, if any.
std::optional<CallMismatch> heartbeat(CallCheck& check, std::vector<Rank*> ranks) {
  std::optional<CallMismatch> first;
  for (Rank* r : ranks)
    if (auto m = r->beat(check); m && !first) first = m;
  return first;
}

// The message of the first difference heartbeat() finds; the test fails when
// it finds none.
std::string difference_words(CallCheck& check, std::vector<Rank*> ranks) {
  const auto m = heartbeat(check, std::move(ranks));
  REQUIRE(m);
  return m->words;
}

// 49 calls every rank makes alike, then rank 1 makes `theirs` where rank 0
// makes `ours`: the message of the difference, checked to name op #50.
std::string diverge_at_50(const CallDesc& ours, const CallDesc& theirs) {
  CallCheck check;
  Rank r0(0, 2), r1(1, 2);
  for (Rank* r : {&r0, &r1}) r->call(allreduce(1024), 49);
  r0.call(ours);
  r1.call(theirs);
  const auto m = heartbeat(check, {&r0, &r1});
  REQUIRE(m);
  CHECK(m->seq == 50);
  CHECK(m->rank == 1);
  CHECK(m->other_rank == 0);
  CHECK(check.diverged());
  return m->words;
}

}  // namespace

TEST_CASE("call words name the call, its count, type, op and root") {
  CHECK(cc::call_words(allreduce(16777216)) == "cc_allreduce 16777216 x FLOAT32 SUM");
  CHECK(cc::call_words(allgather(4096, CC_BFLOAT16)) == "cc_allgather 4096 x BFLOAT16");
  CHECK(cc::call_words(broadcast(4, 2, CC_INT8)) == "cc_broadcast 4 x INT8 root 2");
  CHECK(cc::call_words(reduce(8, 1, CC_MAX)) == "cc_reduce 8 x FLOAT32 MAX root 1");
  CHECK(cc::call_words(barrier()) == "cc_barrier");
  CHECK(cc::call_words(send(8, 3)) == "cc_send 8 x FLOAT32 to rank 3");
  CHECK(cc::call_words(recv(8, 0)) == "cc_recv 8 x FLOAT32 from rank 0");
  CallDesc in_place = allreduce(2);
  in_place.in_place = true;
  CHECK(cc::call_words(in_place) == "cc_allreduce 2 x FLOAT32 SUM in place");
}

TEST_CASE("the fingerprint follows every field the ranks must agree on, and their order") {
  const uint64_t base = cc::fingerprint_step(0, allreduce(1024));
  CHECK(cc::fingerprint_step(0, allreduce(1024)) == base);
  CHECK(cc::fingerprint_step(0, allreduce(1025)) != base);
  CHECK(cc::fingerprint_step(0, allreduce(1024, CC_FLOAT16)) != base);
  CHECK(cc::fingerprint_step(0, allreduce(1024, CC_FLOAT32, CC_MAX)) != base);
  CHECK(cc::fingerprint_step(0, allgather(1024)) != base);
  CHECK(cc::fingerprint_step(0, broadcast(1024, 0)) != cc::fingerprint_step(0, broadcast(1024, 1)));
  CallDesc in_place = allreduce(1024);
  in_place.in_place = true;
  CHECK(cc::fingerprint_step(0, in_place) == base);  // each rank may choose
  const uint64_t ab = cc::fingerprint_step(cc::fingerprint_step(0, allreduce(1)), barrier());
  const uint64_t ba = cc::fingerprint_step(cc::fingerprint_step(0, barrier()), allreduce(1));
  CHECK(ab != ba);
}

TEST_CASE("the call log numbers collectives and each pair's sends and recvs apart") {
  CallLog log(3, 4);
  log.record(allreduce(8), 1, 7, 100);
  log.record(send(8, 1), 2, 7, 101);
  log.record(send(8, 2), 3, 7, 102);
  log.record(send(8, 1), 4, 7, 103);
  log.record(barrier(), 5, 7, 104);
  CHECK(log.collectives() == 2);
  const auto points = log.take_report();
  REQUIRE(points.size() == 5);
  CHECK(points[0].line == CallPoint::Line::collective);
  CHECK(points[0].seq == 1);
  CHECK(points[1].seq == 2);  // the barrier: collectives come first
  CHECK(points[2].line == CallPoint::Line::send);
  CHECK(points[2].peer == 1);
  CHECK(points[2].seq == 1);
  CHECK(points[3].peer == 2);
  CHECK(points[3].seq == 1);
  CHECK(points[4].peer == 1);
  CHECK(points[4].seq == 2);
  CHECK(log.take_report().empty());  // each point is sent once

  // The ring keeps the last 4, oldest first; completions are marked up to an op.
  log.completed_through(4, 500);
  const auto entries = log.entries();
  REQUIRE(entries.size() == 4);
  CHECK(entries.front().op == 2);
  CHECK(entries.back().op == 5);
  CHECK(entries.back().point.call.kind == CallKind::barrier);
  CHECK(entries[2].completed_us == 500);
  CHECK(entries[3].completed_us == 0);
  CHECK(entries[0].stream == 7);
}

TEST_CASE("a heartbeat carries the last calls and the checkpoints before them") {
  CallLog log(2, 0);  // no ring: the fingerprints still run
  for (int i = 0; i < 300; ++i) log.record(allreduce(4), static_cast<uint64_t>(i + 1), 0, 0);
  const auto points = log.take_report();
  std::vector<uint64_t> seqs;
  for (const auto& p : points) seqs.push_back(p.seq);
  REQUIRE(seqs.size() == 4 + CallLog::kRecent);
  CHECK(seqs[0] == 64);
  CHECK(seqs[3] == 256);
  CHECK(seqs[4] == 285);
  CHECK(seqs.back() == 300);
  CHECK(log.entries().empty());
}

TEST_CASE("ranks that make the same calls are not flagged, whatever their speed") {
  CallCheck check;
  Rank r0(0, 3), r1(1, 3), r2(2, 3);
  for (int round = 0; round < 20; ++round) {
    r0.call(allreduce(1024), 40);
    r0.call(barrier());
    if (round % 2 == 0) {  // rank 1 runs behind, then catches up
      r1.call(allreduce(1024), 40);
      r1.call(barrier());
    } else {
      r1.call(allreduce(1024), 40);
      r1.call(barrier());
      r1.call(allreduce(1024), 40);
      r1.call(barrier());
    }
    r2.call(allreduce(1024), 40);
    r2.call(barrier());
    CHECK_FALSE(heartbeat(check, {&r0, &r1, &r2}));
  }
  CHECK_FALSE(check.diverged());
  CHECK(check.points_kept() <= CallCheck::kKeep);
}

TEST_CASE("a difference of kind names both calls and the op after which the ranks diverged") {
  CHECK(diverge_at_50(allreduce(16777216), allgather(4096, CC_BFLOAT16)) ==
        "rank 1 (host h1, pid 11) called op #50 cc_allgather 4096 x BFLOAT16, but rank 0 "
        "(host h0, pid 10) called op #50 cc_allreduce 16777216 x FLOAT32 SUM; the ranks "
        "diverged after op #49. Every rank must make the same collective calls in the same "
        "order; the flight recorder's files (CC_TRACE_DIR, cc-doctor trace) show each rank's "
        "calls");
}

TEST_CASE("the words name the higher rank first, whichever report came first") {
  CallCheck check;
  Rank r0(0, 2), r1(1, 2);
  for (Rank* r : {&r0, &r1}) r->call(allreduce(1024), 49);
  r0.call(allreduce(4096));
  r1.call(allreduce(4097));
  const auto m = heartbeat(check, {&r1, &r0});  // rank 1's report first
  REQUIRE(m);
  CHECK(m->seq == 50);
  CHECK_THAT(m->words,
             Contains("rank 1 (host h1, pid 11) called op #50 cc_allreduce 4097 x "
                      "FLOAT32 SUM, but rank 0 (host h0, pid 10) called op #50 "
                      "cc_allreduce 4096 x FLOAT32 SUM; the ranks diverged after op #49"));
}

TEST_CASE("a difference of count, type, op or root names both calls") {
  CHECK_THAT(diverge_at_50(allreduce(4096), allreduce(4097)),
             Contains("called op #50 cc_allreduce 4097 x FLOAT32 SUM, but rank 0 (host h0, pid "
                      "10) called op #50 cc_allreduce 4096 x FLOAT32 SUM; the ranks diverged "
                      "after op #49"));
  CHECK_THAT(diverge_at_50(allreduce(4096), allreduce(4096, CC_FLOAT16)),
             Contains("cc_allreduce 4096 x FLOAT16 SUM, but") &&
                 Contains("cc_allreduce 4096 x FLOAT32 SUM;"));
  CHECK_THAT(diverge_at_50(allreduce(4096), allreduce(4096, CC_FLOAT32, CC_AVG)),
             Contains("cc_allreduce 4096 x FLOAT32 AVG, but") &&
                 Contains("cc_allreduce 4096 x FLOAT32 SUM;"));
  CHECK_THAT(diverge_at_50(broadcast(64, 0), broadcast(64, 1)),
             Contains("op #50 cc_broadcast 64 x FLOAT32 root 1, but") &&
                 Contains("op #50 cc_broadcast 64 x FLOAT32 root 0;"));
}

TEST_CASE("a skipped call and an extra call are named where the ranks part") {
  SECTION("rank 1 skips op #50, a broadcast") {
    CallCheck check;
    Rank r0(0, 2), r1(1, 2);
    for (Rank* r : {&r0, &r1}) r->call(allreduce(8), 49);
    r0.call(broadcast(8, 0));
    r0.call(allreduce(8), 5);
    r1.call(allreduce(8), 5);
    CHECK_THAT(difference_words(check, {&r0, &r1}),
               Contains("rank 1 (host h1, pid 11) called op #50 cc_allreduce 8 x "
                        "FLOAT32 SUM, but rank 0 (host h0, pid 10) called op #50 "
                        "cc_broadcast 8 x FLOAT32 root 0; the ranks diverged after "
                        "op #49"));
  }
  SECTION("rank 1 makes an extra barrier at op #50") {
    CallCheck check;
    Rank r0(0, 2), r1(1, 2);
    for (Rank* r : {&r0, &r1}) r->call(allreduce(8), 49);
    r1.call(barrier());
    for (Rank* r : {&r0, &r1}) r->call(allreduce(8), 3);
    CHECK_THAT(difference_words(check, {&r0, &r1}),
               Contains("rank 1 (host h1, pid 11) called op #50 cc_barrier, but rank 0 "
                        "(host h0, pid 10) called op #50 cc_allreduce 8 x FLOAT32 SUM; "
                        "the ranks diverged after op #49"));
  }
}

TEST_CASE("a difference found later, at a checkpoint, says where the ranks still agreed") {
  CallCheck check;
  Rank r0(0, 2), r1(1, 2);
  r0.call(allreduce(8), 200);
  CHECK_FALSE(r0.beat(check));
  r1.call(allreduce(8), 100);
  CHECK_FALSE(r1.beat(check));  // op #64 agrees
  r1.call(allreduce(8), 49);
  r1.call(allreduce(9));  // op #150: NCCL would complete it, with garbage
  r1.call(allreduce(8), 50);
  const auto m = r1.beat(check);
  REQUIRE(m);
  CHECK(m->seq == 185);  // the first of rank 0's last calls
  CHECK_THAT(m->words, Contains("rank 1 (host h1, pid 11) and rank 0 (host h0, pid 10) both "
                                "called op #185 cc_allreduce 8 x FLOAT32 SUM, but an earlier "
                                "call differs: the ranks' calls agree up to op #128 and differ "
                                "after it"));
}

TEST_CASE("the k-th send from a rank is compared with its peer's k-th recv from it") {
  SECTION("pairs that agree, among ranks that make no sends, are not flagged") {
    CallCheck check;
    Rank r0(0, 3), r1(1, 3), r2(2, 3);
    r0.call(send(8, 1));
    r0.call(allreduce(4));
    r0.call(send(16, 1));
    r1.call(recv(8, 0));
    r1.call(allreduce(4));
    r1.call(recv(16, 0));
    r2.call(allreduce(4));
    CHECK_FALSE(heartbeat(check, {&r0, &r1, &r2}));
    CHECK_FALSE(check.diverged());
  }
  SECTION("a recv of another count") {
    CallCheck check;
    Rank r0(0, 2), r1(1, 2);
    r0.call(send(8, 1));
    r0.call(send(8, 1));
    r1.call(recv(8, 0));
    r1.call(recv(16, 0));
    const auto m = heartbeat(check, {&r0, &r1});
    REQUIRE(m);
    CHECK(m->seq == 2);
    CHECK_THAT(m->words, Contains("rank 0 (host h0, pid 10)'s send #2 to rank 1 is cc_send 8 x "
                                  "FLOAT32 to rank 1, but rank 1 (host h1, pid 11)'s recv #2 "
                                  "from rank 0 is cc_recv 16 x FLOAT32 from rank 0"));
  }
  SECTION("a recv of another type, reported before the send") {
    CallCheck check;
    Rank r0(0, 2), r1(1, 2);
    r0.call(send(8, 1, CC_INT32));
    r1.call(recv(8, 0, CC_FLOAT32));
    CHECK_THAT(difference_words(check, {&r1, &r0}),
               Contains("send #1 to rank 1 is cc_send 8 x INT32 to rank 1, but") &&
                   Contains("recv #1 from rank 0 is cc_recv 8 x FLOAT32 from rank 0"));
  }
}

TEST_CASE("two communicators used in a different order on each rank are not flagged") {
  CallCheck a, b;  // the server keeps one per communicator
  Rank a0(0, 2), a1(1, 2), b0(0, 2), b1(1, 2);
  for (int i = 0; i < 100; ++i) {
    a0.call(allreduce(8));  // rank 0: a then b
    b0.call(broadcast(8, 0));
    b1.call(broadcast(8, 0));  // rank 1: b then a
    a1.call(allreduce(8));
  }
  CHECK_FALSE(heartbeat(a, {&a0, &a1}));
  CHECK_FALSE(heartbeat(b, {&b1, &b0}));
}

TEST_CASE("after the first difference the communicator's calls are not compared again") {
  CallCheck check;
  Rank r0(0, 2), r1(1, 2);
  r0.call(allreduce(8));
  r1.call(allreduce(9));
  REQUIRE(heartbeat(check, {&r0, &r1}));
  r0.call(barrier());
  r1.call(allreduce(9));
  CHECK_FALSE(heartbeat(check, {&r0, &r1}));
}

TEST_CASE("a heartbeat's calls cross the wire, and an older heartbeat still decodes") {
  CallLog log(2, 0);
  log.record(reduce(8, 1, CC_MIN), 1, 0, 0);
  log.record(send(3, 1, CC_UINT8), 2, 0, 0);
  cc::rv::Heartbeat h{41, 2, 1, log.take_report()};
  cc::test::check_round_trip(h);
  cc::rv::FrameReader r;
  r.feed(cc::rv::encode_frame(1, h));
  const auto f = r.next();
  REQUIRE(f);
  const auto& back = std::get<cc::rv::Heartbeat>(f->message);
  CHECK(back.comm_number == 2);
  CHECK(back.generation == 1);
  REQUIRE(back.calls.size() == 2);
  CHECK(cc::call_words(back.calls[0].call) == "cc_reduce 8 x FLOAT32 MIN root 1");
  CHECK(back.calls[1].line == CallPoint::Line::send);
  CHECK(back.calls[1].fingerprint == h.calls[1].fingerprint);

  // last_completed alone, as a client without the check sends it.
  const std::vector<uint8_t> old = {0x43, 0x43, 0x52, 0x56, 1, 0, 22, 0, 1, 0, 0, 0,
                                    8,    0,    0,    0,    7, 0, 0,  0, 0, 0, 0, 0};
  cc::rv::FrameReader r2;
  r2.feed(old);
  const auto f2 = r2.next();
  REQUIRE(f2);
  CHECK(std::get<cc::rv::Heartbeat>(f2->message).last_completed == 7);
  CHECK(std::get<cc::rv::Heartbeat>(f2->message).calls.empty());
}

TEST_CASE("the server tells every member of a communicator whose ranks' calls differ") {
  cc::test::Harness h;
  // Communicator 0 on connections 1, 2 and communicator 1 on 3, 4.
  for (cc::rv::ConnId i = 1; i <= 4; ++i) h.client(i);
  for (int r = 0; r < 2; ++r) {
    h.feed(static_cast<cc::rv::ConnId>(r + 1), cc::test::join_msg(r, 2, "h" + std::to_string(r)));
    auto j = cc::test::join_msg(r, 2, "h" + std::to_string(r));
    j.info.comm_number = 1;
    h.feed(static_cast<cc::rv::ConnId>(r + 3), j);
  }
  for (cc::rv::ConnId i = 1; i <= 4; ++i) h.take(i);

  Rank a0(0, 2), a1(1, 2), b0(0, 2), b1(1, 2);
  auto beat = [&](cc::rv::ConnId conn, Rank& r, uint32_t communicator) {
    h.feed(conn, cc::rv::Heartbeat{r.op, communicator, 0, r.log.take_report()});
  };
  // Communicator 1's calls agree in a different order from communicator 0's.
  a0.call(allreduce(8), 10);
  b0.call(barrier(), 10);
  b1.call(barrier(), 10);
  a1.call(allreduce(8), 10);
  beat(1, a0, 0);
  beat(2, a1, 0);
  beat(4, b1, 1);
  beat(3, b0, 1);
  for (cc::rv::ConnId i = 1; i <= 4; ++i) {
    INFO("connection " << i);
    const auto sent = h.take(i);
    REQUIRE(sent.size() == 1);
    CHECK(std::holds_alternative<cc::rv::HeartbeatAck>(sent[0].message));
  }

  // Rank 1 of communicator 0 calls another count: both its members hear it, 3 and 4 do not.
  a0.call(allreduce(8));
  a1.call(allreduce(16));
  beat(1, a0, 0);
  beat(2, a1, 0);
  for (cc::rv::ConnId i : {1, 2}) {
    INFO("connection " << i);
    const auto sent = h.take(i);
    REQUIRE(sent.size() == 2);
    const auto* ev = std::get_if<cc::rv::PeerEvent>(&sent.back().message);
    REQUIRE(ev != nullptr);
    CHECK(ev->kind == cc::rv::PeerEventKind::mismatch);
    CHECK(ev->rank == 1);
    CHECK_THAT(ev->reason, Contains("rank 1 (host h1, pid 1001) called op #11 cc_allreduce 16 x "
                                    "FLOAT32 SUM, but rank 0 (host h0, pid 1000) called op #11 "
                                    "cc_allreduce 8 x FLOAT32 SUM; the ranks diverged after op "
                                    "#10"));
  }
  for (cc::rv::ConnId i : {3, 4}) CHECK(h.take(i).empty());
}

TEST_CASE("the flight recorder's file: its name and what it holds") {
  cc::watch::TraceIdentity id{"my job/1", 2, 1, 0, 3, 4, "gpu-a", 77};
  CHECK(cc::watch::trace_file_name(id) == "cc-trace.my_job_1.c2.g1.r3.json");
  id.split = 2;
  CHECK(cc::watch::trace_file_name(id) == "cc-trace.my_job_1.c2.s2.g1.r3.json");

  CallLog log(4, 8);
  log.record(allreduce(4194304), 1, 0xabc, 1000);
  log.record(send(8, 2), 2, 0xabc, 2000);
  log.completed_through(1, 1500);
  cc::watch::TraceState st{"mismatch", "the words", 2, 1, log.fingerprint()};
  const auto j = nlohmann::json::parse(cc::watch::trace_json(id, st, log.entries()));
  CHECK(j.at("format") == "cc-trace 1");
  CHECK(j.at("job") == "my job/1");
  CHECK(j.at("rank") == 3);
  CHECK(j.at("nranks") == 4);
  CHECK(j.at("host") == "gpu-a");
  CHECK(j.at("reason") == "mismatch");
  CHECK(j.at("failure") == "the words");
  CHECK(j.at("ops_completed") == 1);
  REQUIRE(j.at("calls").size() == 2);
  const auto& c0 = j.at("calls")[0];
  CHECK(c0.at("line") == "collective");
  CHECK(c0.at("seq") == 1);
  CHECK(c0.at("call") == "cc_allreduce");
  CHECK(c0.at("count") == 4194304);
  CHECK(c0.at("dtype") == "FLOAT32");
  CHECK(c0.at("redop") == "SUM");
  CHECK(c0.at("description") == "cc_allreduce 4194304 x FLOAT32 SUM");
  CHECK(c0.at("stream") == "0x0000000000000abc");
  CHECK(c0.at("enqueued_us") == 1000);
  CHECK(c0.at("completed_us") == 1500);
  const auto& c1 = j.at("calls")[1];
  CHECK(c1.at("line") == "send");
  CHECK(c1.at("peer") == 2);
  CHECK(c1.at("completed_us") == 0);
}

TEST_CASE("where the ranks are, when a collective times out") {
  using cc::rv::rules::positions_words;
  using cc::rv::rules::RankCall;
  SECTION("one rank in another call") {
    std::vector<RankCall> r;
    for (int i = 0; i < 4; ++i) r.push_back({i, 20, i == 1 ? barrier() : allreduce(4194304)});
    CHECK(positions_words(r) ==
          "rank 1 is in op #20 cc_barrier while ranks 0, 2, 3 are in op #20 cc_allreduce 4194304 "
          "x FLOAT32 SUM");
  }
  SECTION("the same call everywhere: nothing to say") {
    CHECK(positions_words({{0, 7, barrier()}, {1, 7, barrier()}}).empty());
  }
  SECTION("ranks behind, one that made no call, and many named up to 16") {
    std::vector<RankCall> r;
    for (int i = 0; i < 40; ++i) r.push_back({i, 12, allreduce(8)});
    for (int i = 40; i < 60; ++i) r.push_back({i, 11, allreduce(8)});
    r.push_back({60, 0, {}});
    CHECK(positions_words(r) ==
          "rank 60 has made no collective call; ranks 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, "
          "51, 52, 53, 54, 55 and 4 more are in op #11 cc_allreduce 8 x FLOAT32 SUM while ranks "
          "0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 and 24 more are in op #12 "
          "cc_allreduce 8 x FLOAT32 SUM");
  }
}

TEST_CASE("the server says where each member is when asked with_calls") {
  cc::test::Harness h;
  for (cc::rv::ConnId i = 1; i <= 3; ++i) h.client(i);
  for (int r = 0; r < 3; ++r)
    h.feed(static_cast<cc::rv::ConnId>(r + 1), cc::test::join_msg(r, 3, "h" + std::to_string(r)));
  for (cc::rv::ConnId i = 1; i <= 3; ++i) h.take(i);
  Rank r0(0, 3), r1(1, 3);
  r0.call(allreduce(8), 20);
  r1.call(allreduce(8), 19);
  r1.call(barrier());
  h.feed(1, cc::rv::Heartbeat{0, 0, 0, r0.log.take_report()});
  h.feed(2, cc::rv::Heartbeat{0, 0, 0, r1.log.take_report()});
  h.take(1);
  h.take(2);  // the difference at op #20 is told; the positions stay known
  h.feed(1, cc::rv::ProgressQuery{0, -1, 0, true});
  const auto p = h.one_as<cc::rv::Progress>(1);
  CHECK(p.calls ==
        "rank 2 has made no collective call; rank 0 is in op #20 cc_allreduce 8 x FLOAT32 SUM "
        "while rank 1 is in op #20 cc_barrier");
  h.feed(1, cc::rv::ProgressQuery{0, -1, 0, false});
  CHECK(h.one_as<cc::rv::Progress>(1).calls.empty());
}
