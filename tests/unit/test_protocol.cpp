// The wire protocol alone: every message round-trips, every malformed input
// is refused with the right DecodeError.
#include <catch2/catch.hpp>

#include "cc/cc.h"
#include "rendezvous/protocol.hpp"

namespace rv = cc::rv;

namespace {

rv::Resume resume_msg() {
  rv::Resume r;
  r.info = {5, 8, 2, "node-5", 55, 22809, 13000, 13000, "GPU-5", "10.0.0.5", "node-5-boot"};
  r.generation = 2;
  r.rank = 3;
  r.world_size = 6;
  r.heartbeat_window_ms = 4000;
  r.last_completed = 1ull << 33;
  r.unique_id = std::vector<uint8_t>(256, 0xcd);
  return r;
}

std::vector<rv::Message> one_of_each() {
  rv::Join join;
  join.info = {3,     8,     2,          "node-7",   4242,          22809,
               13000, 13000, "GPU-1234", "10.0.0.7", "node-7-rank3"};
  join.unique_id = std::vector<uint8_t>(128, 0xab);
  join.timeout_ms = 60000;
  rv::Joined joined;
  joined.unique_id = {1, 2, 3};
  joined.members = {{0, "a", 1}, {1, "b", 2}};
  joined.world_size = 9;
  rv::PreflightReady ready{7,      true,  "node-7boot", "10.0.0.7", 41234,
                           "eth1", "eth", "eth1",       "10.0.0.7", 9000};
  rv::PreflightReport report{7, {{1, true, 0, "reached"}, {0, false, 110, "timed out"}}, 5000};
  rv::PreflightPlan plan{rv::PreflightStep::probe,
                         "",
                         {{1, "node-1", 11, "10.0.0.1", 5555}, {0, "node-0", 10, "::1", 6}}};
  return {
      rv::Hello{"job-1", "host", 77, "cc 0.1.0 store"},
      rv::Auth{std::vector<uint8_t>(32, 7)},
      rv::Set{"key", {0, 1, 0, 255}},
      rv::Get{"key", 1500},
      rv::Add{"counter", -42},
      rv::Wait{{"a", "b", "c"}, 99},
      rv::Del{"gone"},
      join,
      rv::Leave{},
      rv::Heartbeat{1ull << 40},
      rv::Abort{"user asked"},
      rv::Challenge{true, std::vector<uint8_t>(32, 9), "cc-rendezvous 0.1.0"},
      rv::Ok{},
      rv::Error{CC_ERR_TIMEOUT, "ranks 2, 3 of 4 never joined"},
      rv::Value{std::vector<uint8_t>(70000, 0)},
      rv::Integer{-(1ll << 62)},
      joined,
      rv::PeerEvent{rv::PeerEventKind::aborted, 5, "node-5", 55, "boom"},
      rv::HeartbeatAck{},
      rv::HeartbeatWindow{5000},
      rv::ProgressQuery{3, -1},
      rv::Progress{{{0, "node-0", 10, 42, 7}, {1, "node-1", 11, 41, 1200}}},
      rv::CompareSet{"leader", true, {'o', 'l', 'd'}, {'n', 'e', 'w'}},
      rv::CompareSetResult{true},
      rv::InitFailed{7, "ncclCommInitRankConfig failed on rank 3: unhandled system error"},
      ready,
      report,
      plan,
      rv::PeerEvent{rv::PeerEventKind::init_failed, 3, "node-3", 33, "NCCL said no"},
      rv::Hello{"job-1", "host", 77, "cc 0.1.0 comm", std::vector<uint8_t>(16, 0x5a)},
      resume_msg(),
  };
}

rv::FrameReader::Frame decode_one(const std::vector<uint8_t>& bytes) {
  rv::FrameReader r;
  r.feed(bytes);
  auto f = r.next();
  INFO("decode error: " << rv::describe(r.error()));
  REQUIRE(f);
  CHECK(r.buffered() == 0);
  return *f;
}

std::vector<uint8_t> payload_of(const rv::Message& m) {
  auto frame = rv::encode_frame(1, m);
  return {frame.begin() + rv::kHeaderSize, frame.end()};
}

void set_u32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
}

