// The bytes the store limits count for a key (rendezvous/server_core) against
// what the heap says the keys hold: not far below it, nor far over. The heap's
// figure is glibc's (mallinfo2); an allocator that gives none (a sanitizer's)
// makes this test skipped (exit 77, with the reason), not passed: nothing was
// measured. A plain program, not a Catch2 case, for that exit status.
#include <malloc.h>

#include <cstdio>
#include <string>
#include <vector>

#include "rendezvous/server_core.hpp"

namespace rv = cc::rv;
using namespace std::chrono_literals;

namespace {

// Keeps nothing the core sends; counts its errors.
class QuietSink : public rv::Sink {
 public:
  void send(rv::ConnId, uint32_t, const rv::Message& m) override {
    if (std::holds_alternative<rv::Error>(m)) ++errors;
  }
  void close(rv::ConnId, const std::string&) override {}
  size_t errors = 0;
};

// Whether the heap's in-use figure grows by what a program allocates.
bool heap_figures_given() {
  constexpr size_t kBlocks = 4096, kBlock = 256;
  const size_t before = mallinfo2().uordblks;
  std::vector<std::vector<char>> blocks(kBlocks, std::vector<char>(kBlock, 1));
  const size_t after = mallinfo2().uordblks;
  return after > before && after - before >= kBlocks * kBlock;
}

}  // namespace

int main() {
  if (!heap_figures_given()) {
    std::printf(
        "SKIP the allocator gives no heap figures (mallinfo2): what a key holds is not "
        "measured here\n");
    return 77;
  }
  constexpr size_t k = rv::ServerCore::kKeyOverhead;
  QuietSink sink;
  rv::ServerCore core{rv::ServerOptions{}, sink};
  const rv::Clock::time_point now = rv::Clock::time_point{} + 1000s;
  if (!core.on_connect(1, "10.1.0.1:1", now)) {
    std::printf("FAIL the core refused the connection\n");
    return 1;
  }
  core.on_bytes(1, rv::encode_frame(1, rv::Hello{"store", "host", 1, "test"}), now);
  const auto counted = [&] { return core.metrics(now).store_bytes; };

  int rc = 0;
  struct Shape {
    size_t key, value;
  };
  for (const Shape s : {Shape{8, 8}, Shape{40, 100}}) {
    constexpr int kKeys = 20000;
    const std::vector<uint8_t> value(s.value, 7);
    const size_t counted_before = counted();
    const size_t heap_before = mallinfo2().uordblks;
    for (int i = 0; i < kKeys; ++i) {
      std::string key = std::to_string(i);
      key.resize(s.key, 'k');
      core.on_bytes(1, rv::encode_frame(1, rv::Set{key, value}), now);
    }
    const size_t heap_after = mallinfo2().uordblks;
    const size_t count = counted() - counted_before;
    const size_t heap = heap_after > heap_before ? heap_after - heap_before : 0;
    std::printf(
        "keys of %zu bytes, values of %zu: the heap grew by %zu B a key, the store "
        "counts %zu\n",
        s.key, s.value, heap / kKeys, count / kKeys);
    if (count != kKeys * (s.key + s.value + k)) {
      std::printf("FAIL the store counts %zu bytes, not %zu\n", count,
                  kKeys * (s.key + s.value + k));
      rc = 1;
    }
    if (count * 10 < heap * 8) {
      std::printf("FAIL the count is below 80%% of what the heap grew by\n");
      rc = 1;
    }
    if (count > heap * 2) {
      std::printf("FAIL the count is over twice what the heap grew by\n");
      rc = 1;
    }
  }
  if (sink.errors != 0) {
    std::printf("FAIL the core answered %zu errors\n", sink.errors);
    rc = 1;
  }
  if (rc == 0) std::printf("PASS\n");
  return rc;
}
