// cc's all-reduce kernels (lib/fast/): each of them (ll, oneshot, twoshot,
// forced through config.fast_allreduce_plan) gives the same bits as
// ncclAllReduce for every type and op, at sizes around every edge of its
// layout, out of place, in place and unaligned; the plan measured at init is
// the same on every rank and right on both sides of each switch point;
// calls alternating between streams stay in order; graphs capture and
// replay them; CC_FAST_ALLREDUCE_REQUIRE says where they cannot run.
// Tagged [one-gpu-per-rank]: ranks sharing a GPU as separate hosts
// (CC_SHARE_GPU) cannot run cc's kernels, so scripts/gpu-suite.sh leaves
// these cases out there, and says so.
//
// The reference is a communicator split off with CC_FAST_ALLREDUCE_OFF, so it
// always calls ncclAllReduce. With two ranks every operation is one
// commutative step, so both give the same bits; with more ranks the order of
// operations may differ and the comparison allows rounding.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nccl.h>

#include "tests/gpu/dtype_codec.hpp"
#include "tests/gpu/gpu_env.hpp"

using namespace cc::test;

namespace {

constexpr const char* kPaths[] = {"ll", "oneshot", "twoshot"};

// Splits the world with config.fast_allreduce = `mode` and, when given, a plan.
cc_result_t split_with(int mode, const char* plan, cc_comm_t* out) {
  cc_config_t config = CC_CONFIG_INIT;
  config.fast_allreduce = mode;
  config.fast_allreduce_plan = plan;
  return cc_comm_split(world(), 0, world_rank(), out, &config);
}

std::string plan_of(cc_comm_t comm) {
  char text[128] = {};
  const cc_result_t r = cc_comm_allreduce_plan(comm, text, sizeof text);
  INFO(describe(r));
  CHECK(r == CC_SUCCESS);
  return text;
}

// The largest size `path` serves in `plan` ("ll:256K,oneshot:8M" -> 8M for
// oneshot); 0 when it serves none.
size_t bytes_of(const std::string& plan, const std::string& path) {
  size_t pos = 0;
  while (pos < plan.size()) {
    size_t comma = plan.find(',', pos);
    if (comma == std::string::npos) comma = plan.size();
    const std::string item = plan.substr(pos, comma - pos);
    const size_t colon = item.find(':');
    if (colon != std::string::npos && item.substr(0, colon) == path) {
      const std::string v = item.substr(colon + 1);
      size_t n = std::stoull(v);
      if (v.back() == 'K') n <<= 10;
      if (v.back() == 'M') n <<= 20;
      return n;
    }
    pos = comma + 1;
  }
  return 0;
}

// Every step's upper edge, in bytes, in plan order.
std::vector<size_t> edges_of(const std::string& plan) {
  std::vector<size_t> out;
  for (const char* path : {"nccl", "ll", "oneshot", "twoshot"})
    if (size_t b = bytes_of(plan, path); b > 0) out.push_back(b);
  std::sort(out.begin(), out.end());
  return out;
}

// A communicator whose plan sends every size it can to one kernel.
struct Forced {
  cc_comm_t comm = nullptr;
  size_t max_bytes = 0;
  explicit Forced(const char* path) {
    const std::string plan = std::string(path) + ":8M";
    const cc_result_t r = split_with(CC_FAST_ALLREDUCE_AUTO, plan.c_str(), &comm);
    INFO("split with plan " << plan << ": " << describe(r));
    REQUIRE(r == CC_SUCCESS);
    max_bytes = bytes_of(plan_of(comm), path);  // capped to the kernel's capacity
  }
  ~Forced() { cc_comm_destroy(comm); }
  Forced(const Forced&) = delete;
  Forced& operator=(const Forced&) = delete;
};

struct Plain {
  cc_comm_t comm = nullptr;
  Plain() {
    const cc_result_t r = split_with(CC_FAST_ALLREDUCE_OFF, nullptr, &comm);
    INFO("split with CC_FAST_ALLREDUCE_OFF: " << describe(r));
    REQUIRE(r == CC_SUCCESS);
  }
  ~Plain() { cc_comm_destroy(comm); }
  Plain(const Plain&) = delete;
  Plain& operator=(const Plain&) = delete;
};

// Valid values of the type: floats in [-8, 8), random bits for integers.
std::vector<uint8_t> random_values(cc_datatype_t t, size_t count, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> real(-8, 8);
  const size_t es = elem_size(t);
  std::vector<uint8_t> out(count * es);
  for (size_t i = 0; i < count; ++i) {
    if (is_integer(t)) {
      const uint64_t bits = gen();
      std::memcpy(out.data() + i * es, &bits, es);
    } else {
      encode(t, out.data(), i, real(gen));
    }
  }
  return out;
}

// Elements where a and b differ (beyond rounding for floats with > 2 ranks).
size_t differences(cc_datatype_t t, const uint8_t* a, const uint8_t* b, size_t count) {
  const size_t es = elem_size(t);
  const bool exact = world_size() == 2 || is_integer(t);
  size_t n = 0;
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(a + i * es, b + i * es, es) == 0) continue;
    if (!exact && close_enough(t, decode(t, b, i), decode(t, a, i))) continue;
    ++n;
  }
  return n;
}

