// Data-parallel training that survives a failed rank: the linear model of
// train_ddp.cu, trained with SGD, one shard of synthetic data per rank. A
// step is committed only once its all-reduce is known to have completed with
// every rank's data (cc_comm_check after waiting for the stream). When a call
// fails because a rank died, the survivors make the next generation of the
// communicator: by default cc_comm_regrow, which waits for a replacement
// (cc-run --max-restarts starts one with the failed rank's number); with
// --shrink, cc_comm_shrink, which goes on without it. Then every rank agrees
// on the last step all of them committed (a survivor that committed one more
// takes it back), the lowest rank holding weights broadcasts them (a
// replacement starts with none), and the failed step is done again.
//
// Everything is deterministic (the gradient is summed in a fixed order, the
// data is seeded by the rank a process was started with), so with regrow the
// weights end bit-identical to a run in which nothing failed; every rank
// prints a hash of them to compare.
//
//   cc-run -n 2 -- ./train_recover                                    # nothing fails
//   cc-run -n 2 --max-restarts 1 -- ./train_recover --die-rank 1 --die-at 50
//   cc-run -n 2 --max-restarts 0 -- ./train_recover --shrink --die-rank 1 --die-at 50
//
// --die-rank R --die-at S: rank R kills itself (SIGKILL) at step S, in its
// first life only (not when restarted: CC_RESTART_COUNT, or generation > 0).
// For a soak of many failures (scripts/soak.sh): --steps N (default 200),
// --step-ms MS sleeps after each step (only while FILE exists, with
// --pace-while FILE), and --report-times prints when this rank joined or
// rejoined and when its first collective after each recovery completed:
//   rank R: timing: joined|rejoined|recovered generation G at NS ns
// (NS: CLOCK_REALTIME in nanoseconds).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "cc/cc.h"

namespace {

constexpr int kFeatures = 16;
constexpr int kSamplesPerRank = 4096;
constexpr float kLearningRate = 0.1f;
constexpr int kParams = kFeatures + 1;  // weights, then the bias
constexpr int kThreads = 256;
constexpr int kAttempts = 10;  // recoveries broken by a further failure, in a row

// grad[p] for p < kParams, and grad[kParams] = the loss, each summed by one
// block in a fixed order: the same bits on every run.
__global__ void gradient(const float* x, const float* y, const float* params, int n, float* grad) {
  __shared__ float part[kThreads];
  const int p = blockIdx.x;
  float sum = 0.0f;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const float* xi = x + static_cast<size_t>(i) * kFeatures;
    float pred = params[kFeatures];
    for (int f = 0; f < kFeatures; ++f) pred += params[f] * xi[f];
    const float err = pred - y[i];
    sum += p < kFeatures ? 2.0f * err * xi[p] : p == kFeatures ? 2.0f * err : err * err;
  }
  part[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) grad[p] = part[0] / n;
}

__global__ void sgd_step(float* params, const float* grad, float lr) {
  const int p = threadIdx.x;
  if (p < kParams) params[p] -= lr * grad[p];
}

struct Options {
  bool shrink = false;
  int die_rank = -1;
  int die_at = -1;
  int steps = 200;
  int step_ms = 0;
  std::string pace_while;
  bool report_times = false;
};

bool is_failure(cc_result_t r) {
  return r == CC_ERR_PEER_FAILED || r == CC_ERR_TIMEOUT || r == CC_ERR_ABORTED;
}

[[noreturn]] void die(const char* what, cc_result_t r) {
  std::fprintf(stderr, "%s: %s\n  %s\n", what, cc_result_string(r), cc_last_error());
  std::exit(1);
}

void cuda_check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

long long wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

uint64_t fnv1a(const void* data, size_t bytes) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// One training process: its shard, its weights and its communicator.
class Trainer {
 public:
  Trainer(cc_comm_t comm, const Options& o) : comm_(comm), o_(o) {
    cc_comm_rank(comm_, &shard_);  // the rank it was started with: its data
    int generation = 0;
    cc_comm_generation(comm_, &generation);
    have_state_ = generation == 0;  // a replacement takes its state from a survivor
    timing(have_state_ ? "joined" : "rejoined");
    make_data();
    cuda_check(cudaStreamCreate(&stream_), "cudaStreamCreate");
    cuda_check(cudaMalloc(&params_, kParams * sizeof(float)), "cudaMalloc");
    cuda_check(cudaMalloc(&prev_, kParams * sizeof(float)), "cudaMalloc");
    cuda_check(cudaMalloc(&grad_, (kParams + 1) * sizeof(float)), "cudaMalloc");
    cuda_check(cudaMalloc(&ints_, 2 * sizeof(int)), "cudaMalloc");
    cudaMemset(params_, 0, kParams * sizeof(float));  // identical start on every rank
    cudaMemset(prev_, 0, kParams * sizeof(float));
    if (!have_state_) {
      std::printf("rank %d: a replacement (generation %d): taking the weights from a survivor\n",
                  shard_, generation);
      recover_state();
    }
  }

