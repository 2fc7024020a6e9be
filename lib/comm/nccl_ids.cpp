#include "lib/comm/nccl_ids.hpp"

#include <algorithm>
#include <cstring>

#include "lib/core/nccl_symbol.hpp"

namespace cc::comm {

int nccl_id_count(int nranks, int ranks_per_id) {
  if (ranks_per_id < 1 || nranks <= ranks_per_id) return 1;
  const long long wanted = (static_cast<long long>(nranks) + ranks_per_id - 1) / ranks_per_id;
  return wanted > kMaxNcclIds ? kMaxNcclIds : static_cast<int>(wanted);
}

InitRankScalableFn nccl_init_rank_scalable() {
  static const auto fn =
      reinterpret_cast<InitRankScalableFn>(core::nccl_symbol("ncclCommInitRankScalable"));
  return fn;
}

int nccl_ids_to_make(int nranks, int ranks_per_id) {
  return nccl_init_rank_scalable() != nullptr ? nccl_id_count(nranks, ranks_per_id) : 1;
}

int nccl_id_maker(int i, int nranks, int count) {
  return i * (nranks / count) + std::min(i, nranks % count);
}

int nccl_id_made_by(int rank, int nranks, int ranks_per_id) {
  const int count = nccl_ids_to_make(nranks, ranks_per_id);
  for (int i = 0; i < count; ++i)
    if (nccl_id_maker(i, nranks, count) == rank) return i;
  return -1;
}

Status make_nccl_ids(const core::Core& c, int count, std::vector<uint8_t>* bytes) {
  bytes->clear();
  bytes->reserve(static_cast<size_t>(count) * sizeof(ncclUniqueId));
  for (int i = 0; i < count; ++i) {
    ncclUniqueId id;
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
      return core::nccl_failure("ncclGetUniqueId", c, r);
    bytes->insert(bytes->end(), id.internal, id.internal + sizeof id.internal);
  }
  return Status::success();
}

Status read_nccl_ids(const std::vector<uint8_t>& bytes, int nranks, const std::string& from,
                     std::vector<ncclUniqueId>* ids) {
  constexpr size_t one = sizeof(ncclUniqueId);
  const size_t count = bytes.size() / one;
  if (bytes.size() % one != 0 || count < 1 || count > kMaxNcclIds) {
    return make_status(CC_ERR_RENDEZVOUS, from + " handed out NCCL ids of " +
                                              std::to_string(bytes.size()) + " bytes, not 1 to " +
                                              std::to_string(kMaxNcclIds) + " ids of " +
                                              std::to_string(one) +
                                              " bytes; is it a cc-rendezvous of the same version?");
  }
  const size_t used =
      nranks > 0 && count > static_cast<size_t>(nranks) ? static_cast<size_t>(nranks) : count;
  ids->resize(used);
  for (size_t i = 0; i < used; ++i) std::memcpy((*ids)[i].internal, bytes.data() + i * one, one);
  return Status::success();
}

}  // namespace cc::comm
