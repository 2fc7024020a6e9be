// cc's all-reduce kernels (lib/fast/) with 2 to 8 ranks on one GPU, as
// streams of this process (tests/gpu/one_gpu_ranks.hpp): what a machine of
// one GPU can check, and what the two-GPU suite cannot, more ranks than it
// has GPUs. Each kernel must give every rank the same bits, those of the
// rank-order reduction computed on the host (tests/gpu/host_reduction.hpp),
// for every type and op, at sizes around every edge of its layout, out of
// place, in place and unaligned; calls alternating between streams stay in
// order; CUDA graphs capture and replay them; a late peer is waited for and
// a missing one ends at abort; a kernel's first launch does not wait behind
// another that waits for a peer (cc loads its kernels when it sets them up).
// No GPU: says so and exits 77 (skipped).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "common/datatypes.hpp"
#include "tests/gpu/dtype_codec.hpp"
#include "tests/gpu/host_reduction.hpp"
#include "tests/gpu/one_gpu_ranks.hpp"

using cc::fast::Algo;
using namespace cc::test;
using Clock = std::chrono::steady_clock;

namespace {

constexpr Algo kAlgos[] = {Algo::ll, Algo::oneshot, Algo::twoshot};
constexpr ncclRedOp_t kOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};

cc_datatype_t cc_type(ncclDataType_t t) { return static_cast<cc_datatype_t>(t); }
size_t elem_bytes(ncclDataType_t t) { return cc::datatype_size(cc_type(t)); }

// The largest message `algo` takes with these ranks on one GPU.
size_t max_bytes(const OneGpuRanks& ranks, Algo algo) {
  return algo == Algo::ll ? ranks.ll_max_bytes() : ranks.capacity().of(algo);
}

// One all-reduce: `offset_elems` shifts both buffers off their 256-byte
// alignment; `in_place` passes recv as send.
struct Case {
  Algo algo;
  ncclDataType_t type;
  ncclRedOp_t op;
  size_t count;
  bool in_place = false;
  size_t offset_elems = 0;
  uint32_t seed = 1;
};

std::string name_of(const OneGpuRanks& ranks, const Case& c) {
  return std::to_string(ranks.size()) + " ranks, " + cc::fast::algo_name(c.algo) + ", " +
         type_name(cc_type(c.type)) + " " + op_name(static_cast<cc_redop_t>(c.op)) + ", " +
         std::to_string(c.count) + " elements" + (c.in_place ? ", in place" : "") +
         (c.offset_elems > 0 ? ", offset by " + std::to_string(c.offset_elems) : "");
}

// Runs `c` on every rank of `ranks` and checks every rank's result: "" or
// what went wrong, naming the case.
std::string run_case(OneGpuRanks& ranks, const Case& c) {
  const int n = ranks.size();
  const size_t es = elem_bytes(c.type);
  const size_t bytes = c.count * es, offset = c.offset_elems * es;
  std::vector<std::vector<uint8_t>> inputs;
  std::vector<DeviceMemory*> send, recv;
  for (int r = 0; r < n; ++r) {
    inputs.push_back(make_input(c.type, c.op, r, c.count, c.seed));
    recv.push_back(&ranks.buffer(bytes + offset));
    recv.back()->fill(0x7b);  // junk: an element the kernel skips stays wrong
    if (c.in_place) {
      recv.back()->upload(inputs.back(), offset);
    } else {
      send.push_back(&ranks.buffer(bytes + offset));
      send.back()->upload(inputs.back(), offset);
    }
  }
  for (int r = 0; r < n; ++r) {
    char* out = recv[static_cast<size_t>(r)]->bytes() + offset;
    const char* in = c.in_place ? out : send[static_cast<size_t>(r)]->bytes() + offset;
    if (const cudaError_t e = ranks.allreduce(r, c.algo, in, out, c.count, c.type, c.op);
        e != cudaSuccess) {
      ranks.abort();  // the ranks before it wait for it
      ranks.finish();
      return name_of(ranks, c) + ": rank " + std::to_string(r) +
             "'s launch failed: " + cudaGetErrorString(e);
    }
  }
  if (!ranks.finish()) return name_of(ranks, c) + ": did not finish within 60 s";
  const Expected want = reduce_on_host(c.type, c.op, inputs, c.count);
  std::vector<uint8_t> first;
  for (int r = 0; r < n; ++r) {
    const std::vector<uint8_t> got = recv[static_cast<size_t>(r)]->download(bytes, offset);
    if (r == 0) first = got;
    if (got != first)
      return name_of(ranks, c) + ": rank " + std::to_string(r) + " holds other bits than rank 0";
    if (std::string why = compare(c.type, want, got, c.count); !why.empty())
      return name_of(ranks, c) + ": rank " + std::to_string(r) + ": " + why;
  }
  ranks.release_buffers();
  return "";
}

