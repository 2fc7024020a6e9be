#include "tests/etcd/store_cases.hpp"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <thread>

namespace cc::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

long long ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t).count();
}

std::vector<uint8_t> bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}
std::string text(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

void must(const cc::Status& s) {
  INFO(s.message);
  REQUIRE(s.ok());
}

using Connections = std::vector<std::unique_ptr<cc::rv::Client>>;

Connections connections(StoreBackend& b, const std::string& job, int n) {
  Connections conns;
  for (int i = 0; i < n; ++i) conns.push_back(b.connect(job));
  return conns;
}

// One thread a connection, all let go at once, each running body(i, its
// connection); returns when every one has finished.
void all_at_once(const Connections& conns,
                 const std::function<void(size_t, cc::rv::Client&)>& body) {
  std::atomic<size_t> ready{0};
  std::vector<std::thread> threads;
  for (size_t i = 0; i < conns.size(); ++i)
    threads.emplace_back([&, i] {
      ++ready;
      while (ready.load() < conns.size()) std::this_thread::yield();
      body(i, *conns[i]);
    });
  for (auto& t : threads) t.join();
}

}  // namespace

void store_case_set_get_add_wait(StoreBackend& b) {
  auto s = b.connect("basics");
  must(s->set("k", bytes("hello")));
  std::vector<uint8_t> v;
  must(s->get("k", &v, 0));
  CHECK(text(v) == "hello");

  int64_t n = 0;
  must(s->add("n", 5, &n));
  CHECK(n == 5);
  must(s->add("n", -7, &n));
  CHECK(n == -2);
  must(s->add("n", 0, nullptr));
  must(s->get("n", &v, 0));
  CHECK(text(v) == "-2");  // add keeps decimal text: a get reads it

  // an empty value is a value
  must(s->set("empty", {}));
  v = bytes("x");
  must(s->get("empty", &v, 0));
  CHECK(v.empty());

  must(s->wait({"k", "n", "empty"}, 1000));
  must(s->wait({"k", "k"}, 0));  // the same key twice, already there

  // a get that waits is answered when another connection sets the key
  auto other = b.connect("basics");
  auto later = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds(200));
    return other->set("late", bytes("x"));
  });
  const auto t0 = Clock::now();
  must(s->get("late", &v, 10000));
  CHECK(ms_since(t0) < 5000);
  CHECK(text(v) == "x");
  must(later.get());

  // a wait for several keys returns when the last of them is set
  auto setter = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds(100));
    (void)other->set("w1", bytes("1"));
    std::this_thread::sleep_for(milliseconds(100));
    return other->set("w2", bytes("2"));
  });
  must(s->wait({"w1", "k", "w2"}, 10000));
  must(setter.get());
}

void store_case_deadlines_and_words(StoreBackend& b) {
  auto s = b.connect("deadlines");
  std::vector<uint8_t> v;

  auto t0 = Clock::now();
  cc::Status st = s->get("absent", &v, 0);
  CHECK(st.code == CC_ERR_TIMEOUT);
  CHECK(ms_since(t0) < 1000);
  CHECK_THAT(st.message, Catch::Contains("'absent'") && Catch::Contains("not set") &&
                             Catch::Contains("'deadlines'"));

  t0 = Clock::now();
  st = s->get("absent", &v, 500);
  const long long elapsed = ms_since(t0);
  CHECK(st.code == CC_ERR_TIMEOUT);
  CHECK(elapsed >= 450);
  CHECK(elapsed < 3000);
  CHECK_THAT(st.message, Catch::Contains("'absent'") && Catch::Contains("within 500 ms"));

  must(s->set("present", bytes("1")));
  t0 = Clock::now();
  st = s->wait({"present", "missing-one", "missing-two"}, 300);
  CHECK(st.code == CC_ERR_TIMEOUT);
  CHECK(ms_since(t0) >= 250);
  CHECK(ms_since(t0) < 3000);
  CHECK_THAT(st.message, Catch::Contains("missing-one") && Catch::Contains("missing-two") &&
                             !Catch::Contains("'present'"));

  st = s->wait({"present", "missing-one"}, 0);
  CHECK(st.code == CC_ERR_TIMEOUT);
  CHECK_THAT(st.message, Catch::Contains("without waiting") && Catch::Contains("missing-one"));
}

void store_case_values(StoreBackend& b) {
  auto s = b.connect("values");
  std::vector<uint8_t> binary(256);
  for (size_t i = 0; i < binary.size(); ++i) binary[i] = static_cast<uint8_t>(i);
  must(s->set("binary", binary));
  std::vector<uint8_t> v;
  must(s->get("binary", &v, 0));
  CHECK(v == binary);

  std::vector<uint8_t> big(1u << 20, 0x5a);  // the store's largest value
  big[12345] = 7;
  must(s->set("big", big));
  must(s->get("big", &v, 0));
  CHECK(v == big);

  must(s->set("big", bytes("small again")));  // a set replaces
  must(s->get("big", &v, 0));
  CHECK(text(v) == "small again");

  const std::string odd = "a key/with slashes and spaces \xe2\x82\xac";
  must(s->set(odd, bytes("ok")));
  must(s->get(odd, &v, 0));
  CHECK(text(v) == "ok");
}

