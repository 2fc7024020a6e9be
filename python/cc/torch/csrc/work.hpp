// A cc operation as torch.distributed sees it, with ProcessGroupNCCL's stream
// semantics: the operation was queued on cc's stream after the caller's
// current stream; wait() and synchronize() make the caller's current stream
// wait for it (no host wait), except for a barrier, a wait with an explicit
// timeout, or CC_TORCH_BLOCKING_WAIT=1, which wait on the host up to a
// deadline. getFuture() completes, CUDA-aware, when the operation does.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>
#include <ATen/cuda/CUDAEvent.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "comm_state.hpp"

namespace cc_torch {

class CCWork : public c10d::Work {
 public:
  CCWork(int rank, c10d::OpType type, c10::Device device, std::shared_ptr<CommState> state,
         bool host_wait);

  // Adds tensors the operation writes (the future's value and result()).
  void add_outputs(const std::vector<at::Tensor>& outputs);
  // Called once the operation is queued on cc's stream: records the end
  // event there and completes the future (its event is recorded on cc's
  // stream too, so callbacks and waiters order after the operation).
  void enqueued(const c10::cuda::CUDAStream& stream);
  // For a Work with nothing queued (an empty coalescing block): done now.
  void nothing_queued();
  // For a Work whose operations were dropped before they were queued: wait()
  // and the future raise `why`.
  void never_queued(const std::string& why) noexcept;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  void wait_on_host(std::chrono::milliseconds timeout);

  const c10::Device device_;
  const std::shared_ptr<CommState> state_;
  const bool host_wait_;
  std::vector<at::Tensor> outputs_;
  at::cuda::CUDAEvent end_;
  bool recorded_ = false;
  std::exception_ptr error_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// Whether CC_TORCH_BLOCKING_WAIT=1 asks every wait() to block the host.
bool blocking_wait_requested();

}  // namespace cc_torch
