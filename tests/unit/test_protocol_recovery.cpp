// The recovery messages of the wire protocol (Recover, RecoverId,
// RecoverIdWanted, Joined's generation fields, ProgressQuery's generation):
// they round-trip, frames of older peers without the new fields still
// decode, and impossible values are refused.
#include <catch2/catch.hpp>

#include "rendezvous/protocol.hpp"
#include "tests/unit/server_core_harness.hpp"

namespace rv = cc::rv;

namespace {

std::vector<uint8_t> payload_of(const rv::Message& m) {
  auto frame = rv::encode_frame(1, m);
  return {frame.begin() + rv::kHeaderSize, frame.end()};
}

rv::Message decode(rv::MsgType type, const std::vector<uint8_t>& payload,
                   rv::DecodeError want = rv::DecodeError::none) {
  rv::Message m;
  CHECK(rv::decode_message(static_cast<uint16_t>(type), payload, {}, &m) == want);
  return m;
}

rv::Recover a_recover() {
  rv::Recover r;
  r.info = {5, 8, 1, "node-5", 4242, 22809, 13000, 13000, "GPU-5", "10.0.0.5", "node-5-boot-1"};
  r.generation = 2;
  r.kind = rv::RecoverKind::regrow;
  r.nranks = 8;
  r.can_shrink = true;
  r.timeout_ms = 30000;
  return r;
}

}  // namespace

TEST_CASE("recovery messages round-trip") {
  rv::Joined joined;
  joined.unique_id = {7, 7};
  joined.members = {{0, "a", 1}, {3, "d", 4}};
  joined.generation = 3;
  joined.rank = 1;
  joined.failed = {1, 2};
  joined.method = rv::RecoverMethod::nccl_shrink;
  joined.world_size = 2;
  const std::vector<rv::Message> all = {a_recover(), rv::RecoverId{3, {1, 2, 3}, 500},
                                        rv::RecoverIdWanted{3}, joined,
                                        rv::ProgressQuery{4, 2, 3}};
  for (const auto& m : all) cc::test::check_round_trip(m);
  const auto back = std::get<rv::Joined>(decode(rv::MsgType::joined, payload_of(joined)));
  CHECK(back.generation == 3);
  CHECK(back.rank == 1);
  CHECK(back.failed == std::vector<int32_t>{1, 2});
  CHECK(back.method == rv::RecoverMethod::nccl_shrink);
  CHECK(back.world_size == 2);
  const auto r = std::get<rv::Recover>(decode(rv::MsgType::recover, payload_of(a_recover())));
  CHECK(r.info.host == "node-5");
  CHECK(r.kind == rv::RecoverKind::regrow);
  CHECK(r.can_shrink);
  CHECK(std::string(rv::type_name(rv::MsgType::recover_id_wanted)) == "recover-id-wanted");
}

TEST_CASE("frames of peers without recovery still decode") {
  SECTION("a Joined of an older server: generation 0, the rank of the Join") {
    rv::Joined old;
    old.unique_id = {1};
    old.members = {{0, "a", 1}};
    old.notice = "n";
    auto p = payload_of(old);
    // generation, rank, an empty failed list, method, world size, an empty seat
    p.resize(p.size() - 21);
    const auto j = std::get<rv::Joined>(decode(rv::MsgType::joined, p));
    CHECK(j.generation == 0);
    CHECK(j.rank == -1);
    CHECK(j.failed.empty());
    CHECK(j.notice == "n");
    CHECK(rv::world_size_of(j) == 1);  // no world size: the members it lists
  }
  SECTION("a Joined of a server before world_size: its recovery listed every member") {
    rv::Joined old;
    old.members = {{0, "a", 1}, {2, "c", 3}, {3, "d", 4}};
    old.generation = 1;
    old.world_size = 3;
    auto p = payload_of(old);
    p.resize(p.size() - 8);  // world size, an empty seat
    const auto j = std::get<rv::Joined>(decode(rv::MsgType::joined, p));
    CHECK(j.world_size == 0);
    CHECK(rv::world_size_of(j) == 3);
    CHECK(j.generation == 1);
  }
  SECTION("a Joined and a Recover of peers before seats: none") {
    rv::Joined old;
    old.seat = {1, 2};
    auto p = payload_of(old);
    p.resize(p.size() - 6);
    CHECK(std::get<rv::Joined>(decode(rv::MsgType::joined, p)).seat.empty());
    auto r = a_recover();
    r.seat = {3};
    auto q = payload_of(r);
    q.resize(q.size() - 5);
    const auto back = std::get<rv::Recover>(decode(rv::MsgType::recover, q));
    CHECK(back.seat.empty());
    CHECK(back.kind == rv::RecoverKind::regrow);
  }
  SECTION("a ProgressQuery of an older client: generation 0") {
    auto p = payload_of(rv::ProgressQuery{5, 1, 0});
    p.resize(8);
    const auto q = std::get<rv::ProgressQuery>(decode(rv::MsgType::progress_query, p));
    CHECK(q.comm_number == 5);
    CHECK(q.rank == 1);
    CHECK(q.generation == 0);
  }
  SECTION("a field cut in half is still an error") {
    auto p = payload_of(rv::ProgressQuery{5, 1, 2});
    p.resize(10);
    decode(rv::MsgType::progress_query, p, rv::DecodeError::truncated);
  }
}

TEST_CASE("impossible recovery fields are refused") {
  auto bad_kind = a_recover();
  auto p = payload_of(bad_kind);
  // kind sits after the member info and the generation: find it by encoding twice.
  bad_kind.kind = rv::RecoverKind::shrink;
  const auto q = payload_of(bad_kind);
  size_t at = 0;
  while (at < p.size() && p[at] == q[at]) ++at;
  REQUIRE(at < p.size());
  p[at] = 0;
  decode(rv::MsgType::recover, p, rv::DecodeError::bad_field);
  p[at] = 3;
  decode(rv::MsgType::recover, p, rv::DecodeError::bad_field);

  auto no_size = a_recover();
  no_size.nranks = 0;  // a regrow to nothing
  decode(rv::MsgType::recover, payload_of(no_size), rv::DecodeError::bad_field);
  auto no_world = a_recover();
  no_world.info.world_size = 0;
  decode(rv::MsgType::recover, payload_of(no_world), rv::DecodeError::bad_field);

  rv::Joined j;
  auto jp = payload_of(j);
  jp[jp.size() - 9] = 9;  // method, before the world size and the seat
  decode(rv::MsgType::joined, jp, rv::DecodeError::bad_field);
  auto trailing = payload_of(rv::RecoverIdWanted{1});
  trailing.push_back(0);
  decode(rv::MsgType::recover_id_wanted, trailing, rv::DecodeError::trailing_bytes);
}
