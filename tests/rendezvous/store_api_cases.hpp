// Cases of the store's C API that hold on any rendezvous a store address can
// name: cc's own server (test_store.cpp) and etcd (test_store_api_etcd.cpp)
// run the same ones.
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "cc/cc.h"

namespace cc::test {

// Where the cases run: a new connection to one job's store on each call
// (with a 5 s timeout), and how the store's messages name the rendezvous.
struct StoreApiTarget {
  std::function<cc_store_t()> connect;
  std::string where;
};

inline long long store_ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t)
      .count();
}

// Set, get, add and wait; an empty value is a value; a get that waits is
// answered when another connection sets the key.
inline void store_api_case_basics(const StoreApiTarget& t) {
  cc_store_t s = t.connect();
  REQUIRE(cc_store_set(s, "k", "hello", 5) == CC_SUCCESS);
  char buf[16] = {};
  size_t len = 0;
  REQUIRE(cc_store_get(s, "k", buf, sizeof(buf), &len, 0) == CC_SUCCESS);
  CHECK(std::string(buf, len) == "hello");
  CHECK(std::string(cc_last_error()).empty());

  int64_t v = 0;
  REQUIRE(cc_store_add(s, "n", 5, &v) == CC_SUCCESS);
  CHECK(v == 5);
  REQUIRE(cc_store_add(s, "n", -7, &v) == CC_SUCCESS);
  CHECK(v == -2);
  REQUIRE(cc_store_add(s, "n", 0, nullptr) == CC_SUCCESS);

  REQUIRE(cc_store_set(s, "empty", nullptr, 0) == CC_SUCCESS);
  len = 99;
  REQUIRE(cc_store_get(s, "empty", nullptr, 0, &len, 0) == CC_SUCCESS);
  CHECK(len == 0);

  const char* keys[] = {"k", "n", "empty"};
  CHECK(cc_store_wait(s, keys, 3, 1000) == CC_SUCCESS);
  CHECK(cc_store_wait(s, nullptr, 0, 1000) == CC_SUCCESS);

  cc_store_t other = t.connect();
  auto later = std::async(std::launch::async, [other] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return cc_store_set(other, "late", "x", 1);
  });
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(cc_store_get(s, "late", buf, sizeof(buf), &len, 10000) == CC_SUCCESS);
  CHECK(store_ms_since(t0) < 5000);
  CHECK(std::string(buf, len) == "x");
  CHECK(later.get() == CC_SUCCESS);
  CHECK(cc_store_close(other) == CC_SUCCESS);
  CHECK(cc_store_close(s) == CC_SUCCESS);
}

// Timeouts answer near their deadline and name the keys and the rendezvous;
// timeout_ms < 0 takes the store's default deadline (the connection's 5 s).
inline void store_api_case_deadlines(const StoreApiTarget& t) {
  cc_store_t s = t.connect();
  char buf[8];
  size_t len = 0;
  auto t0 = std::chrono::steady_clock::now();
  CHECK(cc_store_get(s, "absent", buf, sizeof(buf), &len, 0) == CC_ERR_TIMEOUT);
  CHECK(store_ms_since(t0) < 2000);
  CHECK_THAT(cc_last_error(), Catch::Contains("'absent'") && Catch::Contains("not set"));

  t0 = std::chrono::steady_clock::now();
  CHECK(cc_store_get(s, "absent", buf, sizeof(buf), &len, 500) == CC_ERR_TIMEOUT);
  const long long elapsed = store_ms_since(t0);
  CHECK(elapsed >= 450);
  CHECK(elapsed < 3000);
  CHECK_THAT(cc_last_error(), Catch::Contains("'absent'") && Catch::Contains("within 500 ms") &&
                                  Catch::Contains("rendezvous at " + t.where));

  REQUIRE(cc_store_set(s, "present", "1", 1) == CC_SUCCESS);
  const char* keys[] = {"present", "missing-one", "missing-two"};
  t0 = std::chrono::steady_clock::now();
  CHECK(cc_store_wait(s, keys, 3, 300) == CC_ERR_TIMEOUT);
  CHECK(store_ms_since(t0) >= 250);
  CHECK(store_ms_since(t0) < 3000);
  CHECK_THAT(cc_last_error(), Catch::Contains("missing-one") && Catch::Contains("missing-two") &&
                                  !Catch::Contains("'present'"));

  cc_store_t other = t.connect();
  auto later = std::async(std::launch::async, [other] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return cc_store_set(other, "soon", "y", 1);
  });
  CHECK(cc_store_get(s, "soon", buf, sizeof(buf), &len, -1) == CC_SUCCESS);
  CHECK(later.get() == CC_SUCCESS);
  CHECK(cc_store_close(other) == CC_SUCCESS);
  CHECK(cc_store_close(s) == CC_SUCCESS);
}

// A buffer too small reports the needed length and is left as it was.
inline void store_api_case_small_buffer(const StoreApiTarget& t) {
  cc_store_t s = t.connect();
  std::vector<unsigned char> value(1000, 0);
  value[500] = 7;
  REQUIRE(cc_store_set(s, "big", value.data(), value.size()) == CC_SUCCESS);
  unsigned char buf[10];
  std::memset(buf, 0x5a, sizeof(buf));
  size_t len = 0;
  CHECK(cc_store_get(s, "big", buf, sizeof(buf), &len, 0) == CC_ERR_BUFFER_TOO_SMALL);
  CHECK(len == 1000);
  CHECK(buf[0] == 0x5a);
  CHECK_THAT(cc_last_error(), Catch::Contains("at least 1000 bytes"));
  std::vector<unsigned char> right(len);
  CHECK(cc_store_get(s, "big", right.data(), right.size(), &len, 0) == CC_SUCCESS);
  CHECK(right == value);
  CHECK(cc_store_close(s) == CC_SUCCESS);
}

}  // namespace cc::test