void store_case_add_refusals(StoreBackend& b) {
  auto s = b.connect("add-refusals");
  must(s->set("text", bytes("not a number")));
  int64_t n = 0;
  cc::Status st = s->add("text", 1, &n);
  CHECK(st.code == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(st.message, Catch::Contains("'text'") && Catch::Contains("not a decimal integer"));

  must(s->add("big", INT64_MAX, &n));
  st = s->add("big", 1, &n);
  CHECK(st.code == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(st.message, Catch::Contains("overflows a 64-bit integer"));
  std::vector<uint8_t> v;
  must(s->get("big", &v, 0));
  CHECK(text(v) == std::to_string(INT64_MAX));  // unchanged
}

void store_case_delete(StoreBackend& b) {
  auto s = b.connect("deletes");
  must(s->del("never-set"));  // absent: success
  must(s->set("k", bytes("v")));
  must(s->del("k"));
  std::vector<uint8_t> v;
  CHECK(s->get("k", &v, 0).code == CC_ERR_TIMEOUT);
  int64_t n = 0;
  must(s->add("counter", 10, &n));
  must(s->del("counter"));
  must(s->add("counter", 3, &n));
  CHECK(n == 3);  // starts again from nothing
}

void store_case_jobs_apart(StoreBackend& b) {
  auto a = b.connect("job-a");
  auto c = b.connect("job-a/kv/x");  // a job id that looks like another job's keys
  must(a->set("x/kv/k", bytes("from a")));
  must(c->set("k", bytes("from c")));
  std::vector<uint8_t> v;
  must(a->get("x/kv/k", &v, 0));
  CHECK(text(v) == "from a");
  must(c->get("k", &v, 0));
  CHECK(text(v) == "from c");
  CHECK(c->get("x/kv/k", &v, 0).code == CC_ERR_TIMEOUT);
  CHECK(a->get("k", &v, 0).code == CC_ERR_TIMEOUT);
}

void store_case_concurrent_adders(StoreBackend& b) {
  constexpr int kAdders = 16;
  constexpr int kEach = 10;
  std::vector<std::unique_ptr<cc::rv::Client>> conns;
  for (int i = 0; i < kAdders; ++i) conns.push_back(b.connect("adders"));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kAdders; ++i)
    threads.emplace_back([&, i] {
      for (int j = 0; j < kEach; ++j)
        if (!conns[static_cast<size_t>(i)]->add("sum", 100, nullptr).ok()) ++failures;
    });
  for (auto& t : threads) t.join();
  CHECK(failures == 0);
  std::vector<uint8_t> v;
  must(conns[0]->get("sum", &v, 0));
  CHECK(text(v) == std::to_string(kAdders * kEach * 100));
}

void store_case_add_with_set_and_delete(StoreBackend& b) {
  auto s = b.connect("add-set-delete");
  std::vector<uint8_t> v;
  int64_t n = 0;
  // a decimal put by set is where adds start
  must(s->set("c", bytes("5")));
  must(s->add("c", 2, &n));
  CHECK(n == 7);
  must(s->add("c", 1, &n));
  CHECK(n == 8);
  must(s->get("c", &v, 0));
  CHECK(text(v) == "8");
  // adds of 1 and of other deltas mixed, and a total of 0 is still a value
  must(s->add("mixed", 1, &n));
  must(s->add("mixed", -3, &n));
  CHECK(n == -2);
  must(s->add("mixed", 1, &n));
  must(s->add("mixed", 1, &n));
  CHECK(n == 0);
  must(s->get("mixed", &v, 0));
  CHECK(text(v) == "0");
  must(s->wait({"mixed"}, 0));
  // a set replaces the total, text included, and adds are then refused
  must(s->set("c", bytes("words")));
  must(s->get("c", &v, 0));
  CHECK(text(v) == "words");
  cc::Status st = s->add("c", 1, &n);
  CHECK(st.code == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(st.message, Catch::Contains("'c'") && Catch::Contains("not a decimal integer") &&
                             Catch::Contains("set by set"));
  // a delete resets: the next add starts from nothing
  must(s->del("c"));
  CHECK(s->get("c", &v, 0).code == CC_ERR_TIMEOUT);
  CHECK(s->wait({"c"}, 0).code == CC_ERR_TIMEOUT);
  must(s->add("c", 1, &n));
  CHECK(n == 1);
  // overflow downwards is refused too, the total unchanged
  must(s->add("low", INT64_MIN, &n));
  st = s->add("low", -1, &n);
  CHECK(st.code == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(st.message, Catch::Contains(std::to_string(INT64_MIN) + " + -1") &&
                             Catch::Contains("overflows a 64-bit integer"));
  must(s->add("low", 1, &n));
  CHECK(n == INT64_MIN + 1);
}

void store_case_add_wakes_waiters(StoreBackend& b) {
  auto s = b.connect("add-wakes");
  auto other = b.connect("add-wakes");
  auto adder = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds(200));
    int64_t n = 0;
    cc::Status st = other->add("made-by-add", 4, &n);
    if (st.ok()) st = other->add("waited-by-add", 1, &n);
    return st;
  });
  std::vector<uint8_t> v;
  const auto t0 = Clock::now();
  must(s->get("made-by-add", &v, 10000));  // a get that waits is answered with the total
  CHECK(text(v) == "4");
  must(s->wait({"waited-by-add"}, 10000));
  CHECK(ms_since(t0) < 5000);
  must(adder.get());
}

