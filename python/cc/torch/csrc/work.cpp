#include "work.hpp"

#include <thread>
#include <utility>

#include <ATen/core/jit_type.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace cc_torch {
namespace {

// The DistBackendError fail() throws, caught to be stored in the Work.
std::exception_ptr make_error(const std::string& message) {
  try {
    fail(message);
  } catch (...) {
    return std::current_exception();
  }
}

}  // namespace

bool blocking_wait_requested() {
  static const bool requested = env_flag("CC_TORCH_BLOCKING_WAIT");
  return requested;
}

CCWork::CCWork(int rank, c10d::OpType type, c10::Device device, std::shared_ptr<CommState> state,
               bool host_wait)
    : c10d::Work(rank, type),
      device_(device),
      state_(std::move(state)),
      host_wait_(host_wait || blocking_wait_requested()),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()), std::vector<c10::Device>{device})) {}

void CCWork::add_outputs(const std::vector<at::Tensor>& outputs) {
  outputs_.insert(outputs_.end(), outputs.begin(), outputs.end());
}

void CCWork::enqueued(const c10::cuda::CUDAStream& stream) {
  end_.record(stream);
  recorded_ = true;
  c10::cuda::CUDAStreamGuard guard(stream);
  future_->markCompleted(c10::IValue(outputs_));
}

void CCWork::nothing_queued() { future_->markCompleted(c10::IValue(outputs_)); }

void CCWork::never_queued(const std::string& why) noexcept {
  try {
    error_ = make_error(why);
    if (!future_->completed()) future_->setError(error_);
  } catch (...) {  // the message is lost, the Work still reads as failed
  }
}

bool CCWork::isCompleted() { return !recorded_ || end_.query(); }

bool CCWork::isSuccess() const { return error_ == nullptr; }

std::exception_ptr CCWork::exception() const { return error_; }

std::vector<at::Tensor> CCWork::result() { return outputs_; }

void CCWork::synchronize() {
  if (recorded_) end_.block(c10::cuda::getCurrentCUDAStream(device_.index()));
}

bool CCWork::wait(std::chrono::milliseconds timeout) {
  synchronize();
  // torch passes kNoTimeout (0) when the caller gave none; a negative value
  // (kUnsetTimeout) means none as well, not a deadline already passed.
  const bool has_timeout = timeout > std::chrono::milliseconds(0);
  if (host_wait_ || has_timeout) wait_on_host(has_timeout ? timeout : state_->timeout());
  if (error_ != nullptr) std::rethrow_exception(error_);
  return true;
}

void CCWork::wait_on_host(std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  while (!isCompleted()) {
    if (Clock::now() >= deadline) {
      state_->abort();
      error_ = make_error("cc backend (rank " + std::to_string(rank_) +
                          "): " + c10d::opTypeToString(opType_) + " did not finish within " +
                          std::to_string(timeout.count()) +
                          " ms; the communicator was aborted. Check that every rank makes the "
                          "same calls, or give a longer timeout");
      std::rethrow_exception(error_);
    }
    // Short operations finish within microseconds; longer ones are polled
    // more gently.
    if (Clock::now() - start < std::chrono::milliseconds(1))
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  // A peer that died made cc abort the communicator, which ends the stuck
  // operation too: a finished event alone does not mean success.
  const std::string failed = state_->failure_words();
  if (!failed.empty()) error_ = make_error(failed);
}

c10::intrusive_ptr<c10::ivalue::Future> CCWork::getFuture() { return future_; }

}  // namespace cc_torch
