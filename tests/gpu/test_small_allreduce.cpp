// cc's small-message all-reduce kernel (lib/fast_allreduce.*): the same bits
// as ncclAllReduce at every size up to its limit and past it, with any
// alignment and in place; calls on alternating streams stay in order; and
// CC_FAST_ALLREDUCE_REQUIRE says whether the kernel is there.
//
// The reference is a communicator split off with CC_FAST_ALLREDUCE_OFF, so it
// always calls ncclAllReduce. With two ranks a sum is one commutative
// addition, so both ways give the same bits; with more ranks the order of
// additions may differ and the comparison allows rounding.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <nccl.h>

#include "tests/gpu/gpu_env.hpp"

using namespace cc::test;

namespace {

// Splits the world into a copy whose config.fast_allreduce is `mode` (not
// setenv: NCCL's threads read the environment concurrently).
cc_result_t split_with(int mode, cc_comm_t* out) {
  cc_config_t config = CC_CONFIG_INIT;
  config.fast_allreduce = mode;
  return cc_comm_split(world(), 0, world_rank(), out, &config);
}

struct Type {
  cc_datatype_t type;
  size_t size;
  const char* name;
};

// Random bytes that are valid values of the type (floats in [-8, 8)).
std::vector<uint8_t> random_values(const Type& t, size_t count, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> real(-8, 8);
  std::vector<uint8_t> out(count * t.size);
  for (size_t i = 0; i < count; ++i) {
    uint8_t* p = out.data() + i * t.size;
    if (t.type == CC_FLOAT32) {
      const float v = static_cast<float>(real(gen));
      std::memcpy(p, &v, 4);
    } else if (t.type == CC_FLOAT64) {
      const double v = real(gen);
      std::memcpy(p, &v, 8);
    } else {
      for (size_t b = 0; b < t.size; ++b) p[b] = static_cast<uint8_t>(gen());
    }
  }
  return out;
}

// Elements where a and b differ (beyond rounding for floats with > 2 ranks).
size_t differences(const Type& t, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                   size_t count, bool exact) {
  size_t n = 0;
  for (size_t i = 0; i < count; ++i) {
    const uint8_t* x = a.data() + i * t.size;
    const uint8_t* y = b.data() + i * t.size;
    if (std::memcmp(x, y, t.size) == 0) continue;
    if (!exact && t.type == CC_FLOAT32) {
      float fx, fy;
      std::memcpy(&fx, x, 4);
      std::memcpy(&fy, y, 4);
      if (std::fabs(fx - fy) <= 1e-5f * (1 + std::fabs(fx))) continue;
    } else if (!exact && t.type == CC_FLOAT64) {
      double dx, dy;
      std::memcpy(&dx, x, 8);
      std::memcpy(&dy, y, 8);
      if (std::fabs(dx - dy) <= 1e-12 * (1 + std::fabs(dx))) continue;
    }
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("small all-reduce: the same results as ncclAllReduce up to the limit and past it") {
  cc_comm_t plain = nullptr;
  const cc_result_t split = split_with(CC_FAST_ALLREDUCE_OFF, &plain);
  INFO("split with CC_FAST_ALLREDUCE_OFF: " << describe(split));
  REQUIRE(split == CC_SUCCESS);
  REQUIRE(plain != nullptr);
  const int rank = world_rank();
  const bool exact = world_size() == 2;
  const Type types[] = {{CC_FLOAT32, 4, "float32"},
                        {CC_FLOAT64, 8, "float64"},
                        {CC_INT32, 4, "int32"},
                        {CC_INT8, 1, "int8"},
                        {CC_UINT64, 8, "uint64"}};
  // Around the unit (8 bytes), the block (4 KiB) and the limit (64 KiB).
  const size_t byte_sizes[] = {1,    2,    3,    7,     8,     9,     24,    4088,
                               4096, 4104, 8200, 32768, 65528, 65536, 65544, 131072};
  const cc_redop_t ops[] = {CC_SUM, CC_MAX, CC_MIN};
  for (const Type& t : types)
    for (size_t want_bytes : byte_sizes)
      for (cc_redop_t op : ops)
        for (int placement = 0; placement < 3; ++placement) {  // out, in place, unaligned
          const size_t count = std::max<size_t>(1, want_bytes / t.size);
          const size_t shift = placement == 2 ? 1 : 0;  // one element off 8-byte alignment
          const size_t bytes = (count + shift) * t.size;
          const std::string what = std::string("allreduce ") + t.name + " op " +
                                   std::to_string(op) + " count " + std::to_string(count) +
                                   (placement == 0   ? " out-of-place"
                                    : placement == 1 ? " in-place"
                                                     : " unaligned");
          if (t.size == 8 && placement == 2) continue;  // an 8-byte type is never misaligned
          const auto input =
              random_values(t, count + shift, static_cast<unsigned>(count * 31 + rank * 7 + op));
          DeviceBuffer send(bytes), recv(bytes), send2(bytes), recv2(bytes);
          send.upload(input);
          send2.upload(input);
          const char* sb = send.bytes() + shift * t.size;
          char* rb = (placement == 1 ? send.bytes() : recv.bytes()) + shift * t.size;
          const char* sb2 = send2.bytes() + shift * t.size;
          char* rb2 = (placement == 1 ? send2.bytes() : recv2.bytes()) + shift * t.size;
          if (!call_and_wait(what + " (cc)",
                             cc_allreduce(sb, rb, count, t.type, op, world(), cc_stream())))
            continue;
          if (!call_and_wait(what + " (ncclAllReduce)",
                             cc_allreduce(sb2, rb2, count, t.type, op, plain, cc_stream())))
            continue;
          const auto got = (placement == 1 ? send : recv).download(bytes);
          const auto ref = (placement == 1 ? send2 : recv2).download(bytes);
          const std::vector<uint8_t> g(got.begin() + static_cast<long>(shift * t.size), got.end());
          const std::vector<uint8_t> f(ref.begin() + static_cast<long>(shift * t.size), ref.end());
          INFO(what << " on rank " << rank);
          CHECK(differences(t, g, f, count, exact) == 0);
        }
  CHECK(cc_comm_destroy(plain) == CC_SUCCESS);
}

TEST_CASE("small all-reduce: calls alternating between two streams stay in order") {
  cudaStream_t s[2] = {nullptr, nullptr};
  REQUIRE(cudaStreamCreateWithFlags(&s[0], cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&s[1], cudaStreamNonBlocking) == cudaSuccess);
  const size_t count = 1000;
  DeviceBuffer x(count * sizeof(float)), big((size_t{1} << 20) * sizeof(float));
  std::vector<float> ones(count, 1.0f);
  std::vector<uint8_t> raw(count * sizeof(float));
  std::memcpy(raw.data(), ones.data(), raw.size());
  x.upload(raw);
  // Each in-place sum doubles x on 2 ranks (multiplies by n on n); a call
  // that overtook the previous one, or ran beside it, would break the chain.
  const int rounds = 24;
  cc_result_t r = CC_SUCCESS;
  for (int i = 0; i < rounds && r == CC_SUCCESS; ++i) {
    const auto st = reinterpret_cast<cc_stream_t>(s[i % 2]);
    r = cc_allreduce(x.get(), x.get(), count, CC_FLOAT32, CC_SUM, world(), st);
    if (r == CC_SUCCESS && i % 8 == 7)  // an NCCL-sized one in between
      r = cc_allreduce(big.get(), big.get(), size_t{1} << 20, CC_FLOAT32, CC_SUM, world(), st);
  }
  INFO(describe(r));
  CHECK(r == CC_SUCCESS);
  CHECK(sync_stream(s[0]));
  CHECK(sync_stream(s[1]));
  const auto got = x.download(count * sizeof(float));
  std::vector<float> v(count);
  std::memcpy(v.data(), got.data(), got.size());
  const double want = std::pow(static_cast<double>(world_size()), rounds);
  size_t wrong = 0;
  for (float f : v)
    if (static_cast<double>(f) != want) ++wrong;
  INFO("want " << want << ", first " << v[0]);
  CHECK(wrong == 0);
  cudaStreamDestroy(s[0]);
  cudaStreamDestroy(s[1]);
}

TEST_CASE("CC_FAST_ALLREDUCE_REQUIRE: a communicator is made exactly where the kernel can run") {
  int version = 0;
  ncclGetVersion(&version);
  int device = 0, major = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  const bool expected = CC_TEST_FAST_KERNELS && version == NCCL_VERSION_CODE && major >= 8 &&
                        world_size() >= 2 && world_size() <= 8;
  cc_comm_t c = nullptr;
  const cc_result_t r = split_with(CC_FAST_ALLREDUCE_REQUIRE, &c);
  const std::string words = cc_last_error();
  INFO("NCCL loaded " << version << ", built against " << NCCL_VERSION_CODE << ", sm " << major
                      << ", kernels built " << CC_TEST_FAST_KERNELS << ": " << describe(r));
  if (expected) {
    REQUIRE(r == CC_SUCCESS);
    DeviceBuffer v(4);
    const int32_t mine = world_rank() + 1;
    std::vector<uint8_t> raw(4);
    std::memcpy(raw.data(), &mine, 4);
    v.upload(raw);
    CHECK(call_and_wait("allreduce on the required kernel",
                        cc_allreduce(v.get(), v.get(), 1, CC_INT32, CC_SUM, c, cc_stream())));
    int32_t got = 0;
    const auto back = v.download(4);
    std::memcpy(&got, back.data(), 4);
    CHECK(got == world_size() * (world_size() + 1) / 2);
    CHECK(cc_comm_destroy(c) == CC_SUCCESS);
  } else {
    CHECK(r == CC_ERR_INVALID_USAGE);
    CHECK(c == nullptr);
    CHECK_THAT(words, Catch::Contains("small all-reduce kernel is required") &&
                          Catch::Contains("to fall back to ncclAllReduce"));
  }
}