void store_case_concurrent_adds_exact(StoreBackend& b) {
  constexpr int kAdders = 128;
  const Connections conns = connections(b, "exact-adds", kAdders);
  std::atomic<int> failures{0};
  std::vector<int64_t> results(kAdders, 0);
  all_at_once(conns, [&](size_t i, cc::rv::Client& c) {
    if (!c.add("arrived", 1, &results[i]).ok()) ++failures;
  });
  CHECK(failures == 0);
  std::sort(results.begin(), results.end());
  for (int i = 0; i < kAdders; ++i) CHECK(results[static_cast<size_t>(i)] == i + 1);
  std::vector<uint8_t> v;
  must(conns[0]->get("arrived", &v, 0));
  CHECK(text(v) == std::to_string(kAdders));
}

void store_case_compare_set(StoreBackend& b) {
  if (!b.has_compare_set()) return;
  auto s = b.connect("cas");
  bool swapped = false;
  // expected NULL: only when absent
  must(b.compare_set(*s, "leader", nullptr, bytes("rank-3"), &swapped));
  CHECK(swapped);
  must(b.compare_set(*s, "leader", nullptr, bytes("rank-5"), &swapped));
  CHECK_FALSE(swapped);
  std::vector<uint8_t> v;
  must(s->get("leader", &v, 0));
  CHECK(text(v) == "rank-3");
  // on the value
  const auto wrong = bytes("rank-5");
  must(b.compare_set(*s, "leader", &wrong, bytes("rank-7"), &swapped));
  CHECK_FALSE(swapped);
  const auto right = bytes("rank-3");
  must(b.compare_set(*s, "leader", &right, bytes("rank-7"), &swapped));
  CHECK(swapped);
  must(s->get("leader", &v, 0));
  CHECK(text(v) == "rank-7");
  // an expected value on an absent key never matches, an empty one matches an empty value
  const auto empty = bytes("");
  must(b.compare_set(*s, "nothing", &empty, bytes("x"), &swapped));
  CHECK_FALSE(swapped);
  must(s->set("blank", {}));
  must(b.compare_set(*s, "blank", &empty, bytes("filled"), &swapped));
  CHECK(swapped);
  // a key made by add is not absent
  int64_t n = 0;
  must(s->add("counted", 1, &n));
  must(b.compare_set(*s, "counted", nullptr, bytes("x"), &swapped));
  CHECK_FALSE(swapped);
  must(s->get("counted", &v, 0));
  CHECK(text(v) == "1");
  // a compare-set wakes a waiting get (connected here: connect REQUIREs,
  // and Catch's macros are not thread-safe)
  auto w = b.connect("cas");
  auto waiter = std::async(std::launch::async, [&w] {
    std::vector<uint8_t> got;
    cc::Status st = w->get("woken", &got, 10000);
    return std::make_pair(st, text(got));
  });
  std::this_thread::sleep_for(milliseconds(200));
  must(b.compare_set(*s, "woken", nullptr, bytes("yes"), &swapped));
  auto [st, got] = waiter.get();
  must(st);
  CHECK(got == "yes");
}

void store_case_racing_compare_sets(StoreBackend& b) {
  if (!b.has_compare_set()) return;
  constexpr int kRacers = 64;
  const Connections conns = connections(b, "race", kRacers);
  std::atomic<int> winners{0};
  std::atomic<int> errors{0};
  std::vector<int> won(kRacers, 0);
  all_at_once(conns, [&](size_t i, cc::rv::Client& c) {
    bool swapped = false;
    const std::string me = "racer-" + std::to_string(i);
    cc::Status st = b.compare_set(c, "winner", nullptr, bytes(me), &swapped);
    if (!st.ok()) ++errors;
    if (swapped) {
      ++winners;
      won[i] = 1;
    }
  });
  CHECK(errors == 0);
  CHECK(winners == 1);
  std::vector<uint8_t> v;
  must(conns[0]->get("winner", &v, 0));
  for (int i = 0; i < kRacers; ++i)
    if (won[static_cast<size_t>(i)]) CHECK(text(v) == "racer-" + std::to_string(i));

  // then 64 racing to replace the winner's value: again exactly one
  winners = 0;
  all_at_once(conns, [&](size_t i, cc::rv::Client& c) {
    bool swapped = false;
    if (b.compare_set(c, "winner", &v, bytes("next-" + std::to_string(i)), &swapped).ok() &&
        swapped)
      ++winners;
  });
  CHECK(winners == 1);
}

}  // namespace cc::test