rv::DecodeError reader_error(const std::vector<uint8_t>& bytes, rv::Limits limits = {}) {
  rv::FrameReader r(limits);
  r.feed(bytes);
  auto f = r.next();
  CHECK_FALSE(f);
  return r.error();
}

}  // namespace

TEST_CASE("every message type round-trips through a frame") {
  uint32_t rid = 100;
  for (const auto& m : one_of_each()) {
    INFO("type " << rv::type_name(rv::type_of(m)));
    auto bytes = rv::encode_frame(rid, m);
    auto f = decode_one(bytes);
    CHECK(f.request_id == rid);
    CHECK(f.message.index() == m.index());
    CHECK(rv::encode_frame(rid, f.message) == bytes);  // every field came back
    ++rid;
  }
  auto f = decode_one(rv::encode_frame(1, one_of_each()[7]));
  const auto& j = std::get<rv::Join>(f.message);
  CHECK(j.info.rank == 3);
  CHECK(j.info.world_size == 8);
  CHECK(j.info.gpu_uuid == "GPU-1234");
  CHECK(j.unique_id.size() == 128);
  CHECK(std::string(rv::type_name(rv::MsgType::peer_event)) == "peer-event");
  auto p = decode_one(rv::encode_frame(2, rv::Progress{{{1, "node-1", 11, 41, 1200}}}));
  const auto& progress = std::get<rv::Progress>(p.message);
  REQUIRE(progress.members.size() == 1);
  CHECK(progress.members[0].host == "node-1");
  CHECK(progress.members[0].last_completed == 41);
  CHECK(progress.members[0].silent_ms == 1200);
  CHECK(std::get<rv::HeartbeatWindow>(
            decode_one(rv::encode_frame(3, rv::HeartbeatWindow{5000})).message)
            .window_ms == 5000);
  auto c = decode_one(rv::encode_frame(4, rv::CompareSet{"k", false, {}, {0, 1}}));
  const auto& cas = std::get<rv::CompareSet>(c.message);
  CHECK_FALSE(cas.has_expected);
  CHECK(cas.value == std::vector<uint8_t>{0, 1});
  CHECK(std::string(rv::type_name(rv::MsgType::compare_set)) == "compare-set");
  CHECK(static_cast<int>(rv::MsgType::compare_set) == 15);
  CHECK(static_cast<int>(rv::MsgType::compare_set_result) == 110);
  // A communicator's start: the message numbers of their own range, fields back in order.
  CHECK(static_cast<int>(rv::MsgType::init_failed) == 40);
  CHECK(static_cast<int>(rv::MsgType::preflight_plan) == 125);
  auto r = decode_one(rv::encode_frame(4, one_of_each()[25]));
  const auto& ready = std::get<rv::PreflightReady>(r.message);
  CHECK(ready.addr == "10.0.0.7");
  CHECK(ready.port == 41234);
  CHECK(ready.user_ifname == "eth");
  CHECK(ready.timeout_ms == 9000);
  auto pl = decode_one(rv::encode_frame(5, one_of_each()[27]));
  const auto& plan = std::get<rv::PreflightPlan>(pl.message);
  REQUIRE(plan.targets.size() == 2);
  CHECK(plan.targets[1].addr == "::1");
  CHECK(plan.targets[0].pid == 11);
  auto rep = decode_one(rv::encode_frame(6, one_of_each()[26]));
  CHECK(std::get<rv::PreflightReport>(rep.message).results[1].error == 110);
}