enum Placement { kOutOfPlace, kInPlace, kUnaligned };
const char* placement_name(int p) {
  return p == kOutOfPlace ? "out of place" : p == kInPlace ? "in place" : "unaligned";
}

// One all-reduce on `comm` and the same on `plain` from the same input;
// true when both ran, with `wrong` the differing elements on this rank.
bool compare(cc_comm_t comm, cc_comm_t plain, cc_datatype_t t, cc_redop_t op, size_t count,
             int placement, size_t* wrong) {
  const size_t es = elem_size(t);
  const size_t shift = placement == kUnaligned ? 1 : 0;  // one element off 16-byte alignment
  const size_t bytes = (count + shift) * es;
  const std::string what = std::string(type_name(t)) + " " + op_name(op) + " count " +
                           std::to_string(count) + " " + placement_name(placement);
  const auto input = random_values(
      t, count + shift, static_cast<unsigned>(count * 31 + world_rank() * 7 + op * 3 + t));
  DeviceBuffer send(bytes), recv(bytes), send2(bytes), recv2(bytes);
  send.upload(input);
  send2.upload(input);
  recv.fill_junk();
  recv2.fill_junk();
  const char* sb = send.bytes() + shift * es;
  char* rb = (placement == kInPlace ? send.bytes() : recv.bytes()) + shift * es;
  const char* sb2 = send2.bytes() + shift * es;
  char* rb2 = (placement == kInPlace ? send2.bytes() : recv2.bytes()) + shift * es;
  if (!call_and_wait(what + " (cc)", cc_allreduce(sb, rb, count, t, op, comm, cc_stream())))
    return false;
  if (!call_and_wait(what + " (ncclAllReduce)",
                     cc_allreduce(sb2, rb2, count, t, op, plain, cc_stream())))
    return false;
  const auto got = (placement == kInPlace ? send : recv).download(count * es, shift * es);
  const auto ref = (placement == kInPlace ? send2 : recv2).download(count * es, shift * es);
  *wrong = differences(t, got.data(), ref.data(), count);
  return true;
}

#if CC_TEST_FAST_KERNELS  // only the kernels' own cases ask
bool is_float(cc_datatype_t t) {
  return t == CC_FLOAT16 || t == CC_BFLOAT16 || t == CC_FLOAT32 || t == CC_FLOAT64;
}
#endif

const cc_datatype_t kTypes[] = {CC_INT8,   CC_UINT8,   CC_INT32,    CC_UINT32,  CC_INT64,
                                CC_UINT64, CC_FLOAT16, CC_BFLOAT16, CC_FLOAT32, CC_FLOAT64};
