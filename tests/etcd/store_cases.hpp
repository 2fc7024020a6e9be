// The store's semantics as cases that run against any rendezvous backend:
// cc's own server and etcd get the same cases, and must pass them alike.
// Each case is a function of a StoreBackend, called from a TEST_CASE per
// backend (test_store_backends.cpp).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "rendezvous/client.hpp"

namespace cc::test {

class StoreBackend {
 public:
  virtual ~StoreBackend() = default;
  virtual std::string name() const = 0;
  // A new connection to the store of `job`; REQUIREs success.
  virtual std::unique_ptr<cc::rv::Client> connect(const std::string& job) = 0;
  // Compare-and-set on a connection of this backend; false when the backend
  // has none (then the compare-set cases are left out).
  virtual bool has_compare_set() const { return false; }
  virtual cc::Status compare_set(cc::rv::Client& c, const std::string& key,
                                 const std::vector<uint8_t>* expected,
                                 std::span<const uint8_t> desired, bool* swapped) {
    (void)c, (void)key, (void)expected, (void)desired, (void)swapped;
    return cc::make_status(CC_ERR_INVALID_USAGE, "no compare-set");
  }
};

void store_case_set_get_add_wait(StoreBackend& b);
void store_case_deadlines_and_words(StoreBackend& b);
void store_case_values(StoreBackend& b);
void store_case_add_refusals(StoreBackend& b);
void store_case_delete(StoreBackend& b);
void store_case_jobs_apart(StoreBackend& b);
void store_case_concurrent_adders(StoreBackend& b);
void store_case_add_with_set_and_delete(StoreBackend& b);
void store_case_add_wakes_waiters(StoreBackend& b);
void store_case_concurrent_adds_exact(StoreBackend& b);
void store_case_compare_set(StoreBackend& b);
void store_case_racing_compare_sets(StoreBackend& b);

}  // namespace cc::test