TEST_CASE("failover: a Resume and a Hello's session round-trip; older Hellos decode") {
  const auto f = decode_one(rv::encode_frame(8, resume_msg()));
  CHECK(static_cast<int>(rv::MsgType::resume) == 26);
  CHECK(std::string(rv::type_name(rv::MsgType::resume)) == "resume");
  const auto& r = std::get<rv::Resume>(f.message);
  CHECK(r.info.rank == 5);
  CHECK(r.info.host == "node-5");
  CHECK(r.generation == 2);
  CHECK(r.rank == 3);
  CHECK(r.world_size == 6);
  CHECK(r.heartbeat_window_ms == 4000);
  CHECK(r.last_completed == 1ull << 33);
  CHECK(r.unique_id == std::vector<uint8_t>(256, 0xcd));

  // A Hello of an older client ends after its client text: no session.
  auto p = payload_of(rv::Hello{"job", "h", 7, "old", {}});
  p.resize(p.size() - 4);  // the session's length
  rv::Message m;
  REQUIRE(rv::decode_message(static_cast<uint16_t>(rv::MsgType::hello), p, {}, &m) ==
          rv::DecodeError::none);
  CHECK(std::get<rv::Hello>(m).client == "old");
  CHECK(std::get<rv::Hello>(m).session.empty());
  const auto h = decode_one(rv::encode_frame(9, rv::Hello{"job", "h", 7, "new", {1, 2, 3}}));
  CHECK(std::get<rv::Hello>(h.message).session == std::vector<uint8_t>{1, 2, 3});
}

TEST_CASE("failover: a Resume cut short, too large or impossible is refused") {
  rv::Resume with_seat = resume_msg();
  with_seat.seat = std::vector<uint8_t>(16, 0x5e);
  const auto p = payload_of(with_seat);
  // An older client's Resume ends before the seat: that cut is a whole one.
  const size_t without_seat = p.size() - 4 - with_seat.seat.size();
  for (size_t cut = 0; cut < p.size(); ++cut) {
    rv::Message m;
    INFO("cut at " << cut);
    const auto got = rv::decode_message(static_cast<uint16_t>(rv::MsgType::resume),
                                        std::span(p.data(), cut), {}, &m);
    if (cut == without_seat) {
      CHECK(got == rv::DecodeError::none);
      CHECK(std::get<rv::Resume>(m).seat.empty());
    } else {
      CHECK(got == rv::DecodeError::truncated);
    }
  }
  rv::Resume big = resume_msg();
  big.unique_id.assign(rv::kMaxUniqueIdBytes + 1, 1);
  CHECK(reader_error(rv::encode_frame(1, big)) == rv::DecodeError::field_too_large);
  rv::Hello h{"job", "h", 1, "c", std::vector<uint8_t>(rv::kMaxSessionBytes + 1, 1)};
  CHECK(reader_error(rv::encode_frame(1, h)) == rv::DecodeError::field_too_large);
  rv::Resume outside = resume_msg();
  outside.rank = outside.world_size;  // a rank outside its generation
  CHECK(reader_error(rv::encode_frame(1, outside)) == rv::DecodeError::bad_field);
  rv::Resume empty = resume_msg();
  empty.world_size = 0;
  CHECK(reader_error(rv::encode_frame(1, empty)) == rv::DecodeError::bad_field);
  rv::Resume no_job_rank = resume_msg();
  no_job_rank.info.rank = -1;
  CHECK(reader_error(rv::encode_frame(1, no_job_rank)) == rv::DecodeError::bad_field);
}

TEST_CASE("a Get's answer written from the value's bytes is the frame of a Value") {
  for (const std::vector<uint8_t>& value :
       {std::vector<uint8_t>{}, std::vector<uint8_t>{0, 1, 255}, std::vector<uint8_t>(70000, 9)}) {
    std::vector<uint8_t> direct = {7, 7};  // appended after what the buffer holds
    rv::append_value_frame(direct, 41, value);
    std::vector<uint8_t> framed = {7, 7};
    rv::append_frame(framed, 41, rv::Value{value});
    CHECK(direct == framed);
    const auto got = decode_one(std::vector<uint8_t>(direct.begin() + 2, direct.end()));
    CHECK(got.request_id == 41);
    CHECK(std::get<rv::Value>(got.message).value == value);
  }
}