const cc_redop_t kOps[] = {CC_SUM, CC_PROD, CC_MAX, CC_MIN, CC_AVG};

}  // namespace

// The kernels' own cases exist only where the kernels are built: elsewhere
// they would pass having run nothing. Those tagged [peers] need two ranks or
// more (cc's kernels reduce between peers; on one rank a reduction is a
// copy): gpu_main.cpp leaves them out of a run of one rank, and says so.
#if CC_TEST_FAST_KERNELS
TEST_CASE("cc's kernels: every type and op gives ncclAllReduce's bits", "[one-gpu-per-rank]") {
  Plain plain;
  for (const char* path : kPaths) {
    Forced forced(path);
    // A few bytes, a little over one unit of work (LL: a 4 KiB block;
    // one-shot and two-shot: a 32 KiB chunk), and several of them.
    const std::vector<size_t> sizes = std::string(path) == "ll"
                                          ? std::vector<size_t>{24, 4104, 65544}
                                          : std::vector<size_t>{40, 32776, 1048600};
    for (cc_datatype_t t : kTypes)
      for (cc_redop_t op : kOps) {
        if (op == CC_AVG && !is_float(t)) continue;  // NCCL's integer average: not cc's
        for (size_t want : sizes) {
          const size_t count = std::max<size_t>(1, want / elem_size(t));
          size_t wrong = 0;
          INFO(path << ": " << type_name(t) << " " << op_name(op) << " count " << count
                    << " on rank " << world_rank());
          if (compare(forced.comm, plain.comm, t, op, count, kOutOfPlace, &wrong))
            CHECK(wrong == 0);
        }
      }
  }
}

TEST_CASE("cc's kernels: sizes around every edge, in place and unaligned", "[one-gpu-per-rank][peers]") {
  Plain plain;
  const cc_datatype_t types[] = {CC_FLOAT32, CC_INT8, CC_BFLOAT16, CC_FLOAT64};
  const cc_redop_t ops[] = {CC_SUM, CC_MAX, CC_SUM, CC_AVG};
  for (const char* path : kPaths) {
    Forced forced(path);
    REQUIRE(forced.max_bytes > 0);
    const size_t unit = std::string(path) == "ll" ? 4096 : 32768;  // a block's or a chunk's bytes
    const size_t top = forced.max_bytes;
    const std::vector<size_t> sizes{
        1, 15, 16, 17, unit - 8, unit, unit + 8, 3 * unit + 40, top / 2 + 24, top - 16, top};
    for (int k = 0; k < 4; ++k) {
      const cc_datatype_t t = types[k];
      for (size_t want : sizes)
        for (int placement = 0; placement < 3; ++placement) {
          size_t count = std::max<size_t>(1, want / elem_size(t));
          if (placement == kUnaligned && count * elem_size(t) == top) --count;  // stays in range
          size_t wrong = 0;
          INFO(path << ": " << type_name(t) << " " << op_name(ops[k]) << " count " << count << " "
                    << placement_name(placement) << " on rank " << world_rank());
          if (compare(forced.comm, plain.comm, t, ops[k], count, placement, &wrong))
            CHECK(wrong == 0);
        }
    }
  }
}
#endif  // CC_TEST_FAST_KERNELS

