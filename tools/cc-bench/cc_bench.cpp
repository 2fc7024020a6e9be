// cc-bench: nccl-tests-style timing of every cc collective, optionally next
// to the same loop on a raw NCCL communicator (--raw), with CSV, JSON and an
// SVG plot. One process per rank, under cc-run, mpirun or a hand-set
// environment (cc_comm_init_from_env); rank 0 prints and writes the reports.
//
// --raw uses a second NCCL communicator made with ncclCommInitRank (its id
// broadcast over the cc communicator), not cc's own ncclComm_t: both sides
// then have the same kind of communicator with its own channels and buffers,
// nothing cc does to its communicator can leak into the raw figures, and
// the same step times raw NCCL's init against cc_comm_init.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "cc/cc.h"
#include "common/settings.hpp"
#include "tools/cc-bench/bench_coll.hpp"
#include "tools/cc-bench/bench_data.hpp"
#include "tools/cc-bench/bench_memory.hpp"
#include "tools/cc-bench/bench_options.hpp"
#include "tools/cc-bench/bench_plot.hpp"
#include "tools/cc-bench/bench_report.hpp"

namespace cc::tools::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kSyncDeadline = std::chrono::seconds(120);
constexpr size_t kSmallBytes = size_t{64} << 10;  // --small-iters applies up to here

// The state every step needs; fatal() tears it down so the other ranks
// hear of the failure rather than hang.
struct Bench {
  Options opt;
  RunInfo info;
  cc_comm_t comm = nullptr;
  ncclComm_t raw = nullptr;
  int rank = 0, nranks = 0, device = 0;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  double* stats = nullptr;  // a few device doubles for cross-rank reductions
  Buffers bufs;
};
Bench* g_bench = nullptr;

[[noreturn]] void fatal(const std::string& what) {
  const int rank = g_bench != nullptr ? g_bench->rank : -1;
  std::fprintf(stderr, "cc-bench (rank %d): %s\n", rank, what.c_str());
  std::fflush(stderr);
  if (g_bench != nullptr) {
    if (g_bench->raw != nullptr) ncclCommAbort(g_bench->raw);
    if (g_bench->comm != nullptr) cc_comm_abort(g_bench->comm);
  }
  std::_Exit(1);
}

std::string cc_words(cc_result_t r) {
  return std::string(cc_result_string(r)) + ": " + cc_last_error();
}

void check_cc(cc_result_t r, const std::string& what) {
  if (r != CC_SUCCESS) fatal(what + " failed: " + cc_words(r));
}

void check_cuda(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) fatal(what + " failed: " + cudaGetErrorString(e));
}

void check_nccl(ncclResult_t r, const std::string& what) {
  if (r == ncclSuccess) return;
  const char* last = ncclGetLastError(nullptr);
  fatal(what + " failed: " + ncclGetErrorString(r) +
        (last != nullptr && *last != '\0' ? std::string(": ") + last : std::string()) +
        ". Run with NCCL_DEBUG=WARN for NCCL's own account");
}

