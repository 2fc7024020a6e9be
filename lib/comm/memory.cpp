// The fast paths: memory NCCL can reach without copies (ncclMemAlloc),
// buffer registration (ncclCommRegister) and symmetric windows
// (ncclCommWindowRegister, NCCL 2.27+, looked up at run time so libcc still
// loads with an older NCCL).
#include <string>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "lib/comm/memory.hpp"

#include "common/return_if_error.hpp"
#include "lib/comm/comm.hpp"
#include "lib/comm/handle.hpp"
#include "lib/core/nccl_symbol.hpp"

namespace cc::comm {
namespace {

using Clock = std::chrono::steady_clock;

// NCCL_VERSION(2, 27, 0) as ncclGetVersion reports it.
constexpr int kWindowMinVersion = 22700;

std::string version_text(int code) {
  if (code < 10000) return std::to_string(code);  // never a 2.x we support; print raw
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

std::string who(const char* call, const cc_comm* c) {
  return std::string(call) + " on " + c->who();
}

Status no_device_status(const char* call) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaSuccess && count > 0) return Status::success();
  cudaGetLastError();
  return make_status(CC_ERR_NO_DEVICE,
                     std::string(call) + ": no CUDA device is visible (" +
                         (e != cudaSuccess ? std::string(cudaGetErrorString(e)) : "0 devices") +
                         "); check CUDA_VISIBLE_DEVICES and the driver (nvidia-smi)");
}

// Common checks of the registration calls: a live handle, a buffer, a size
// and somewhere to put the result.
Status check_register(const char* call, cc_comm* comm, const void* buf, size_t size, void** out,
                      const char* out_name) {
  if (out != nullptr) *out = nullptr;
  CC_RETURN_IF_ERROR(check_handle(call, comm));
  if (buf == nullptr)
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       who(call, comm) +
                           ": buf is NULL; pass device memory, ideally from "
                           "cc_mem_alloc");
  if (size == 0)
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       who(call, comm) + ": size is 0; pass the buffer's size in bytes");
  if (out == nullptr)
    return make_status(CC_ERR_INVALID_ARGUMENT, who(call, comm) + ": " + out_name +
                                                    " is NULL; pass the address of a void* "
                                                    "to receive it");
  if (!core::usable(*comm)) return core::state_status(call, *comm);
  return Status::success();
}

// The communicator is non-blocking: a call may return ncclInProgress, and
// its output is only valid once the communicator is ready again.
template <class F>
Status run_nccl(const char* call, const char* nccl_call, cc_comm* comm, F&& f) {
  ncclResult_t r;
  {
    core::CallGuard guard(*comm);
    if (comm->abort_requested.load(std::memory_order_seq_cst))
      return core::state_status(call, *comm);
    r = f();
    if (r == ncclInProgress || r == ncclSuccess)
      r = core::wait_ready(*comm, comm->nccl, Clock::now() + comm->timeout);
  }
  if (r == ncclSuccess) return Status::success();
  if (r != ncclInProgress) return core::nccl_failure(nccl_call, *comm, r);
  if (!core::usable(*comm) || comm->abort_requested.load()) return core::state_status(call, *comm);
  return make_status(CC_ERR_TIMEOUT,
                     who(call, comm) + ": " + nccl_call + " did not finish within " +
                         std::to_string(comm->timeout.count()) +
                         " ms; every rank must make the same registration calls in the same "
                         "order, or raise CC_TIMEOUT_MS");
}

using WindowRegisterFn = ncclResult_t (*)(ncclComm_t, void*, size_t, void**, int);
using WindowDeregisterFn = ncclResult_t (*)(ncclComm_t, void*);

// The window calls of the NCCL actually loaded (NULL before 2.27), plus its
// version; an error message when windows are not there.
Status window_calls(const char* call, const cc_comm* comm, WindowRegisterFn* reg,
                    WindowDeregisterFn* dereg) {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) version = 0;
  *reg = reinterpret_cast<WindowRegisterFn>(core::nccl_symbol("ncclCommWindowRegister"));
  *dereg = reinterpret_cast<WindowDeregisterFn>(core::nccl_symbol("ncclCommWindowDeregister"));
  if (version >= kWindowMinVersion && *reg != nullptr && *dereg != nullptr)
    return Status::success();
  return make_status(CC_ERR_INVALID_USAGE,
                     who(call, comm) +
                         ": symmetric windows need NCCL 2.27 or newer, and the "
                         "NCCL loaded is " +
                         version_text(version) +
                         "; use cc_comm_register instead, or run with a newer libnccl");
}

