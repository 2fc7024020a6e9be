// The NCCL ids a communicator is made from, as the bytes the rendezvous
// hands out. One id (ncclCommInitRankConfig: NCCL's bootstrap has one root)
// up to CC_NCCL_RANKS_PER_ID ranks; past that, ceil(ranks / per) ids end to
// end (at most kMaxNcclIds), and ncclCommInitRankScalable spreads NCCL's
// bootstrap over that many roots. Each id is made by the first rank of the
// group of ranks its root serves (nccl_id_maker), so the roots' listening
// threads are spread over the job's hosts as NCCL's are; the rendezvous
// hands every rank all of them in rank order (rv::rules::JoinCheck). Every
// rank reads the count from the bytes, so the ranks need not agree on the
// setting: where they differ, more ranks make ids, all handed out alike.
// A recovery's ids are all made by the one survivor the rendezvous asks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nccl.h>

#include "common/status.hpp"
#include "lib/core/core.hpp"

namespace cc::comm {

// The rendezvous carries at most 8 KiB of ids (rv::kMaxUniqueIdBytes).
inline constexpr int kMaxNcclIds = 64;

// How many ids a communicator of `nranks` is made from.
int nccl_id_count(int nranks, int ranks_per_id);

// ncclCommInitRankScalable of the NCCL loaded (2.23 and later), looked up
// so that libcc still loads with an older one; null there.
using InitRankScalableFn = ncclResult_t (*)(ncclComm_t*, int, int, int, ncclUniqueId*,
                                            ncclConfig_t*);
InitRankScalableFn nccl_init_rank_scalable();

// nccl_id_count, or 1 where the NCCL loaded has no scalable init.
int nccl_ids_to_make(int nranks, int ranks_per_id);

// The rank that makes id `i` of `count` for a communicator of `nranks`: the
// first rank of the i-th group, as NCCL's bootstrap divides the ranks among
// its roots (nranks / count each, the first nranks % count one more).
int nccl_id_maker(int i, int nranks, int count);

// Which of the communicator's ids `rank` makes (rank 0 the first), or -1.
int nccl_id_made_by(int rank, int nranks, int ranks_per_id);

// `count` new ids (ncclGetUniqueId each) end to end in *bytes; a failure is
// told as c's.
Status make_nccl_ids(const core::Core& c, int count, std::vector<uint8_t>* bytes);

// The ids in `bytes`, as the rendezvous handed them out, at most one per
// rank of the `nranks` (a recovery's ids were made before its size was
// known; every rank keeps the same first ones); CC_ERR_RENDEZVOUS when they
// are not a whole number of ids (1..kMaxNcclIds). `from` names where they
// came from.
Status read_nccl_ids(const std::vector<uint8_t>& bytes, int nranks, const std::string& from,
                     std::vector<ncclUniqueId>* ids);

}  // namespace cc::comm