// Waits for the stream with a deadline: a peer that died must not hang us.
void sync(Bench& b, const char* what) {
  const auto deadline = Clock::now() + kSyncDeadline;
  for (;;) {
    const cudaError_t e = cudaStreamQuery(b.stream);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady)
      fatal(std::string(what) + ": the stream failed: " + cudaGetErrorString(e));
    if (Clock::now() > deadline)
      fatal(std::string(what) +
            " did not finish within 120 s; another rank may have failed "
            "or be running different options");
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Reduces a few doubles over all ranks through cc (max or sum).
void reduce_all(Bench& b, std::vector<double>* v, cc_redop_t op) {
  check_cuda(cudaMemcpyAsync(b.stats, v->data(), v->size() * sizeof(double), cudaMemcpyHostToDevice,
                             b.stream),
             "cudaMemcpyAsync (stats)");
  check_cc(cc_allreduce(b.stats, b.stats, v->size(), CC_FLOAT64, op, b.comm,
                        reinterpret_cast<cc_stream_t>(b.stream)),
           "cc_allreduce of the timings");
  check_cuda(cudaMemcpyAsync(v->data(), b.stats, v->size() * sizeof(double), cudaMemcpyDeviceToHost,
                             b.stream),
             "cudaMemcpyAsync (stats)");
  sync(b, "reducing the timings");
}

void barrier(Bench& b) {
  check_cc(cc_barrier(b.comm, reinterpret_cast<cc_stream_t>(b.stream)), "cc_barrier");
  sync(b, "cc_barrier");
}

// The device cc_comm_init will pick (CC_DEVICE, else local rank % count), so
// its CUDA context exists before the init is timed.
int expected_device(int count) {
  using cc::settings::Id;
  const auto getenv = cc::settings::process_env();
  long long v = -1;
  if (cc::settings::read_int(Id::device, getenv, &v).ok() && v >= 0) return static_cast<int>(v);
  for (Id id : {Id::local_rank, Id::rank}) {
    v = -1;
    if (cc::settings::read_int(id, getenv, &v).ok() && v >= 0) return static_cast<int>(v % count);
  }
  return 0;
}

std::string nccl_version_text(int code) {
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

void init(Bench& b) {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0) {
    std::fprintf(stderr, "cc-bench: no CUDA device is visible (%s); run it on a GPU machine\n",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    std::exit(1);
  }
  const int guess = expected_device(count);
  if (guess >= 0 && guess < count && cudaSetDevice(guess) == cudaSuccess) cudaFree(nullptr);

  auto t0 = Clock::now();
  check_cc(cc_comm_init_from_env(&b.comm, nullptr), "cc_comm_init_from_env");
  double cc_init_ms = ms_since(t0);
  check_cc(cc_comm_rank(b.comm, &b.rank), "cc_comm_rank");
  check_cc(cc_comm_size(b.comm, &b.nranks), "cc_comm_size");
  check_cc(cc_comm_device(b.comm, &b.device), "cc_comm_device");
  check_cuda(cudaSetDevice(b.device), "cudaSetDevice");
  check_cuda(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check_cuda(cudaEventCreate(&b.start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&b.stop), "cudaEventCreate");
  check_cuda(cudaMalloc(reinterpret_cast<void**>(&b.stats), 16 * sizeof(double)), "cudaMalloc");

  RunInfo& info = b.info;
  info.opt = b.opt;
  info.nranks = b.nranks;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  info.host = host;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, b.device) == cudaSuccess) info.gpu = prop.name;
  int v = 0;
  if (ncclGetVersion(&v) == ncclSuccess) info.nccl_version = nccl_version_text(v);
  info.nccl_header_version = std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." +
                             std::to_string(NCCL_PATCH);
  info.cc_version = CC_VERSION_STRING;
  cudaDriverGetVersion(&info.cuda_driver);
  cudaRuntimeGetVersion(&info.cuda_runtime);
  const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
  info.nvls = nvls != nullptr ? nvls : "(unset)";
  int mode = 0;  // the setting's choices: embedded, external
  if (!cc::settings::read_choice(cc::settings::Id::rendezvous, cc::settings::process_env(), &mode)
           .ok())
    mode = 0;
  info.rendezvous = cc::settings::get(cc::settings::Id::rendezvous).choices[mode];
  char plan[128] = {};
  check_cc(cc_comm_allreduce_plan(b.comm, plan, sizeof plan), "cc_comm_allreduce_plan");
  info.allreduce_plan = plan;

  std::vector<double> t{cc_init_ms};
  reduce_all(b, &t, CC_MAX);
  info.cc_init_ms = t[0];
  if (!b.opt.raw) return;

  // A second cc communicator with every rank starting together: the init
  // time without the launcher's start-up skew, comparable with raw NCCL's.
  barrier(b);
  t0 = Clock::now();
  cc_comm_t again = nullptr;
  check_cc(cc_comm_init_from_env(&again, nullptr), "the second cc_comm_init_from_env");
  const double cc_sync_ms = ms_since(t0);
  check_cc(cc_comm_destroy(again), "cc_comm_destroy of the second communicator");
  check_cuda(cudaSetDevice(b.device), "cudaSetDevice");

  barrier(b);
  t0 = Clock::now();
  ncclUniqueId id{};
  if (b.rank == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  check_cuda(cudaMemcpyAsync(b.stats, &id, sizeof id, cudaMemcpyHostToDevice, b.stream),
             "cudaMemcpyAsync (id)");
  check_cc(cc_broadcast(b.stats, b.stats, sizeof id, CC_UINT8, 0, b.comm,
                        reinterpret_cast<cc_stream_t>(b.stream)),
           "cc_broadcast of the raw NCCL id");
  check_cuda(cudaMemcpyAsync(&id, b.stats, sizeof id, cudaMemcpyDeviceToHost, b.stream),
             "cudaMemcpyAsync (id)");
  sync(b, "broadcasting the raw NCCL id");
  const double id_ms = ms_since(t0);
  t0 = Clock::now();
  check_nccl(ncclCommInitRank(&b.raw, b.nranks, id, b.rank), "ncclCommInitRank (--raw)");
  const double raw_ms = ms_since(t0);

  t = {cc_sync_ms, raw_ms, id_ms};
  reduce_all(b, &t, CC_MAX);
  info.cc_init_sync_ms = t[0];
  info.raw_init_ms = t[1];
  info.raw_id_ms = t[2];
}

void enqueue(Bench& b, const Call& call, Impl impl) {
  if (impl == kCc) {
    const cc_result_t r = enqueue_cc(call, b.comm, b.stream);
    if (r != CC_SUCCESS)
      fatal(std::string("cc ") + coll_name(call.shape.coll) + " of " +
            std::to_string(call.shape.count) + " elements failed: " + cc_words(r));
  } else {
    check_nccl(enqueue_raw(call, b.raw, b.stream),
               std::string("raw NCCL ") + coll_name(call.shape.coll));
  }
}

// Mean microseconds per operation of `iters` operations (or graph replays).
double time_loop(Bench& b, const Call& call, Impl impl, size_t row_bytes) {
  int iters = b.opt.iters, warmup = b.opt.warmup;
  if (b.opt.small_iters > 0 && row_bytes <= kSmallBytes) {
    iters = b.opt.small_iters;
    warmup = std::max(warmup, iters / 10);
  }
  for (int i = 0; i < warmup; ++i) enqueue(b, call, impl);
  sync(b, "the warm-up");
  if (b.opt.graph <= 0) {
    check_cuda(cudaEventRecord(b.start, b.stream), "cudaEventRecord");
    for (int i = 0; i < iters; ++i) enqueue(b, call, impl);
    check_cuda(cudaEventRecord(b.stop, b.stream), "cudaEventRecord");
    sync(b, "the timed loop");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, b.start, b.stop), "cudaEventElapsedTime");
    return ms * 1000.0 / iters;
  }
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  check_cuda(cudaStreamBeginCapture(b.stream, cudaStreamCaptureModeThreadLocal),
             "cudaStreamBeginCapture");
  for (int i = 0; i < b.opt.graph; ++i) enqueue(b, call, impl);
  check_cuda(cudaStreamEndCapture(b.stream, &graph), "cudaStreamEndCapture");
  check_cuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  check_cuda(cudaGraphLaunch(exec, b.stream), "cudaGraphLaunch");  // first replay uploads it
  sync(b, "the first graph replay");
  const int launches = std::max(1, (iters + b.opt.graph - 1) / b.opt.graph);
  check_cuda(cudaEventRecord(b.start, b.stream), "cudaEventRecord");
  for (int i = 0; i < launches; ++i) check_cuda(cudaGraphLaunch(exec, b.stream), "cudaGraphLaunch");
  check_cuda(cudaEventRecord(b.stop, b.stream), "cudaEventRecord");
  sync(b, "the graph replays");
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, b.start, b.stop), "cudaEventElapsedTime");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return ms * 1000.0 / (static_cast<double>(launches) * b.opt.graph);
}