  void train() {
    while (done_ < o_.steps) {
      if (done_ == o_.die_at && shard_ == o_.die_rank && first_life()) {
        std::printf("rank %d: dying at step %d\n", shard_, done_);
        std::fflush(stdout);
        raise(SIGKILL);
      }
      cc_result_t r = step();
      if (r == CC_SUCCESS) {
        commit();
        pace();
        continue;
      }
      if (!is_failure(r)) die("a training step", r);
      std::printf("rank %d: step %d failed (%s); recovering\n", shard_, done_,
                  cc_result_string(r));
      std::fflush(stdout);
      next_generation();
      recover_state();
    }
  }

  int finish() {
    // Every rank must hold the same weights: the MAX and MIN over ranks agree.
    float *wmax = nullptr, *wmin = nullptr;
    cuda_check(cudaMalloc(&wmax, kParams * sizeof(float)), "cudaMalloc");
    cuda_check(cudaMalloc(&wmin, kParams * sizeof(float)), "cudaMalloc");
    const auto s = reinterpret_cast<cc_stream_t>(stream_);
    cc_result_t r;
    if ((r = cc_allreduce(params_, wmax, kParams, CC_FLOAT32, CC_MAX, comm_, s)) != CC_SUCCESS ||
        (r = cc_allreduce(params_, wmin, kParams, CC_FLOAT32, CC_MIN, comm_, s)) != CC_SUCCESS)
      die("cc_allreduce(weights)", r);
    std::vector<float> hmax(kParams), hmin(kParams), mine(kParams);
    cudaMemcpyAsync(hmax.data(), wmax, kParams * sizeof(float), cudaMemcpyDeviceToHost, stream_);
    cudaMemcpyAsync(hmin.data(), wmin, kParams * sizeof(float), cudaMemcpyDeviceToHost, stream_);
    cudaMemcpyAsync(mine.data(), params_, kParams * sizeof(float), cudaMemcpyDeviceToHost, stream_);
    cuda_check(cudaStreamSynchronize(stream_), "the weight check");
    if ((r = cc_comm_check(comm_)) != CC_SUCCESS) die("the weight check", r);
    int differ = 0;
    for (int p = 0; p < kParams; ++p) differ += hmax[p] != hmin[p] || mine[p] != hmax[p];
    int nranks = 0, generation = 0;
    cc_comm_size(comm_, &nranks);
    cc_comm_generation(comm_, &generation);
    // The loss starts near 8.6 and falls to the noise (1e-4); a replacement
    // sees only the later part of it.
    const bool learned = last_loss_ >= 0 && last_loss_ < 0.01f;
    std::printf(
        "rank %d: weights %s across %d ranks after %d steps (generation %d); weights hash "
        "0x%016llx; loss %.6f -> %.6f%s\n",
        shard_, differ == 0 ? "identical" : "DIFFER", nranks, done_, generation,
        static_cast<unsigned long long>(fnv1a(mine.data(), mine.size() * sizeof(float))),
        first_loss_, last_loss_, learned ? "" : "; the loss did not fall enough");
    cudaFree(wmax);
    cudaFree(wmin);
    if ((r = cc_comm_destroy(comm_)) != CC_SUCCESS) die("cc_comm_destroy", r);
    return differ == 0 && learned ? 0 : 1;
  }

 private:
  void timing(const char* event) const {
    if (!o_.report_times) return;
    int generation = 0;
    cc_comm_generation(comm_, &generation);
    std::printf("rank %d: timing: %s generation %d at %lld ns\n", shard_, event, generation,
                wall_ns());
    std::fflush(stdout);
  }

