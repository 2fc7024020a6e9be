// The NCCL ids a communicator is made from (lib/comm/nccl_ids.*): how many
// for a size, and the bytes the rendezvous hands out read back as ids.
#include <catch2/catch.hpp>

#include <cstring>

#include "lib/comm/nccl_ids.hpp"

using cc::comm::kMaxNcclIds;
using cc::comm::nccl_id_count;
using cc::comm::nccl_ids_to_make;
using cc::comm::read_nccl_ids;

TEST_CASE("one NCCL id up to CC_NCCL_RANKS_PER_ID ranks, then one per that many") {
  CHECK(nccl_id_count(1, 128) == 1);
  CHECK(nccl_id_count(128, 128) == 1);
  CHECK(nccl_id_count(129, 128) == 2);
  CHECK(nccl_id_count(1024, 128) == 8);
  CHECK(nccl_id_count(1025, 128) == 9);
  CHECK(nccl_id_count(4, 1) == 4);
  CHECK(nccl_id_count(3, 2) == 2);
  // 131,072 ranks at 128 a root would be 1,024 ids: the rendezvous carries 64.
  CHECK(nccl_id_count(131072, 128) == kMaxNcclIds);
  CHECK(nccl_id_count(1 << 30, 1) == kMaxNcclIds);
}

TEST_CASE("each id is made by the first rank of the group its NCCL root serves") {
  using cc::comm::nccl_id_maker;
  // 10 ranks, 4 roots: NCCL gives the first 10 % 4 = 2 roots 3 ranks, the rest 2.
  CHECK(nccl_id_maker(0, 10, 4) == 0);
  CHECK(nccl_id_maker(1, 10, 4) == 3);
  CHECK(nccl_id_maker(2, 10, 4) == 6);
  CHECK(nccl_id_maker(3, 10, 4) == 8);
  // Even groups: 131,072 ranks over 64 roots, 2,048 each.
  CHECK(nccl_id_maker(63, 131072, 64) == 63 * 2048);
  CHECK(nccl_id_maker(0, 1, 1) == 0);
}

TEST_CASE("the ranks that make ids: rank 0 always, the other roots past the threshold") {
  using cc::comm::nccl_id_made_by;
  for (int rank = 0; rank < 300; ++rank) {
    INFO("rank " << rank);
    CHECK(nccl_id_made_by(rank, 300, 1000) == (rank == 0 ? 0 : -1));  // below: rank 0's only
  }
  if (cc::comm::nccl_init_rank_scalable() == nullptr) return;  // NCCL before 2.23: one id
  // 300 ranks at 128 a root: 3 ids, made by ranks 0, 100 and 200.
  int makers = 0;
  for (int rank = 0; rank < 300; ++rank) {
    INFO("rank " << rank);
    const int made = nccl_id_made_by(rank, 300, 128);
    CHECK(made == (rank % 100 == 0 ? rank / 100 : -1));
    makers += made >= 0 ? 1 : 0;
  }
  CHECK(makers == 3);
  CHECK(nccl_id_made_by(3, 4, 1) == 3);  // forced on: every rank roots one
}

TEST_CASE("the NCCL linked here has the scalable init, so its count is made") {
  int version = 0;
  REQUIRE(ncclGetVersion(&version) == ncclSuccess);
  INFO("NCCL " << version);
  if (version < 22300) {  // before 2.23: one id, whatever the setting
    CHECK(cc::comm::nccl_init_rank_scalable() == nullptr);
    CHECK(nccl_ids_to_make(4, 1) == 1);
    return;
  }
  CHECK(cc::comm::nccl_init_rank_scalable() != nullptr);
  CHECK(nccl_ids_to_make(4, 1) == 4);
  CHECK(nccl_ids_to_make(4, 128) == 1);
}

TEST_CASE("the rendezvous's bytes read back as the same ids, at most one per rank") {
  std::vector<uint8_t> bytes(3 * sizeof(ncclUniqueId));
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<uint8_t>(i / sizeof(ncclUniqueId) + 1);
  std::vector<ncclUniqueId> ids;
  REQUIRE(read_nccl_ids(bytes, 8, "the rendezvous", &ids).ok());
  REQUIRE(ids.size() == 3);
  CHECK(ids[0].internal[0] == 1);
  CHECK(ids[2].internal[sizeof(ncclUniqueId) - 1] == 3);
  // A recovery's ids were made for the old size: a smaller world keeps the first.
  REQUIRE(read_nccl_ids(bytes, 2, "the rendezvous", &ids).ok());
  CHECK(ids.size() == 2);
  CHECK(ids[1].internal[0] == 2);
}

TEST_CASE("bytes that are not whole ids are the rendezvous's error, in words") {
  std::vector<ncclUniqueId> ids;
  for (size_t size :
       {size_t{0}, size_t{127}, size_t{129}, size_t{kMaxNcclIds + 1} * sizeof(ncclUniqueId)}) {
    const std::vector<uint8_t> bytes(size, 7);
    const cc::Status s = read_nccl_ids(bytes, 4, "rank 3 (host a): the rendezvous at b:1", &ids);
    CHECK(s.code == CC_ERR_RENDEZVOUS);
    CHECK_THAT(s.message, Catch::Contains("rank 3 (host a): the rendezvous at b:1 handed out NCCL "
                                          "ids of " +
                                          std::to_string(size) + " bytes"));
    CHECK_THAT(s.message, Catch::Contains("same version"));
  }
}