void check_case(OneGpuRanks& ranks, const Case& c) {
  const std::string why = run_case(ranks, c);
  INFO(name_of(ranks, c));
  CHECK(why == "");
}

// Sizes (bytes) around every edge of `algo`'s layout with n ranks, up to
// `top`: a pack (16 B), an LL block (4 KiB), a 32 KiB chunk, a two-shot
// segment (n chunks) and the largest message.
std::vector<size_t> edge_bytes(Algo algo, int n, size_t top) {
  const size_t chunk = cc::fast::kChunkBytes, block = size_t{cc::fast::kThreads} * 8;
  std::vector<size_t> sizes = {1, 15, 16, 17, block - 1, block, block + 1};
  if (algo != Algo::ll) {
    for (size_t edge :
         {chunk, static_cast<size_t>(n) * chunk, 3 * static_cast<size_t>(n) * chunk + chunk / 2}) {
      sizes.push_back(edge - 1);
      sizes.push_back(edge);
      sizes.push_back(edge + 1);
    }
  }
  sizes.push_back(top - 1);
  sizes.push_back(top);
  std::vector<size_t> kept;
  for (size_t s : sizes)
    if (s >= 1 && s <= top) kept.push_back(s);
  return kept;
}

}  // namespace

// First in this file: no kernel has been launched in this process before it.
TEST_CASE("one GPU: a kernel's first launch does not wait behind a kernel that waits for a peer") {
  // Two communicators: a's rank 0 waits in its kernel for a's rank 1, which
  // calls only once b's ranks have called. Were the kernels loaded lazily,
  // at their first launch, b's kernels would wait for a's to end (the load
  // waits for the device), on the host or on the device: then neither
  // communicator finishes (seen with CUDA 13: on the device).
  OneGpuRanks a(2), b(2);
  const size_t count = 4096 + 3;
  std::vector<std::vector<uint8_t>> a_in, b_in;
  std::vector<DeviceMemory*> a_buf, b_buf;
  for (int r = 0; r < 2; ++r) {
    a_in.push_back(make_input(ncclFloat32, ncclSum, r, count, 11));
    b_in.push_back(make_input(ncclUint64, ncclProd, r, count, 12));
    a_buf.push_back(&a.buffer(count * 4));
    b_buf.push_back(&b.buffer(count * 8));
    a_buf.back()->upload(a_in.back());
    b_buf.back()->upload(b_in.back());
  }
  REQUIRE(a.allreduce(0, Algo::ll, a_buf[0]->bytes(), a_buf[0]->bytes(), count, ncclFloat32,
                      ncclSum) == cudaSuccess);
  std::atomic<bool> launched{false};
  std::thread other([&] {
    for (int r = 0; r < 2; ++r)
      b.allreduce(r, Algo::twoshot, b_buf[static_cast<size_t>(r)]->bytes(),
                  b_buf[static_cast<size_t>(r)]->bytes(), count, ncclUint64, ncclProd);
    launched = true;
  });
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (!launched && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const bool in_time = launched;
  if (!in_time) a.abort();  // ends a's kernel, which lets the launches through
  other.join();
  REQUIRE(in_time);
  REQUIRE(a.allreduce(1, Algo::ll, a_buf[1]->bytes(), a_buf[1]->bytes(), count, ncclFloat32,
                      ncclSum) == cudaSuccess);
  REQUIRE(a.finish());
  REQUIRE(b.finish());
  const Expected a_want = reduce_on_host(ncclFloat32, ncclSum, a_in, count);
  const Expected b_want = reduce_on_host(ncclUint64, ncclProd, b_in, count);
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(compare(ncclFloat32, a_want, a_buf[static_cast<size_t>(r)]->download(count * 4), count) ==
          "");
    CHECK(compare(ncclUint64, b_want, b_buf[static_cast<size_t>(r)]->download(count * 8), count) ==
          "");
  }
}

