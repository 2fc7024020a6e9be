// What the etcd backend's call check keeps in etcd
// (rendezvous/etcd/call_records.*): a rank's report and the mismatch verdict
// read back as written, values that are not ours refused, and the size of
// the largest report a heartbeat makes (docs/ETCD.md quotes it).
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

#include "cc/cc.h"
#include "lib/core/call_log.hpp"
#include "rendezvous/etcd/call_records.hpp"
#include "rendezvous/etcd/keys.hpp"

using cc::CallDesc;
using cc::CallKind;
using cc::CallPoint;
using cc::rv::rules::CallReport;

namespace {

bool same_point(const CallPoint& a, const CallPoint& b) {
  return a.line == b.line && a.peer == b.peer && a.seq == b.seq && a.fingerprint == b.fingerprint &&
         cc::same_call(a.call, b.call) && a.call.in_place == b.call.in_place;
}

}  // namespace

TEST_CASE("a report reads back as written, fingerprints of all 64 bits included") {
  CallReport r{3, "node-b", 4242, {}};
  CallPoint c;
  c.seq = 812;
  c.fingerprint = UINT64_MAX - 5;
  c.call = CallDesc{CallKind::broadcast, 16777216, CC_BFLOAT16, -1, 2, true};
  CallPoint s;
  s.line = CallPoint::Line::send;
  s.peer = 1;
  s.seq = 2;
  s.fingerprint = 1;
  s.call = CallDesc{CallKind::send, 8, CC_FLOAT32, -1, 1, false};
  r.points = {c, s};
  CallReport back;
  REQUIRE(cc::rv::etcd::decode(cc::rv::etcd::encode(r), &back));
  CHECK(back.rank == 3);
  CHECK(back.host == "node-b");
  CHECK(back.pid == 4242);
  REQUIRE(back.points.size() == 2);
  CHECK(same_point(back.points[0], c));
  CHECK(same_point(back.points[1], s));
}

TEST_CASE("values that are not a report are refused") {
  CallReport out;
  out.rank = 7;
  for (
      const char* text : {
          "",
          "not json",
          "[]",
          "{}",
          R"({"rank":1,"host":"h","pid":1})",
          R"({"rank":-1,"host":"h","pid":1,"points":[]})",
          R"({"rank":1,"host":"h","pid":1,"points":[[0,-1,1,"12",0,8,7,0,-1]]})",
          R"({"rank":1,"host":"h","pid":1,"points":[[3,-1,1,"12",0,8,7,0,-1,false]]})",
          R"({"rank":1,"host":"h","pid":1,"points":[[0,-1,1,"12",9,8,7,0,-1,false]]})",
          R"({"rank":1,"host":"h","pid":1,"points":[[0,-1,1,"1x",0,8,7,0,-1,false]]})",
          R"({"rank":1,"host":"h","pid":1,"points":[[0,-1,1,"99999999999999999999",0,8,7,0,-1,false]]})",
          R"({"rank":1,"host":"h","pid":1,"points":[[0,-1,1,12,0,8,7,0,-1,false]]})",
      }) {
    INFO(text);
    CHECK_FALSE(cc::rv::etcd::decode(text, &out));
    CHECK(out.rank == 7);  // left as it was
  }
}

TEST_CASE("the mismatch verdict reads back as the peer event every rank gets") {
  const cc::rv::PeerEvent e{cc::rv::PeerEventKind::mismatch, 1, "h1", 101, "rank 1 called ..."};
  cc::rv::PeerEvent back;
  REQUIRE(cc::rv::etcd::decode_mismatch(cc::rv::etcd::encode_mismatch(e), &back));
  CHECK(back.kind == cc::rv::PeerEventKind::mismatch);
  CHECK(back.rank == 1);
  CHECK(back.host == "h1");
  CHECK(back.pid == 101);
  CHECK(back.reason == e.reason);
  CHECK_FALSE(cc::rv::etcd::decode_mismatch(R"({"rank":1,"host":"h","pid":1,"words":""})", &back));
}

TEST_CASE("the largest report a heartbeat makes stays under 4 KB in etcd") {
  // Many calls between two heartbeats: 32 checkpoints, 16 recent collectives
  // and 16 sends, with large numbers everywhere.
  cc::core::CallLog log(2, 0);
  for (uint64_t n = 1; n <= 64 * 40 + 16; ++n)
    log.record(CallDesc{CallKind::reducescatter, 4000000000ULL + n, CC_BFLOAT16, CC_MAX, -1, true},
               n, 0, 0);
  for (int n = 0; n < 20; ++n)
    log.record(CallDesc{CallKind::send, 4000000000ULL, CC_FLOAT32, -1, 1, false}, 9000, 0, 0);
  CallReport r{1023, "node-with-a-long-name-0123", 4194304, log.take_report()};
  REQUIRE(r.points.size() == 64);
  const std::string text = cc::rv::etcd::encode(r);
  INFO(text.size() << " bytes");
  CHECK(text.size() < 4096);
}

TEST_CASE("a report's key names its line: the communicator or one of its split children") {
  const cc::rv::etcd::Keys keys("cc", "job");
  const cc::rv::etcd::Gen g{1, 2};
  CHECK(keys.calls(g, 0, 0, 3) == "cc/job/gen/1.2/calls/3");
  CHECK(keys.calls(g, 4, -1, 3) == "cc/job/gen/1.2/calls/s4.-1/3");
  CHECK(keys.mismatch(g, 0, 0) == "cc/job/gen/1.2/news/mismatch");
  CHECK(keys.mismatch(g, 4, 7) == "cc/job/gen/1.2/news/mismatch/s4.7");
  using Line = std::pair<uint32_t, int32_t>;
  CHECK(keys.calls_line(g, keys.calls(g, 0, 0, 3)) == Line{0, 0});
  CHECK(keys.calls_line(g, keys.calls(g, 4, -1, 3)) == Line{4, -1});
  for (const char* other :
       {"cc/job/gen/1.2/calls/", "cc/job/gen/1.2/calls/x", "cc/job/gen/1.2/calls/-1",
        "cc/job/gen/1.2/calls/s0.1/2", "cc/job/gen/1.2/calls/s4/2", "cc/job/gen/1.2/calls/s4.1/",
        "cc/job/gen/1/calls/3"}) {
    INFO(other);
    CHECK_FALSE(keys.calls_line(g, other).has_value());
  }
}