// Runs the call once on fresh data and counts this rank's wrong elements.
double check_once(Bench& b, const Call& call, Impl impl, const std::vector<uint8_t>& pattern,
                  std::vector<uint8_t>* scratch) {
  const Shape& s = call.shape;
  const size_t es = dtype_size(s.dtype);
  const size_t recv_bytes = recv_elems(s) * es, send_bytes = send_elems(s) * es;
  if (recv_bytes > 0)
    check_cuda(cudaMemsetAsync(call.recv, 0xff, recv_bytes, b.stream), "cudaMemsetAsync");
  check_cuda(cudaMemcpyAsync(const_cast<void*>(call.send), pattern.data(), send_bytes,
                             cudaMemcpyHostToDevice, b.stream),
             "cudaMemcpyAsync (data)");
  enqueue(b, call, impl);
  scratch->resize(recv_bytes);
  if (recv_bytes > 0)
    check_cuda(
        cudaMemcpyAsync(scratch->data(), call.recv, recv_bytes, cudaMemcpyDeviceToHost, b.stream),
        "cudaMemcpyAsync (result)");
  sync(b, "the checked run");
  return recv_bytes > 0 ? static_cast<double>(count_wrong(s, scratch->data())) : 0.0;
}

size_t next_size(size_t size, double factor) {
  const double next = std::floor(static_cast<double>(size) * factor);
  if (next >= 1.8e19) return SIZE_MAX;
  return std::max(size + 1, static_cast<size_t>(next));
}