TEST_CASE("one GPU: every type and op gives every rank the rank-order reduction's bits") {
  for (int n : {2, 3, 8}) {
    OneGpuRanks ranks(n);
    for (Algo algo : kAlgos) {
      // A few chunks (LL: a few blocks) and a ragged end.
      const size_t target = algo == Algo::ll ? 5 * 4096 + 40 : 3 * cc::fast::kChunkBytes + 40;
      for (int t = 0; t < CC_NUM_DATATYPES; ++t)
        for (ncclRedOp_t op : kOps) {
          const auto type = static_cast<ncclDataType_t>(t);
          size_t es = 0;
          if (!cc::fast::kernel_supports(type, op, &es)) continue;  // float8: NCCL
          check_case(ranks, {algo, type, op, target / es + 1});
        }
    }
  }
}

TEST_CASE("one GPU: sizes around every edge, in place and unaligned") {
  struct TypeOp {
    ncclDataType_t type;
    ncclRedOp_t op;
  };
  const TypeOp mixes[] = {{ncclFloat32, ncclSum}, {ncclInt8, ncclMax}, {ncclBfloat16, ncclAvg}};
  for (int n : {2, 3, 4, 5, 8}) {  // each rank count changes a capacity or a segment
    OneGpuRanks ranks(n);
    for (Algo algo : kAlgos) {
      const size_t top = max_bytes(ranks, algo);
      for (const TypeOp& m : mixes) {
        const size_t es = elem_bytes(m.type);
        for (size_t bytes : edge_bytes(algo, n, top)) {
          const size_t count = (bytes + es - 1) / es;
          if (count * es > top) continue;
          check_case(ranks, {algo, m.type, m.op, count});
          check_case(ranks, {algo, m.type, m.op, count, /*in_place=*/true});
          check_case(ranks, {algo, m.type, m.op, count, false, /*offset_elems=*/1});
          check_case(ranks, {algo, m.type, m.op, count, true, 1});
        }
      }
    }
  }
}

TEST_CASE("one GPU: calls alternating between two streams stay in order") {
  // In place, each call's input is the previous call's result: a call that
  // overtook its predecessor on the other stream would read the wrong input
  // (or share its buffers and never finish).
  for (int n : {2, 4}) {
    OneGpuRanks ranks(n);
    for (Algo algo : kAlgos) {
      const size_t count = (algo == Algo::ll ? 3 * 4096 : 2 * cc::fast::kChunkBytes) / 4 + 3;
      std::vector<std::vector<uint8_t>> values;
      std::vector<DeviceMemory*> bufs;
      for (int r = 0; r < n; ++r) {
        values.push_back(make_input(ncclFloat32, ncclSum, r, count, 7));
        bufs.push_back(&ranks.buffer(count * 4));
        bufs.back()->upload(values.back());
      }
      constexpr int kCalls = 12;
      for (int i = 0; i < kCalls; ++i)
        for (int r = 0; r < n; ++r) {
          char* p = bufs[static_cast<size_t>(r)]->bytes();
          REQUIRE(ranks.allreduce(r, algo, p, p, count, ncclFloat32, ncclSum,
                                  ranks.stream(r, i % 2)) == cudaSuccess);
        }
      REQUIRE(ranks.finish());
      for (int i = 0; i < kCalls; ++i) {
        const Expected step = reduce_on_host(ncclFloat32, ncclSum, values, count);
        values.assign(static_cast<size_t>(n), step.plain);
      }
      for (int r = 0; r < n; ++r) {
        INFO(n << " ranks, " << cc::fast::algo_name(algo) << ", rank " << r);
        CHECK(compare(ncclFloat32, {values[0], values[0]},
                      bufs[static_cast<size_t>(r)]->download(count * 4), count) == "");
      }
    }
  }
}