  void pace() const {
    if (o_.step_ms <= 0) return;
    if (!o_.pace_while.empty() && access(o_.pace_while.c_str(), F_OK) != 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(o_.step_ms));
  }

  bool first_life() const {
    int generation = 0;
    cc_comm_generation(comm_, &generation);
    return generation == 0 && std::getenv("CC_RESTART_COUNT") == nullptr;
  }

  // This rank's shard: x ~ N(0, 1), y = w*.x + b* + noise, seeded by its rank.
  void make_data() {
    std::mt19937 gen(1234u + static_cast<unsigned>(shard_));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> true_w(kFeatures);
    for (int f = 0; f < kFeatures; ++f) true_w[f] = 0.5f * static_cast<float>(f % 5) - 1.0f;
    std::vector<float> hx(static_cast<size_t>(kSamplesPerRank) * kFeatures), hy(kSamplesPerRank);
    for (int i = 0; i < kSamplesPerRank; ++i) {
      float y = 0.25f + 0.01f * normal(gen);
      for (int f = 0; f < kFeatures; ++f) {
        const float v = normal(gen);
        hx[static_cast<size_t>(i) * kFeatures + f] = v;
        y += true_w[f] * v;
      }
      hy[i] = y;
    }
    cuda_check(cudaMalloc(&x_, hx.size() * sizeof(float)), "cudaMalloc");
    cuda_check(cudaMalloc(&y_, hy.size() * sizeof(float)), "cudaMalloc");
    cudaMemcpy(x_, hx.data(), hx.size() * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(y_, hy.data(), hy.size() * sizeof(float), cudaMemcpyHostToDevice);
  }

  // The gradient of this step, averaged over the ranks (the loss with it).
  // CC_SUCCESS only when the all-reduce is known to have completed whole.
  cc_result_t step() {
    gradient<<<kParams + 1, kThreads, 0, stream_>>>(x_, y_, params_, kSamplesPerRank, grad_);
    const cc_result_t r = cc_allreduce(grad_, grad_, kParams + 1, CC_FLOAT32, CC_AVG, comm_,
                                       reinterpret_cast<cc_stream_t>(stream_));
    if (r != CC_SUCCESS) return r;
    // A dead peer's all-reduce is ended by the watchdog's abort: this returns.
    cuda_check(cudaStreamSynchronize(stream_), "a training step");
    return cc_comm_check(comm_);
  }

  void commit() {
    cudaMemcpyAsync(prev_, params_, kParams * sizeof(float), cudaMemcpyDeviceToDevice, stream_);
    sgd_step<<<1, 32, 0, stream_>>>(params_, grad_, kLearningRate);
    if (done_ % 20 == 0 || done_ == o_.steps - 1) {
      float loss = 0;
      cudaMemcpyAsync(&loss, grad_ + kParams, sizeof loss, cudaMemcpyDeviceToHost, stream_);
      cuda_check(cudaStreamSynchronize(stream_), "a training step");
      if (first_loss_ < 0) first_loss_ = loss;
      last_loss_ = loss;
      if (shard_ == 0 || o_.shrink) std::printf("rank %d: step %3d: loss %.6f\n", shard_, done_, loss);
    }
    ++done_;
  }

  // The communicator's next generation, called again while a further
  // failure breaks the attempt.
  void next_generation() {
    int nranks = 0;
    cc_comm_size(comm_, &nranks);
    for (int attempt = 1;; ++attempt) {
      cc_comm_t next = nullptr;
      const cc_result_t r = o_.shrink ? cc_comm_shrink(comm_, 0, &next)
                                      : cc_comm_regrow(comm_, nranks, 0, &next);
      if (r == CC_SUCCESS) {
        int failed[64], count = 0, generation = 0, size = 0, rank = 0;
        cc_comm_failed_ranks(next, failed, 64, &count);
        cc_comm_generation(next, &generation);
        cc_comm_size(next, &size);
        cc_comm_rank(next, &rank);
        std::string list;
        for (int i = 0; i < count && i < 64; ++i) list += (i ? ", " : "") + std::to_string(failed[i]);
        std::printf("rank %d: %s to generation %d: rank %d of %d (ranks %s %s)\n", shard_,
                    o_.shrink ? "shrunk" : "regrown", generation, rank, size, list.c_str(),
                    o_.shrink ? "left out" : "replaced");
        std::fflush(stdout);
        cc_comm_destroy(comm_);  // a failed communicator returns at once
        comm_ = next;
        return;
      }
      if (!is_failure(r) || attempt == kAttempts)
        die(o_.shrink ? "cc_comm_shrink" : "cc_comm_regrow", r);
      std::printf("rank %d: attempt %d failed (%s); again\n", shard_, attempt, cc_last_error());
    }
  }

  // All ranks agree on the last step every one of them committed, and take
  // the weights of the lowest rank that holds some.
  void recover_state() {
    const auto s = reinterpret_cast<cc_stream_t>(stream_);
    int mine[2] = {have_state_ ? done_ : INT_MAX, INT_MAX};
    int rank = 0;
    cc_comm_rank(comm_, &rank);
    if (have_state_) mine[1] = rank;
    cudaMemcpyAsync(ints_, mine, sizeof mine, cudaMemcpyHostToDevice, stream_);
    cc_result_t r = cc_allreduce(ints_, ints_, 2, CC_INT32, CC_MIN, comm_, s);
    int agreed[2] = {0, 0};
    if (r == CC_SUCCESS) {
      cudaMemcpyAsync(agreed, ints_, sizeof agreed, cudaMemcpyDeviceToHost, stream_);
      cuda_check(cudaStreamSynchronize(stream_), "agreeing on the step");
      r = cc_comm_check(comm_);
    }
    if (r != CC_SUCCESS) return after_failure(r);
    timing("recovered");
    const int step = agreed[0], root = agreed[1];
    if (have_state_ && done_ == step + 1) {  // this rank committed the step the others did not
      cudaMemcpyAsync(params_, prev_, kParams * sizeof(float), cudaMemcpyDeviceToDevice, stream_);
    } else if (have_state_ && done_ != step) {
      std::fprintf(stderr, "rank %d: at step %d, the others at %d: more than one apart\n", shard_,
                   done_, step);
      std::exit(1);
    }
    r = cc_broadcast(params_, params_, kParams, CC_FLOAT32, root, comm_, s);
    if (r == CC_SUCCESS) {
      cudaMemcpyAsync(prev_, params_, kParams * sizeof(float), cudaMemcpyDeviceToDevice, stream_);
      cuda_check(cudaStreamSynchronize(stream_), "taking the weights");
      r = cc_comm_check(comm_);
    }
    if (r != CC_SUCCESS) return after_failure(r);
    done_ = step;
    have_state_ = true;
    std::printf("rank %d: going on from step %d with rank %d's weights\n", shard_, step, root);
    std::fflush(stdout);
  }

  void after_failure(cc_result_t r) {
    if (!is_failure(r)) die("agreeing on the state after a recovery", r);
    next_generation();
    recover_state();
  }

  cc_comm_t comm_;
  Options o_;
  int shard_ = 0;
  bool have_state_ = true;
  int done_ = 0;  // steps committed
  float first_loss_ = -1, last_loss_ = -1;
  cudaStream_t stream_ = nullptr;
  float *x_ = nullptr, *y_ = nullptr, *params_ = nullptr, *prev_ = nullptr, *grad_ = nullptr;
  int* ints_ = nullptr;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--shrink") {
      o.shrink = true;
    } else if (a == "--regrow") {
      o.shrink = false;
    } else if ((a == "--die-rank" || a == "--die-at") && i + 1 < argc) {
      (a == "--die-rank" ? o.die_rank : o.die_at) = std::atoi(argv[++i]);
    } else if ((a == "--steps" || a == "--step-ms") && i + 1 < argc) {
      (a == "--steps" ? o.steps : o.step_ms) = std::atoi(argv[++i]);
    } else if (a == "--pace-while" && i + 1 < argc) {
      o.pace_while = argv[++i];
    } else if (a == "--report-times") {
      o.report_times = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--shrink | --regrow] [--die-rank R --die-at STEP] [--steps N]\n"
                   "       [--step-ms MS [--pace-while FILE]] [--report-times]\n",
                   argv[0]);
      std::exit(2);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  cc_comm_t comm = nullptr;
  if (cc_result_t r = cc_comm_init_from_env(&comm, nullptr); r != CC_SUCCESS)
    die("cc_comm_init_from_env", r);
  int device = 0;
  cc_comm_device(comm, &device);
  cuda_check(cudaSetDevice(device), "cudaSetDevice");
  Trainer t(comm, o);
  t.train();
  return t.finish();
}
