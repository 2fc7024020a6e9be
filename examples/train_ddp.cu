// Data-parallel training on cc: a linear model y = w.x + b trained with SGD
// on synthetic data. Each rank holds its own shard; after every backward pass
// the gradients are averaged with cc_allreduce(..., CC_AVG, ...), so every
// rank applies the same update. Rank 0 prints the loss every few epochs; at
// the end every rank checks that all ranks hold identical weights.
//
//   cc-run -n 2 -- ./train_ddp
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include <cuda_runtime.h>

#include "examples/example_util.h"

namespace {

constexpr int kFeatures = 16;
constexpr int kSamplesPerRank = 4096;
constexpr int kEpochs = 200;
constexpr float kLearningRate = 0.1f;
constexpr int kParams = kFeatures + 1;  // weights, then the bias

// grad[0..F) += err * x / n, grad[F] += err / n, loss += err^2 / n.
__global__ void forward_backward(const float* x, const float* y, const float* params, int n,
                                 float* grad, float* loss) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float* xi = x + static_cast<size_t>(i) * kFeatures;
  float pred = params[kFeatures];
  for (int f = 0; f < kFeatures; ++f) pred += params[f] * xi[f];
  const float err = pred - y[i];
  for (int f = 0; f < kFeatures; ++f) atomicAdd(&grad[f], 2.0f * err * xi[f] / n);
  atomicAdd(&grad[kFeatures], 2.0f * err / n);
  atomicAdd(loss, err * err / n);
}

__global__ void sgd_step(float* params, const float* grad, float lr) {
  const int p = threadIdx.x;
  if (p < kParams) params[p] -= lr * grad[p];
}

bool cuda_ok(cudaError_t e, const char* what, int rank) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "rank %d: %s: %s\n", rank, what, cudaGetErrorString(e));
  return false;
}

}  // namespace

int main() {
  cc_comm_t comm = nullptr;
  int rank = 0, nranks = 1;
  if (example_join(&comm, &rank, &nranks) != 0) return 1;
  cc_result_t r = CC_SUCCESS;

  // This rank's shard: x ~ N(0, 1), y = w*.x + b* + noise, seeded by rank.
  std::mt19937 gen(1234u + static_cast<unsigned>(rank));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> true_w(kFeatures);
  for (int f = 0; f < kFeatures; ++f) true_w[f] = 0.5f * static_cast<float>(f % 5) - 1.0f;
  const float true_b = 0.25f;
  std::vector<float> hx(static_cast<size_t>(kSamplesPerRank) * kFeatures), hy(kSamplesPerRank);
  for (int i = 0; i < kSamplesPerRank; ++i) {
    float y = true_b + 0.01f * normal(gen);
    for (int f = 0; f < kFeatures; ++f) {
      const float v = normal(gen);
      hx[static_cast<size_t>(i) * kFeatures + f] = v;
      y += true_w[f] * v;
    }
    hy[i] = y;
  }

  float *x = nullptr, *y = nullptr, *params = nullptr, *grad = nullptr, *loss = nullptr;
  cudaStream_t stream = nullptr;
  if (!cuda_ok(cudaMalloc(&x, hx.size() * sizeof(float)), "cudaMalloc", rank) ||
      !cuda_ok(cudaMalloc(&y, hy.size() * sizeof(float)), "cudaMalloc", rank) ||
      !cuda_ok(cudaMalloc(&params, kParams * sizeof(float)), "cudaMalloc", rank) ||
      !cuda_ok(cudaMalloc(&grad, kParams * sizeof(float)), "cudaMalloc", rank) ||
      !cuda_ok(cudaMalloc(&loss, sizeof(float)), "cudaMalloc", rank) ||
      !cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate", rank))
    return 1;
  cudaMemcpy(x, hx.data(), hx.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(y, hy.data(), hy.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(params, 0, kParams * sizeof(float));  // identical start on every rank
  const auto s = reinterpret_cast<cc_stream_t>(stream);

  float first_loss = -1, last_loss = -1;
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    cudaMemsetAsync(grad, 0, kParams * sizeof(float), stream);
    cudaMemsetAsync(loss, 0, sizeof(float), stream);
    forward_backward<<<(kSamplesPerRank + 255) / 256, 256, 0, stream>>>(
        x, y, params, kSamplesPerRank, grad, loss);
    // The data-parallel step: average gradients (and the loss, for printing).
    if ((r = cc_allreduce(grad, grad, kParams, CC_FLOAT32, CC_AVG, comm, s)) != CC_SUCCESS)
      return cc_failed("cc_allreduce(gradients)", r);
    if ((r = cc_allreduce(loss, loss, 1, CC_FLOAT32, CC_AVG, comm, s)) != CC_SUCCESS)
      return cc_failed("cc_allreduce(loss)", r);
    sgd_step<<<1, 32, 0, stream>>>(params, grad, kLearningRate);
    if (epoch % 20 == 0 || epoch == kEpochs - 1) {
      float h = 0;
      cudaMemcpyAsync(&h, loss, sizeof h, cudaMemcpyDeviceToHost, stream);
      if (!cuda_ok(cudaStreamSynchronize(stream), "training step", rank)) return 1;
      if (first_loss < 0) first_loss = h;
      last_loss = h;
      if (rank == 0) std::printf("epoch %3d: loss %.6f\n", epoch, h);
    }
  }

  // Every rank must hold the same weights: the MAX and MIN over ranks agree.
  float *wmax = nullptr, *wmin = nullptr;
  cudaMalloc(&wmax, kParams * sizeof(float));
  cudaMalloc(&wmin, kParams * sizeof(float));
  if ((r = cc_allreduce(params, wmax, kParams, CC_FLOAT32, CC_MAX, comm, s)) != CC_SUCCESS ||
      (r = cc_allreduce(params, wmin, kParams, CC_FLOAT32, CC_MIN, comm, s)) != CC_SUCCESS)
    return cc_failed("cc_allreduce(weights)", r);
  std::vector<float> hmax(kParams), hmin(kParams), mine(kParams);
  cudaMemcpyAsync(hmax.data(), wmax, kParams * sizeof(float), cudaMemcpyDeviceToHost, stream);
  cudaMemcpyAsync(hmin.data(), wmin, kParams * sizeof(float), cudaMemcpyDeviceToHost, stream);
  cudaMemcpyAsync(mine.data(), params, kParams * sizeof(float), cudaMemcpyDeviceToHost, stream);
  if (!cuda_ok(cudaStreamSynchronize(stream), "weight check", rank)) return 1;
  int differ = 0;
  for (int p = 0; p < kParams; ++p) differ += hmax[p] != hmin[p] || mine[p] != hmax[p];

  const bool learned = last_loss < 0.01f * first_loss;
  if (rank == 0)
    std::printf("loss %.6f -> %.6f; w[1] = %.3f (true %.3f), b = %.3f (true %.3f)\n", first_loss,
                last_loss, mine[1], true_w[1], mine[kFeatures], true_b);
  std::printf("rank %d: weights %s across %d ranks%s\n", rank, differ == 0 ? "identical" : "DIFFER",
              nranks, learned ? "" : "; the loss did not fall enough");

  cudaFree(wmax);
  cudaFree(wmin);
  cudaFree(x);
  cudaFree(y);
  cudaFree(params);
  cudaFree(grad);
  cudaFree(loss);
  cudaStreamDestroy(stream);
  if ((r = cc_comm_destroy(comm)) != CC_SUCCESS) return cc_failed("cc_comm_destroy", r);
  return differ == 0 && learned ? 0 : 1;
}