TEST_CASE("one GPU: captured in CUDA graphs, replays and direct calls interleave") {
  const int n = 2;
  OneGpuRanks ranks(n);
  for (Algo algo : kAlgos) {
    const size_t count = (algo == Algo::ll ? 2 * 4096 : 5 * cc::fast::kChunkBytes) / 2 + 1;
    std::vector<DeviceMemory*> send, recv;
    std::vector<cudaGraphExec_t> execs;
    for (int r = 0; r < n; ++r) {
      send.push_back(&ranks.buffer(count * 2));
      recv.push_back(&ranks.buffer(count * 2));
      cudaStream_t s = ranks.stream(r);
      REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
      const cudaError_t launch =
          ranks.allreduce(r, algo, send.back()->bytes(), recv.back()->bytes(), count, ncclFloat16,
                          ncclSum, s, true);
      cudaGraph_t graph = nullptr;
      REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
      REQUIRE(launch == cudaSuccess);
      cudaGraphExec_t exec = nullptr;
      REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
      cudaGraphDestroy(graph);
      execs.push_back(exec);
    }
    for (int round = 0; round < 6; ++round) {
      INFO(cc::fast::algo_name(algo) << ", round " << round);
      std::vector<std::vector<uint8_t>> inputs;
      for (int r = 0; r < n; ++r) {
        inputs.push_back(make_input(ncclFloat16, ncclSum, r, count, 100 + round));
        send[static_cast<size_t>(r)]->upload(inputs.back());
        recv[static_cast<size_t>(r)]->fill(0x7b);
      }
      for (int r = 0; r < n; ++r) {
        if (round % 2 == 0) {  // a replay
          REQUIRE(cudaGraphLaunch(execs[static_cast<size_t>(r)], ranks.stream(r)) == cudaSuccess);
        } else {  // a direct call between replays
          REQUIRE(ranks.allreduce(r, algo, send[static_cast<size_t>(r)]->bytes(),
                                  recv[static_cast<size_t>(r)]->bytes(), count, ncclFloat16,
                                  ncclSum) == cudaSuccess);
        }
      }
      REQUIRE(ranks.finish());
      const Expected want = reduce_on_host(ncclFloat16, ncclSum, inputs, count);
      for (int r = 0; r < n; ++r)
        CHECK(compare(ncclFloat16, want, recv[static_cast<size_t>(r)]->download(count * 2),
                      count) == "");
    }
    for (cudaGraphExec_t e : execs) cudaGraphExecDestroy(e);
  }
}

TEST_CASE("one GPU: a peer that comes late is waited for") {
  for (Algo algo : kAlgos) {
    OneGpuRanks ranks(3);
    const size_t count = (algo == Algo::ll ? 4 * 4096 : 4 * cc::fast::kChunkBytes) / 8;
    std::vector<std::vector<uint8_t>> inputs;
    std::vector<DeviceMemory*> bufs;
    for (int r = 0; r < 3; ++r) {
      inputs.push_back(make_input(ncclInt64, ncclProd, r, count, 3));
      bufs.push_back(&ranks.buffer(count * 8));
      bufs.back()->upload(inputs.back());
    }
    for (int r = 0; r < 3; ++r) {
      if (r == 2) {  // the others are already waiting for it
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        INFO(cc::fast::algo_name(algo));
        CHECK_FALSE(ranks.idle());
      }
      char* p = bufs[static_cast<size_t>(r)]->bytes();
      REQUIRE(ranks.allreduce(r, algo, p, p, count, ncclInt64, ncclProd) == cudaSuccess);
    }
    REQUIRE(ranks.finish());
    const Expected want = reduce_on_host(ncclInt64, ncclProd, inputs, count);
    for (int r = 0; r < 3; ++r) {
      INFO(cc::fast::algo_name(algo) << ", rank " << r);
      CHECK(compare(ncclInt64, want, bufs[static_cast<size_t>(r)]->download(count * 8), count) ==
            "");
    }
  }
}

TEST_CASE("one GPU: kernels whose peer never calls end when the abort flag is raised") {
  for (Algo algo : kAlgos) {
    for (int n : {2, 4}) {
      INFO(n << " ranks, " << cc::fast::algo_name(algo));
      OneGpuRanks ranks(n);
      const size_t count = (algo == Algo::ll ? 8 * 4096 : 6 * cc::fast::kChunkBytes) / 4;
      DeviceMemory& buf = ranks.buffer(count * 4 * static_cast<size_t>(n));
      for (int r = 0; r + 1 < n; ++r) {  // the last rank never calls
        char* p = buf.bytes() + count * 4 * static_cast<size_t>(r);
        REQUIRE(ranks.allreduce(r, algo, p, p, count, ncclFloat32, ncclSum) == cudaSuccess);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      CHECK_FALSE(ranks.idle());  // they wait for it
      const auto raised = Clock::now();
      ranks.abort();
      // They poll the flag every 1024 empty polls: well under a second.
      const bool ended = ranks.finish(std::chrono::seconds(5));
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - raised).count();
      CHECK(ended);
      CHECK(ms < 1000.0);
      CHECK(cudaGetLastError() == cudaSuccess);
    }
  }
}

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    std::printf("gpu_kernels_one_gpu: no GPU visible here: skipped\n");
    return 77;
  }
  std::string why;
  if (!cc::fast::locally_possible(2, 0, &why)) {
    std::printf("gpu_kernels_one_gpu: cc's kernels cannot run here (%s): skipped\n", why.c_str());
    return 77;
  }
  if (cudaSetDevice(0) != cudaSuccess) return 1;
  return Catch::Session().run(argc, argv);
}
