// The key-value store of a job on a rendezvous (gloo's Store, PyTorch's
// TCPStore): what cc_store_* and a communicator's own setup keys use. Each
// backend implements it (rendezvous/frame_client.hpp over cc's server,
// rendezvous/etcd/backend.hpp over etcd); rendezvous/factory picks one from
// the address. Keys live in the job's namespace. Every call has a deadline;
// calls may come from several threads at once.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"

namespace cc::rv {

class Store {
 public:
  virtual ~Store() = default;

  // Keys: an empty key, or one over Limits::max_key bytes, is
  // CC_ERR_INVALID_ARGUMENT before anything is sent; the store stays usable.
  virtual Status set(const std::string& key, std::span<const uint8_t> value) = 0;
  // Waits up to timeout_ms for the key (0 = no wait). A call that waits
  // gives the rendezvous 250 ms past its timeout for its answer to arrive,
  // then returns CC_ERR_TIMEOUT saying that it did not answer.
  virtual Status get(const std::string& key, std::vector<uint8_t>* value, uint32_t timeout_ms) = 0;
  virtual Status add(const std::string& key, int64_t delta, int64_t* result) = 0;
  // Waits up to timeout_ms until every key exists; the message names those
  // still missing.
  virtual Status wait(const std::vector<std::string>& keys, uint32_t timeout_ms) = 0;
  // Deleting an absent key succeeds.
  virtual Status del(const std::string& key) = 0;
  // Sets key to desired when its value equals *expected (expected null: only
  // when the key is absent); *swapped says whether it did.
  virtual Status compare_set(const std::string& key, const std::vector<uint8_t>* expected,
                             std::span<const uint8_t> desired, bool* swapped) = 0;

  // Where the store is, for messages: "host:port", "etcd://host:port,...".
  virtual const std::string& endpoint() const = 0;
};

// A job id a rendezvous takes: at most Limits::max_key bytes. Else
// CC_ERR_INVALID_ARGUMENT naming `named` ("CC_JOB_ID", "config.job_id"), the
// id's first bytes and the limit.
Status check_job_id(std::string_view job_id, std::string_view named);

}  // namespace cc::rv
