// Point-to-point around a ring, a group mixing operations, barriers,
// communicator queries, split into even/odd and 1-rank communicators, and
// abort of a communicator.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "tests/gpu/dtype_codec.hpp"
#include "tests/gpu/gpu_env.hpp"

using namespace cc::test;

namespace {

std::vector<uint8_t> ints(const std::vector<int32_t>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(int32_t));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}
std::vector<int32_t> as_ints(const std::vector<uint8_t>& b) {
  std::vector<int32_t> v(b.size() / sizeof(int32_t));
  if (!v.empty()) std::memcpy(v.data(), b.data(), b.size());
  return v;
}
std::vector<int32_t> pattern(int rank, size_t n) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = rank * 1000003 + static_cast<int32_t>(i % 1000);
  return v;
}

#define CC_OK(call)                            \
  do {                                         \
    cc_result_t cc_ok_r_ = (call);             \
    INFO(#call << ": " << describe(cc_ok_r_)); \
    CHECK(cc_ok_r_ == CC_SUCCESS);             \
  } while (0)

}  // namespace

TEST_CASE("the world communicator knows its rank, size and device") {
  int rank = -1, size = 0, device = -1, current = -2;
  CC_OK(cc_comm_rank(world(), &rank));
  CC_OK(cc_comm_size(world(), &size));
  CC_OK(cc_comm_device(world(), &device));
  cudaGetDevice(&current);
  CHECK(rank == world_rank());
  CHECK(size >= 1);
  CHECK(device == current);  // init leaves the chosen device current
  for (const char* var : {"CC_RANK", "RANK", "OMPI_COMM_WORLD_RANK"}) {
    if (const char* v = std::getenv(var)) {
      CHECK(std::stoi(v) == rank);
      break;
    }
  }
}

TEST_CASE("send and recv around a ring, in a group") {
  const int rank = world_rank(), n = world_size();
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  for (size_t count : {size_t{1}, size_t{1001}, (size_t{1} << 20) + 3}) {
    INFO("count " << count);
    DeviceBuffer send(count * 4), recv(count * 4);
    send.upload(ints(pattern(rank, count)));
    CC_OK(cc_group_start());
    CC_OK(cc_send(send.get(), count, CC_INT32, next, world(), cc_stream()));
    CC_OK(cc_recv(recv.get(), count, CC_INT32, prev, world(), cc_stream()));
    CC_OK(cc_group_end());
    CHECK(sync_stream());
    CHECK(as_ints(recv.download(count * 4)) == pattern(prev, count));
  }
}

TEST_CASE("send and recv in pairs without a group") {
  const int rank = world_rank(), n = world_size();
  if (n % 2 != 0) return;  // every rank returns: no collective is skipped by one rank only
  const int peer = rank ^ 1;
  const size_t count = 4099;
  DeviceBuffer send(count * 4), recv(count * 4);
  send.upload(ints(pattern(rank, count)));
  if (rank % 2 == 0) {
    CC_OK(cc_send(send.get(), count, CC_INT32, peer, world(), cc_stream()));
    CC_OK(cc_recv(recv.get(), count, CC_INT32, peer, world(), cc_stream()));
  } else {
    CC_OK(cc_recv(recv.get(), count, CC_INT32, peer, world(), cc_stream()));
    CC_OK(cc_send(send.get(), count, CC_INT32, peer, world(), cc_stream()));
  }
  CHECK(sync_stream());
  CHECK(as_ints(recv.download(count * 4)) == pattern(peer, count));
}

TEST_CASE("a group mixing allreduce, broadcast, allgather and send/recv") {
  const int rank = world_rank(), n = world_size();
  const size_t count = 777;
  DeviceBuffer sum(count * 4), bcast(count * 4), gathered(count * 4 * static_cast<size_t>(n)),
      mine(count * 4), ring(count * 4);
  sum.upload(ints(std::vector<int32_t>(count, rank + 1)));
  bcast.upload(ints(rank == 0 ? pattern(0, count) : std::vector<int32_t>(count, -1)));
  mine.upload(ints(pattern(rank, count)));
  CC_OK(cc_group_start());
  CC_OK(cc_allreduce(sum.get(), sum.get(), count, CC_INT32, CC_SUM, world(), cc_stream()));
  CC_OK(cc_broadcast(bcast.get(), bcast.get(), count, CC_INT32, 0, world(), cc_stream()));
  CC_OK(cc_allgather(mine.get(), gathered.get(), count, CC_INT32, world(), cc_stream()));
  CC_OK(cc_send(mine.get(), count, CC_INT32, (rank + 1) % n, world(), cc_stream()));
  CC_OK(cc_recv(ring.get(), count, CC_INT32, (rank + n - 1) % n, world(), cc_stream()));
  CC_OK(cc_group_end());
  CHECK(sync_stream());
  CHECK(as_ints(sum.download(count * 4)) == std::vector<int32_t>(count, n * (n + 1) / 2));
  CHECK(as_ints(bcast.download(count * 4)) == pattern(0, count));
  const auto all = as_ints(gathered.download(count * 4 * static_cast<size_t>(n)));
  for (int r = 0; r < n; ++r) {
    INFO("allgather block of rank " << r);
    CHECK(std::vector<int32_t>(all.begin() + r * static_cast<long>(count),
                               all.begin() + (r + 1) * static_cast<long>(count)) ==
          pattern(r, count));
  }
  CHECK(as_ints(ring.download(count * 4)) == pattern((rank + n - 1) % n, count));
}