TEST_CASE("malformed frames are refused with their reason") {
  auto good = rv::encode_frame(1, rv::Set{"k", {1, 2}});

  SECTION("bad magic, seen from the first bytes") {
    CHECK(reader_error({'G', 'E'}) == rv::DecodeError::bad_magic);
    auto b = good;
    b[0] ^= 0xff;
    CHECK(reader_error(b) == rv::DecodeError::bad_magic);
  }
  SECTION("bad version") {
    auto b = good;
    b[4] = 2;
    CHECK(reader_error(b) == rv::DecodeError::bad_version);
  }
  SECTION("length over the maximum") {
    auto b = good;
    set_u32(b, 12, (4u << 20) + 1);
    CHECK(reader_error(b) == rv::DecodeError::frame_too_large);
    rv::Limits tight;
    tight.max_frame = 4;
    CHECK(reader_error(good, tight) == rv::DecodeError::frame_too_large);
  }
  SECTION("truncated: a field runs past the end of the payload") {
    auto p = payload_of(rv::Set{"key", {1, 2, 3}});
    for (size_t cut = 0; cut < p.size(); ++cut) {
      rv::Message m;
      CHECK(rv::decode_message(static_cast<uint16_t>(rv::MsgType::set), std::span(p.data(), cut),
                               {}, &m) == rv::DecodeError::truncated);
    }
  }
  SECTION("trailing bytes") {
    auto p = payload_of(rv::Get{"k", 1});
    p.push_back(0);
    rv::Message m;
    CHECK(rv::decode_message(static_cast<uint16_t>(rv::MsgType::get), p, {}, &m) ==
          rv::DecodeError::trailing_bytes);
  }
  SECTION("unknown type") {
    auto b = good;
    b[6] = 0xe7;
    b[7] = 0x03;
    CHECK(reader_error(b) == rv::DecodeError::unknown_type);
  }
  SECTION("oversized key and value") {
    CHECK(reader_error(rv::encode_frame(1, rv::Set{std::string(1025, 'k'), {}})) ==
          rv::DecodeError::field_too_large);
    rv::Limits small;
    small.max_value = 3;
    CHECK(reader_error(rv::encode_frame(1, rv::Set{"k", {1, 2, 3, 4}}), small) ==
          rv::DecodeError::field_too_large);
    CHECK(reader_error(rv::encode_frame(1, rv::Wait{std::vector<std::string>(1025, "k"), 0})) ==
          rv::DecodeError::field_too_large);
    // NCCL ids: 64 of 128 bytes for the scalable init, not one byte more.
    rv::Join j;
    j.info.rank = 0;
    j.info.world_size = 8192;
    j.unique_id.assign(rv::kMaxUniqueIdBytes, 1);
    CHECK(std::get<rv::Join>(decode_one(rv::encode_frame(1, j)).message).unique_id.size() ==
          rv::kMaxUniqueIdBytes);
    j.unique_id.push_back(1);
    CHECK(reader_error(rv::encode_frame(1, j)) == rv::DecodeError::field_too_large);
  }
  SECTION("impossible values") {
    rv::Join j;
    j.info.rank = 0;
    j.info.world_size = 0;
    CHECK(reader_error(rv::encode_frame(1, j)) == rv::DecodeError::bad_field);
    CHECK(reader_error(rv::encode_frame(1, rv::Set{"", {1}})) == rv::DecodeError::bad_field);
    auto ev = rv::encode_frame(1, rv::PeerEvent{rv::PeerEventKind::failed, 1, "h", 1, "r"});
    ev[rv::kHeaderSize] = 9;
    CHECK(reader_error(ev) == rv::DecodeError::bad_field);
    // an expected value without has_expected, and a flag that is not 0 or 1
    CHECK(reader_error(rv::encode_frame(1, rv::CompareSet{"k", false, {1}, {2}})) ==
          rv::DecodeError::bad_field);
    auto cas = rv::encode_frame(1, rv::CompareSet{"k", true, {1}, {2}});
    cas[rv::kHeaderSize + 5] = 2;  // after the key's length and its one byte
    CHECK(reader_error(cas) == rv::DecodeError::bad_field);
    auto plan = rv::encode_frame(1, rv::PreflightPlan{rv::PreflightStep::passed, "", {}});
    plan[rv::kHeaderSize] = 4;
    CHECK(reader_error(plan) == rv::DecodeError::bad_field);
    rv::PreflightReady ready;
    ready.port = 70000;
    CHECK(reader_error(rv::encode_frame(1, ready)) == rv::DecodeError::bad_field);
    rv::PreflightReport many;
    many.results.resize(rv::kMaxProbeTargets + 1);
    CHECK(reader_error(rv::encode_frame(1, many)) == rv::DecodeError::field_too_large);
  }
  SECTION("a short header is not yet an error") {
    rv::FrameReader r;
    r.feed(std::span(good.data(), 10));
    CHECK_FALSE(r.next());
    CHECK(r.error() == rv::DecodeError::none);
    CHECK(r.mid_frame());
  }
  SECTION("after an error the reader stays failed") {
    rv::FrameReader r;
    r.feed(std::vector<uint8_t>{'X', 'Y', 'Z', 'W'});
    CHECK_FALSE(r.next());
    r.feed(good);
    CHECK_FALSE(r.next());
    CHECK(r.error() == rv::DecodeError::bad_magic);
  }
  CHECK(std::string(rv::describe(rv::DecodeError::bad_magic)).find("bad magic") !=
        std::string::npos);
}

