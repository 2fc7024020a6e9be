// The store's semantics as cases that run against every way of reaching
// cc's server: in memory, with its store kept in etcd, and through an
// etcd:// address; each must pass them alike.
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
  bool has_compare_set() const { return true; }
  cc::Status compare_set(cc::rv::Client& c, const std::string& key,
                         const std::vector<uint8_t>* expected, std::span<const uint8_t> desired,
                         bool* swapped) {
    return c.compare_set(key, expected, desired, swapped);
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