TEST_CASE("nested groups launch at the outermost end") {
  const int rank = world_rank(), n = world_size();
  DeviceBuffer a(4), b(4);
  a.upload(ints({rank + 1}));
  b.upload(ints({2 * (rank + 1)}));
  CC_OK(cc_group_start());
  CC_OK(cc_group_start());
  CC_OK(cc_allreduce(a.get(), a.get(), 1, CC_INT32, CC_SUM, world(), cc_stream()));
  CC_OK(cc_group_end());
  CC_OK(cc_allreduce(b.get(), b.get(), 1, CC_INT32, CC_MAX, world(), cc_stream()));
  CC_OK(cc_group_end());
  CHECK(sync_stream());
  CHECK(as_ints(a.download(4)) == std::vector<int32_t>{n * (n + 1) / 2});
  CHECK(as_ints(b.download(4)) == std::vector<int32_t>{2 * n});
}

TEST_CASE("barriers on the caller's stream and the default stream") {
  for (int i = 0; i < 20; ++i) CC_OK(cc_barrier(world(), cc_stream()));
  CHECK(sync_stream());
  CC_OK(cc_barrier(world(), nullptr));
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("split into even and odd ranks") {
  const int rank = world_rank(), n = world_size();
  cc_comm_t half = nullptr;
  CC_OK(cc_comm_split(world(), rank % 2, rank, &half, nullptr));
  REQUIRE(half != nullptr);  // every rank gets one: no rank skips what follows
  int hrank = -1, hsize = 0, hdev = -1, wdev = -2;
  CC_OK(cc_comm_rank(half, &hrank));
  CC_OK(cc_comm_size(half, &hsize));
  CC_OK(cc_comm_device(half, &hdev));
  CC_OK(cc_comm_device(world(), &wdev));
  CHECK(hrank == rank / 2);
  CHECK(hsize == (n - rank % 2 + 1) / 2);
  CHECK(hdev == wdev);
  DeviceBuffer v(4);
  v.upload(ints({rank + 1}));
  CC_OK(cc_allreduce(v.get(), v.get(), 1, CC_INT32, CC_SUM, half, cc_stream()));
  CC_OK(cc_barrier(half, cc_stream()));
  CHECK(sync_stream());
  int32_t want = 0;
  for (int r = rank % 2; r < n; r += 2) want += r + 1;
  CHECK(as_ints(v.download(4)) == std::vector<int32_t>{want});
  CC_OK(cc_comm_destroy(half));
}

TEST_CASE("a 1-rank communicator (split with color = rank)") {
  const int rank = world_rank();
  cc_comm_t solo = nullptr;
  CC_OK(cc_comm_split(world(), rank, 0, &solo, nullptr));
  REQUIRE(solo != nullptr);
  int r = -1, s = 0;
  CC_OK(cc_comm_rank(solo, &r));
  CC_OK(cc_comm_size(solo, &s));
  CHECK(r == 0);
  CHECK(s == 1);
  const size_t count = 1001;
  DeviceBuffer a(count * 4), b(count * 4);
  a.upload(ints(pattern(rank, count)));
  CC_OK(cc_allreduce(a.get(), b.get(), count, CC_INT32, CC_SUM, solo, cc_stream()));
  CC_OK(cc_broadcast(b.get(), b.get(), count, CC_INT32, 0, solo, cc_stream()));
  CC_OK(cc_barrier(solo, cc_stream()));
  CHECK(sync_stream());
  CHECK(as_ints(b.download(count * 4)) == pattern(rank, count));
  // Checks still name this communicator's own ranks.
  CHECK(cc_broadcast(a.get(), b.get(), count, CC_INT32, 1, solo, cc_stream()) ==
        CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(cc_last_error()), Catch::Contains("root 1 is outside"));
  CC_OK(cc_comm_destroy(solo));
}

TEST_CASE("a negative color gives no communicator") {
  const int rank = world_rank();
  cc_comm_t maybe = reinterpret_cast<cc_comm_t>(0x1);
  CC_OK(cc_comm_split(world(), rank == 0 ? 0 : -1, 0, &maybe, nullptr));
  if (rank == 0) {
    CHECK(maybe != nullptr);
    CC_OK(cc_comm_destroy(maybe));
  } else {
    CHECK(maybe == nullptr);
  }
}

TEST_CASE("an aborted communicator refuses work; a destroyed one is detected") {
  cc_comm_t child = nullptr;
  CC_OK(cc_comm_split(world(), 0, world_rank(), &child, nullptr));
  REQUIRE(child != nullptr);
  DeviceBuffer v(4);
  CC_OK(cc_allreduce(v.get(), v.get(), 1, CC_INT32, CC_SUM, child, cc_stream()));
  CHECK(sync_stream());
  CC_OK(cc_comm_abort(child));
  CC_OK(cc_comm_abort(child));  // again: harmless
  CHECK(cc_allreduce(v.get(), v.get(), 1, CC_INT32, CC_SUM, child, cc_stream()) == CC_ERR_ABORTED);
  CHECK_THAT(std::string(cc_last_error()), Catch::Contains("aborted by cc_comm_abort"));
  CC_OK(cc_comm_destroy(child));
  CHECK(cc_barrier(child, cc_stream()) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(cc_last_error()), Catch::Contains("comm was destroyed"));
  // The world communicator is untouched.
  CC_OK(cc_barrier(world(), cc_stream()));
  CHECK(sync_stream());
}