CollResults run_coll(Bench& b, Coll coll) {
  const Options& o = b.opt;
  CollResults res{coll, busbw_factor(coll, b.nranks), {}, {}};
  const size_t es = dtype_size(o.dtype);
  if ((coll == Coll::broadcast || coll == Coll::reduce) && o.root >= b.nranks)
    fatal("-r " + std::to_string(o.root) + " is not a rank of this " + std::to_string(b.nranks) +
          "-rank job");
  const bool modes[2] = {o.modes != Modes::in_place,
                         o.modes != Modes::out_of_place && has_in_place(coll)};
  const bool impls[2] = {true, o.raw};
  if (b.rank == 0) print_table_header(stdout, b.info, coll);

  // This rank's send data for the largest size; smaller sizes use a prefix.
  std::vector<uint8_t> pattern, scratch;
  if (o.check) {
    Shape big{
        coll, o.dtype, o.op, o.root, b.rank, b.nranks, call_count(coll, o.max_bytes, es, b.nranks)};
    fill_send(big, &pattern);
  }
  for (size_t size = o.min_bytes; size <= o.max_bytes; size = next_size(size, o.factor)) {
    const size_t count = call_count(coll, size, es, b.nranks);
    if (count == 0) continue;
    Row row;
    row.count = count;
    row.bytes = row_bytes(coll, count, es, b.nranks);
    const Shape shape{coll, o.dtype, o.op, o.root, b.rank, b.nranks, count};
    std::vector<double> times(4, 0.0), wrong(4, 0.0);
    for (int m = 0; m < 2; ++m) {
      if (!modes[m]) continue;
      const Call call = make_call(shape, m == kInPlace, b.bufs.send, b.bufs.recv);
      for (int i = 0; i < 2; ++i) {
        if (!impls[i]) continue;
        times[static_cast<size_t>(m * 2 + i)] = time_loop(b, call, static_cast<Impl>(i), row.bytes);
        if (o.check)
          wrong[static_cast<size_t>(m * 2 + i)] =
              check_once(b, call, static_cast<Impl>(i), pattern, &scratch);
      }
    }
    reduce_all(b, &times, CC_MAX);
    if (o.check) reduce_all(b, &wrong, CC_SUM);
    for (int m = 0; m < 2; ++m)
      for (int i = 0; i < 2; ++i) {
        if (!modes[m] || !impls[i]) continue;
        Result& r = row.r[i][m];
        r.ran = true;
        r.time_us = times[static_cast<size_t>(m * 2 + i)];
        r.algbw = r.time_us > 0 ? static_cast<double>(row.bytes) / 1e3 / r.time_us : 0;
        r.busbw = r.algbw * res.factor;
        r.wrong = o.check ? wrong[static_cast<size_t>(m * 2 + i)] : -1;
      }
    if (b.rank == 0) print_row(stdout, b.info, coll, row);
    res.rows.push_back(row);
    if (size == SIZE_MAX) break;
  }
  if (b.rank == 0) print_summary(stdout, b.info, res);
  return res;
}