TEST_CASE("the plan made at init: the same on every rank, right on both sides of each switch", "[one-gpu-per-rank]") {
  const std::string plan = plan_of(world());
  INFO("plan " << plan);
  // The same text on every rank: its hash, max and min over the ranks, agree.
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char ch : plan) hash = (hash ^ ch) * 1099511628211ull;
  const int64_t h = static_cast<int64_t>(hash & 0x7fffffffffffffffull);
  DeviceBuffer v(2 * sizeof(int64_t));
  std::vector<uint8_t> raw(2 * sizeof(int64_t));
  std::memcpy(raw.data(), &h, 8);
  std::memcpy(raw.data() + 8, &h, 8);
  v.upload(raw);
  Plain plain;
  REQUIRE(call_and_wait(
      "max", cc_allreduce(v.get(), v.get(), 1, CC_INT64, CC_MAX, plain.comm, cc_stream())));
  REQUIRE(call_and_wait("min", cc_allreduce(v.bytes() + 8, v.bytes() + 8, 1, CC_INT64, CC_MIN,
                                            plain.comm, cc_stream())));
  const auto back = v.download(16);
  int64_t hi = 0, lo = 0;
  std::memcpy(&hi, back.data(), 8);
  std::memcpy(&lo, back.data() + 8, 8);
  CHECK(hi == lo);

  for (size_t edge : edges_of(plan))
    for (size_t bytes : {edge - 16, edge, edge + 16})
      for (cc_datatype_t t : {CC_FLOAT32, CC_BFLOAT16, CC_INT32})
        for (int placement : {kOutOfPlace, kInPlace}) {
          const size_t count = bytes / elem_size(t);
          const cc_redop_t op = t == CC_INT32 ? CC_MAX : CC_SUM;
          size_t wrong = 0;
          INFO(type_name(t) << " count " << count << " " << placement_name(placement) << " on rank "
                            << world_rank());
          if (compare(world(), plain.comm, t, op, count, placement, &wrong)) CHECK(wrong == 0);
        }
}

TEST_CASE("cc's kernels: calls alternating between two streams stay in order", "[one-gpu-per-rank]") {
  cudaStream_t s[2] = {nullptr, nullptr};
  REQUIRE(cudaStreamCreateWithFlags(&s[0], cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&s[1], cudaStreamNonBlocking) == cudaSuccess);
  struct Case {
    const char* path;  // nullptr: the world's own plan
    size_t count;
  };
  const Case cases[] = {
      {nullptr, 1000}, {nullptr, 300000}, {"ll", 30000}, {"oneshot", 300000}, {"twoshot", 300000}};
  for (const Case& c : cases) {
    if (c.path != nullptr && !CC_TEST_FAST_KERNELS) continue;
    std::unique_ptr<Forced> forced;
    if (c.path != nullptr) forced = std::make_unique<Forced>(c.path);
    cc_comm_t comm = forced ? forced->comm : world();
    INFO((c.path != nullptr ? c.path : "world plan") << ", count " << c.count);
    DeviceBuffer x(c.count * sizeof(float)), big((size_t{4} << 20) * sizeof(float));
    std::vector<float> init(c.count);
    for (size_t i = 0; i < c.count; ++i) init[i] = static_cast<float>(1 + i % 7);
    std::vector<uint8_t> raw(c.count * sizeof(float));
    std::memcpy(raw.data(), init.data(), raw.size());
    x.upload(raw);
    // Each in-place sum multiplies x by n; a call that overtook the previous
    // one, or ran beside it, would break the chain.
    const int rounds = 24;
    cc_result_t r = CC_SUCCESS;
    for (int i = 0; i < rounds && r == CC_SUCCESS; ++i) {
      const auto st = reinterpret_cast<cc_stream_t>(s[i % 2]);
      r = cc_allreduce(x.get(), x.get(), c.count, CC_FLOAT32, CC_SUM, comm, st);
      if (r == CC_SUCCESS && i % 8 == 7)  // one for NCCL (16 MiB) in between
        r = cc_allreduce(big.get(), big.get(), size_t{4} << 20, CC_FLOAT32, CC_SUM, comm, st);
    }
    INFO(describe(r));
    CHECK(r == CC_SUCCESS);
    CHECK(sync_stream(s[0]));
    CHECK(sync_stream(s[1]));
    const auto got = x.download(c.count * sizeof(float));
    std::vector<float> v(c.count);
    std::memcpy(v.data(), got.data(), got.size());
    const double scale = std::pow(static_cast<double>(world_size()), rounds);
    size_t wrong = 0;
    for (size_t i = 0; i < c.count; ++i)
      if (static_cast<double>(v[i]) != init[i] * scale) ++wrong;
    INFO("want " << init[0] * scale << ", first " << v[0]);
    CHECK(wrong == 0);
  }
  cudaStreamDestroy(s[0]);
  cudaStreamDestroy(s[1]);
}