#ifdef NCCL_WIN_COLL_SYMMETRIC
constexpr int kWinSymmetric = NCCL_WIN_COLL_SYMMETRIC;
#else
constexpr int kWinSymmetric = 0x01;
#endif

}  // namespace

Status mem_alloc(void** ptr, size_t size) {
  if (ptr == nullptr)
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       "cc_mem_alloc: ptr is NULL; pass the address of a void* to receive the "
                       "allocation");
  *ptr = nullptr;
  if (size == 0)
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       "cc_mem_alloc: size is 0; pass the number of bytes to allocate");
  CC_RETURN_IF_ERROR(no_device_status("cc_mem_alloc"));
  int device = -1;
  cudaGetDevice(&device);
  if (ncclResult_t r = ncclMemAlloc(ptr, size); r != ncclSuccess) {
    *ptr = nullptr;
    const char* last = ncclGetLastError(nullptr);
    std::string text = "cc_mem_alloc: ncclMemAlloc of " + std::to_string(size) +
                       " bytes on CUDA device " + std::to_string(device) +
                       " failed: " + ncclGetErrorString(r);
    if (last != nullptr && *last != '\0') text += std::string(": ") + last;
    text += ". Check free device memory (nvidia-smi), or allocate less";
    return make_status(r == ncclUnhandledCudaError ? CC_ERR_CUDA : CC_ERR_NCCL, std::move(text));
  }
  return Status::success();
}

Status mem_free(void* ptr) {
  if (ptr == nullptr) return Status::success();
  if (ncclResult_t r = ncclMemFree(ptr); r != ncclSuccess)
    return make_status(CC_ERR_NCCL,
                       std::string("cc_mem_free: ncclMemFree failed: ") + ncclGetErrorString(r) +
                           ". Was the pointer allocated by cc_mem_alloc, and freed only once?");
  return Status::success();
}

Status register_buffer(cc_comm* comm, void* buf, size_t size, void** handle) {
  const char* call = "cc_comm_register";
  CC_RETURN_IF_ERROR(check_register(call, comm, buf, size, handle, "handle"));
  return run_nccl(call, "ncclCommRegister", comm,
                  [&] { return ncclCommRegister(comm->nccl, buf, size, handle); });
}

Status deregister_buffer(cc_comm* comm, void* handle) {
  const char* call = "cc_comm_deregister";
  CC_RETURN_IF_ERROR(check_handle(call, comm));
  if (handle == nullptr) return Status::success();
  if (!core::usable(*comm)) return core::state_status(call, *comm);
  return run_nccl(call, "ncclCommDeregister", comm,
                  [&] { return ncclCommDeregister(comm->nccl, handle); });
}

Status register_window(cc_comm* comm, void* buf, size_t size, void** window) {
  const char* call = "cc_comm_window_register";
  CC_RETURN_IF_ERROR(check_register(call, comm, buf, size, window, "window"));
  WindowRegisterFn reg = nullptr;
  WindowDeregisterFn dereg = nullptr;
  CC_RETURN_IF_ERROR(window_calls(call, comm, &reg, &dereg));
  return run_nccl(call, "ncclCommWindowRegister", comm,
                  [&] { return reg(comm->nccl, buf, size, window, kWinSymmetric); });
}

Status deregister_window(cc_comm* comm, void* window) {
  const char* call = "cc_comm_window_deregister";
  CC_RETURN_IF_ERROR(check_handle(call, comm));
  if (window == nullptr) return Status::success();
  if (!core::usable(*comm)) return core::state_status(call, *comm);
  WindowRegisterFn reg = nullptr;
  WindowDeregisterFn dereg = nullptr;
  CC_RETURN_IF_ERROR(window_calls(call, comm, &reg, &dereg));
  return run_nccl(call, "ncclCommWindowDeregister", comm,
                  [&] { return dereg(comm->nccl, window); });
}

}  // namespace cc::comm