// The call check's host cost: eager 8 B all-reduces on b.comm (the check
// as configured, on by default), on a communicator made with
// CC_CHECK_CALLS=0 (the flight recorder's ring as configured), and on one
// that also has CC_TRACE_BUFFER=0 (nothing recorded), in alternating rounds
// so drift falls on all; the medians over rounds, slowest rank.
void time_check_cost(Bench& b) {
  constexpr int kRounds = 11;
  constexpr int kComms = 3;
  const int iters = b.opt.small_iters > 0 ? b.opt.small_iters : 1000;
  const char* saved_check = std::getenv("CC_CHECK_CALLS");
  const char* saved_ring = std::getenv("CC_TRACE_BUFFER");
  const std::string keep_check = saved_check != nullptr ? saved_check : "";
  const std::string keep_ring = saved_ring != nullptr ? saved_ring : "";
  cc_comm_t comms[kComms] = {b.comm, nullptr, nullptr};
  setenv("CC_CHECK_CALLS", "0", 1);
  check_cc(cc_comm_init_from_env(&comms[1], nullptr), "cc_comm_init_from_env (the check off)");
  setenv("CC_TRACE_BUFFER", "0", 1);
  check_cc(cc_comm_init_from_env(&comms[2], nullptr),
           "cc_comm_init_from_env (the check and the ring off)");
  if (saved_check != nullptr) setenv("CC_CHECK_CALLS", keep_check.c_str(), 1); else unsetenv("CC_CHECK_CALLS");
  if (saved_ring != nullptr) setenv("CC_TRACE_BUFFER", keep_ring.c_str(), 1); else unsetenv("CC_TRACE_BUFFER");
  check_cuda(cudaSetDevice(b.device), "cudaSetDevice");
  const cc_stream_t s = reinterpret_cast<cc_stream_t>(b.stream);
  // Per communicator: host microseconds per enqueue, and per call with the stream's wait.
  std::vector<double> enqueue_us[kComms], call_us[kComms];
  for (int round = 0; round < kRounds; ++round)
    for (int which = 0; which < kComms; ++which) {
      cc_comm_t c = comms[which];
      for (int i = 0; i < iters / 10 + 1; ++i)
        check_cc(cc_allreduce(b.stats, b.stats, 2, CC_FLOAT32, CC_SUM, c, s), "the warm-up");
      sync(b, "the warm-up");
      const auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i)
        check_cc(cc_allreduce(b.stats, b.stats, 2, CC_FLOAT32, CC_SUM, c, s), "cc_allreduce 8 B");
      const double enqueued = ms_since(t0);
      sync(b, "the timed loop");
      const double done = ms_since(t0);
      enqueue_us[which].push_back(enqueued * 1000.0 / iters);
      call_us[which].push_back(done * 1000.0 / iters);
    }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::vector<double> t;
  for (int which = 0; which < kComms; ++which) {
    t.push_back(median(enqueue_us[which]));
    t.push_back(median(call_us[which]));
  }
  reduce_all(b, &t, CC_MAX);
  check_cc(cc_comm_destroy(comms[1]), "cc_comm_destroy (the check off)");
  check_cc(cc_comm_destroy(comms[2]), "cc_comm_destroy (the check and the ring off)");
  check_cuda(cudaSetDevice(b.device), "cudaSetDevice");
  if (b.rank == 0)
    std::printf("# call check, eager 8 B all-reduce, us per call (median of %d rounds of %d, "
                "slowest rank), enqueue and with the stream's wait: check on %.3f, %.3f; "
                "CC_CHECK_CALLS=0 %.3f, %.3f; also CC_TRACE_BUFFER=0 %.3f, %.3f\n",
                kRounds, iters, t[0], t[1], t[2], t[3], t[4], t[5]);
}

}  // namespace
}  // namespace cc::tools::bench