TEST_CASE("cc's kernels: captured in a CUDA graph, replays and direct calls interleave", "[one-gpu-per-rank]") {
  const char* paths[] = {nullptr, "ll", "oneshot", "twoshot"};
  for (const char* path : paths) {
    if (path != nullptr && !CC_TEST_FAST_KERNELS) continue;
    std::unique_ptr<Forced> forced;
    if (path != nullptr) forced = std::make_unique<Forced>(path);
    cc_comm_t comm = forced ? forced->comm : world();
    INFO((path != nullptr ? path : "world plan"));
    // Three sizes per graph: small, mid and (for the world) NCCL's.
    const size_t counts[] = {1000, 300000, path == nullptr ? size_t{4} << 20 : 60000};
    std::vector<std::unique_ptr<DeviceBuffer>> bufs;
    std::vector<std::vector<float>> init;
    for (size_t count : counts) {
      bufs.push_back(std::make_unique<DeviceBuffer>(count * sizeof(float)));
      std::vector<float> v(count);
      for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>(1 + (i * 7 + count) % 5);
      std::vector<uint8_t> raw(count * sizeof(float));
      std::memcpy(raw.data(), v.data(), raw.size());
      bufs.back()->upload(raw);
      init.push_back(std::move(v));
    }
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    REQUIRE(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    cc_result_t r = CC_SUCCESS;
    for (size_t k = 0; k < 3 && r == CC_SUCCESS; ++k)
      r = cc_allreduce(bufs[k]->get(), bufs[k]->get(), counts[k], CC_FLOAT32, CC_SUM, comm,
                       cc_stream());
    const cudaError_t end = cudaStreamEndCapture(stream(), &graph);
    INFO(describe(r));
    REQUIRE(r == CC_SUCCESS);
    REQUIRE(end == cudaSuccess);
    REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    // Five replays, each followed by direct calls on the same buffers: every
    // step multiplies each buffer by n.
    const int replays = 5;
    for (int i = 0; i < replays && r == CC_SUCCESS; ++i) {
      REQUIRE(cudaGraphLaunch(exec, stream()) == cudaSuccess);
      for (size_t k = 0; k < 3 && r == CC_SUCCESS; ++k)
        r = cc_allreduce(bufs[k]->get(), bufs[k]->get(), counts[k], CC_FLOAT32, CC_SUM, comm,
                         cc_stream());
    }
    INFO(describe(r));
    CHECK(r == CC_SUCCESS);
    CHECK(sync_stream());
    const double scale = std::pow(static_cast<double>(world_size()), 2 * replays);
    for (size_t k = 0; k < 3; ++k) {
      const auto got = bufs[k]->download(counts[k] * sizeof(float));
      std::vector<float> v(counts[k]);
      std::memcpy(v.data(), got.data(), got.size());
      size_t wrong = 0;
      for (size_t i = 0; i < counts[k]; ++i)
        if (static_cast<double>(v[i]) != init[k][i] * scale) ++wrong;
      INFO("count " << counts[k] << ": want " << init[k][0] * scale << ", first " << v[0]);
      CHECK(wrong == 0);
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
}

TEST_CASE("config.fast_allreduce_plan: taken as given, capped to the kernels, checked", "[one-gpu-per-rank][peers]") {
  if (CC_TEST_FAST_KERNELS) {
    struct Want {
      const char* given;
      const char* expected;
    };
    // LL holds 2 MiB on 2 ranks, 1 MiB on 3-4 and 512 KiB on 5-8 (the rest
    // of its range goes to NCCL); one-shot 8, 4 and 2 MiB.
    const int n = world_size();
    const std::string capped = n <= 2   ? "ll:1M,oneshot:8M"
                               : n <= 4 ? "ll:1M,oneshot:4M"
                                        : "ll:512K,nccl:1M,oneshot:2M";
    const Want wants[] = {{"ll:64K", "ll:64K"},
                          {"nccl", "nccl"},
                          {"ll:1M,oneshot:64M", capped.c_str()},
                          {"nccl:1K,twoshot:4M,blocks:16", "nccl:1K,twoshot:4M,blocks:16"}};
    for (const Want& w : wants) {
      cc_comm_t c = nullptr;
      const cc_result_t r = split_with(CC_FAST_ALLREDUCE_AUTO, w.given, &c);
      INFO("plan " << w.given << ": " << describe(r));
      REQUIRE(r == CC_SUCCESS);
      CHECK(plan_of(c) == w.expected);
      CHECK(cc_comm_destroy(c) == CC_SUCCESS);
    }
  }
  cc_comm_t c = nullptr;
  const cc_result_t r = split_with(CC_FAST_ALLREDUCE_AUTO, "fast:1M", &c);
  CHECK(r == CC_ERR_INVALID_ARGUMENT);
  CHECK(c == nullptr);
  CHECK_THAT(std::string(cc_last_error()),
             Catch::Contains("config.fast_allreduce_plan='fast:1M' is not a plan") &&
                 Catch::Contains("'fast' is none of ll, oneshot, twoshot and nccl"));
  char tiny[3];
  CHECK(cc_comm_allreduce_plan(world(), tiny, sizeof tiny) == CC_ERR_INVALID_ARGUMENT);
}

TEST_CASE("CC_FAST_ALLREDUCE_REQUIRE: made wherever the kernels can run, with any NCCL", "[one-gpu-per-rank][peers]") {
  int version = 0;
  ncclGetVersion(&version);
  int device = 0, major = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  const bool expected =
      CC_TEST_FAST_KERNELS && major >= 8 && world_size() >= 2 && world_size() <= 8;
  cc_comm_t c = nullptr;
  const cc_result_t r = split_with(CC_FAST_ALLREDUCE_REQUIRE, nullptr, &c);
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
    CHECK(call_and_wait("allreduce on the required kernels",
                        cc_allreduce(v.get(), v.get(), 1, CC_INT32, CC_SUM, c, cc_stream())));
    int32_t got = 0;
    const auto back = v.download(4);
    std::memcpy(&got, back.data(), 4);
    CHECK(got == world_size() * (world_size() + 1) / 2);
    CHECK(cc_comm_destroy(c) == CC_SUCCESS);
  } else {
    CHECK(r == CC_ERR_INVALID_USAGE);
    CHECK(c == nullptr);
    CHECK_THAT(words, Catch::Contains("all-reduce kernels are required") &&
                          Catch::Contains("to fall back to ncclAllReduce"));
  }
}

TEST_CASE(
    "CC_FAST_ALLREDUCE_REQUIRE on one rank, off on the others: every rank fails, saying why", "[one-gpu-per-rank][peers]") {
  cc_comm_t c = nullptr;
  const cc_result_t r = split_with(
      world_rank() == 0 ? CC_FAST_ALLREDUCE_REQUIRE : CC_FAST_ALLREDUCE_OFF, nullptr, &c);
  const std::string words = cc_last_error();
  INFO(describe(r));
  CHECK(r == CC_ERR_INVALID_USAGE);
  CHECK(c == nullptr);
  CHECK_THAT(words, Catch::Contains("all-reduce kernels are required") &&
                        Catch::Contains("cannot be used"));
  if (CC_TEST_FAST_KERNELS) CHECK_THAT(words, Catch::Contains("CC_FAST_ALLREDUCE=0"));
  if (c != nullptr) cc_comm_destroy(c);
}