TEST_CASE("FrameReader splits a stream however it arrives") {
  std::vector<uint8_t> stream;
  auto all = one_of_each();
  for (size_t i = 0; i < all.size(); ++i)
    rv::append_frame(stream, static_cast<uint32_t>(i), all[i]);

  SECTION("one byte at a time") {
    rv::FrameReader r;
    size_t got = 0;
    for (uint8_t b : stream) {
      r.feed(std::span(&b, 1));
      while (auto f = r.next()) {
        CHECK(f->request_id == got);
        CHECK(f->message.index() == all[got].index());
        ++got;
      }
      REQUIRE(r.error() == rv::DecodeError::none);
    }
    CHECK(got == all.size());
    CHECK_FALSE(r.mid_frame());
  }
  SECTION("everything in one feed") {
    rv::FrameReader r;
    r.feed(stream);
    size_t got = 0;
    while (auto f = r.next()) ++got;
    CHECK(got == all.size());
    CHECK(r.error() == rv::DecodeError::none);
  }
  SECTION("two frames in one feed, then a partial third") {
    auto a = rv::encode_frame(1, rv::Ok{});
    auto b = rv::encode_frame(2, rv::Integer{5});
    auto c = rv::encode_frame(3, rv::Value{{1, 2, 3}});
    std::vector<uint8_t> feed(a);
    feed.insert(feed.end(), b.begin(), b.end());
    feed.insert(feed.end(), c.begin(), c.begin() + 5);
    rv::FrameReader r;
    r.feed(feed);
    REQUIRE(r.next());
    auto f = r.next();
    REQUIRE(f);
    CHECK(std::get<rv::Integer>(f->message).value == 5);
    CHECK_FALSE(r.next());
    CHECK(r.buffered() == 5);
    r.feed(std::span(c.data() + 5, c.size() - 5));
    f = r.next();
    REQUIRE(f);
    CHECK(f->request_id == 3);
  }
}