int main(int argc, char** argv) {
  using namespace cc::tools::bench;
  // NVLink SHARP stays off unless the user says otherwise (the machines we
  // measure on need it off).
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  Bench b;
  std::string error;
  if (!parse_options(argc, argv, &b.opt, &error)) {
    if (error.empty()) {
      std::fputs(usage().c_str(), stdout);
      return 0;
    }
    std::fprintf(stderr, "cc-bench: %s\n(cc-bench --help shows the usage)\n", error.c_str());
    return 2;
  }
  g_bench = &b;
  init(b);
  if (Status st = allocate_buffers(b.opt, b.comm, b.raw, &b.bufs, &b.info.registration); !st.ok)
    fatal(st.message);
  if (b.rank == 0) print_run_header(stdout, b.info);
  if (b.opt.check_cost) time_check_cost(b);

  std::vector<CollResults> all;
  for (Coll c : b.opt.colls) all.push_back(run_coll(b, c));

  double wrong = 0;
  for (const auto& res : all)
    for (const Row& row : res.rows)
      for (const auto& impl : row.r)
        for (const Result& r : impl)
          if (r.ran && r.wrong > 0) wrong += r.wrong;

  int rc = wrong > 0 ? 1 : 0;
  if (b.rank == 0) {
    const bool several = all.size() > 1;
    for (auto& res : all) {
      if (b.opt.plot.empty()) continue;
      const std::string path = plot_path(b.opt.plot, res.coll, several);
      if (!write_plot(path, b.info, res, &error)) {
        std::fprintf(stderr, "cc-bench: --plot: %s\n", error.c_str());
        rc = 1;
      } else {
        const size_t slash = path.find_last_of('/');
        res.plot = slash == std::string::npos ? path : path.substr(slash + 1);
      }
    }
    if (!b.opt.csv.empty() && !write_csv(b.opt.csv, b.info, all, &error)) {
      std::fprintf(stderr, "cc-bench: --csv: %s\n", error.c_str());
      rc = 1;
    }
    if (!b.opt.json.empty() && !write_json(b.opt.json, b.info, all, &error)) {
      std::fprintf(stderr, "cc-bench: --json: %s\n", error.c_str());
      rc = 1;
    }
    if (wrong > 0) std::printf("# FAILED: %.0f wrong elements over all ranks\n", wrong);
  }

  free_buffers(b.comm, b.raw, &b.bufs);
  if (b.raw != nullptr) ncclCommDestroy(b.raw);
  b.raw = nullptr;
  cudaFree(b.stats);
  cudaEventDestroy(b.start);
  cudaEventDestroy(b.stop);
  cudaStreamDestroy(b.stream);
  if (cc_result_t r = cc_comm_destroy(b.comm); r != CC_SUCCESS) {
    std::fprintf(stderr, "cc-bench (rank %d): cc_comm_destroy: %s\n", b.rank, cc_words(r).c_str());
    rc = 1;
  }
  return rc;
}
