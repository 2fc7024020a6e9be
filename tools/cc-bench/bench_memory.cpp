#include "tools/cc-bench/bench_memory.hpp"

#include <algorithm>

#include <cuda_runtime_api.h>

#include "cc/cc.h"
#include "lib/core/nccl_symbol.hpp"

namespace cc::tools::bench {
namespace {

// ncclCommWindowRegister/Deregister of the NCCL loaded (NCCL 2.27+), looked
// up at run time so cc-bench still starts with an older one.
using WinReg = ncclResult_t (*)(ncclComm_t, void*, size_t, void**, int);
using WinDereg = ncclResult_t (*)(ncclComm_t, void*);
constexpr int kWinSymmetric = 0x01;  // NCCL_WIN_COLL_SYMMETRIC

using cc::core::nccl_symbol;

WinReg win_reg() { return reinterpret_cast<WinReg>(nccl_symbol("ncclCommWindowRegister")); }
WinDereg win_dereg() { return reinterpret_cast<WinDereg>(nccl_symbol("ncclCommWindowDeregister")); }

bool nccl_has_windows() {
  int v = 0;
  return ncclGetVersion(&v) == ncclSuccess && v >= 22700 && win_reg() != nullptr &&
         win_dereg() != nullptr;
}

Status failed(const std::string& what, cc_result_t r) {
  return {false, what + " failed: " + cc_result_string(r) + ": " + cc_last_error()};
}

Status nccl_failed(const std::string& what, ncclResult_t r) {
  return {false, what + " failed: " + ncclGetErrorString(r)};
}

}  // namespace

Status allocate_buffers(const Options& opt, cc_comm_t comm, ncclComm_t raw, Buffers* b,
                        std::string* registration) {
  b->bytes = std::max<size_t>(opt.max_bytes, 4096);
  b->mem = opt.mem;
  *registration = "none";
  void** bufs[2] = {&b->send, &b->recv};
  for (void** p : bufs) {
    if (opt.mem == Mem::cc) {
      if (cc_result_t r = cc_mem_alloc(p, b->bytes); r != CC_SUCCESS)
        return failed("cc_mem_alloc of " + std::to_string(b->bytes) + " bytes", r);
    } else if (cudaError_t e = cudaMalloc(p, b->bytes); e != cudaSuccess) {
      return {false, "cudaMalloc of " + std::to_string(b->bytes) +
                         " bytes failed: " + cudaGetErrorString(e)};
    }
  }
  if (opt.mem != Mem::cc || opt.reg == Reg::none) return {};

  Reg reg = opt.reg;
  if (reg == Reg::automatic) reg = nccl_has_windows() ? Reg::window : Reg::local;
  for (int i = 0; i < 2; ++i) {
    void* buf = *bufs[i];
    if (reg == Reg::window) {
      if (cc_result_t r = cc_comm_window_register(comm, buf, b->bytes, &b->cc_handle[i]);
          r != CC_SUCCESS)
        return failed("cc_comm_window_register", r);
      if (raw != nullptr)
        if (ncclResult_t r = win_reg()(raw, buf, b->bytes, &b->raw_handle[i], kWinSymmetric);
            r != ncclSuccess)
          return nccl_failed("ncclCommWindowRegister (raw)", r);
    } else {
      if (cc_result_t r = cc_comm_register(comm, buf, b->bytes, &b->cc_handle[i]); r != CC_SUCCESS)
        return failed("cc_comm_register", r);
      if (raw != nullptr)
        if (ncclResult_t r = ncclCommRegister(raw, buf, b->bytes, &b->raw_handle[i]);
            r != ncclSuccess)
          return nccl_failed("ncclCommRegister (raw)", r);
    }
    b->reg = reg;
  }
  *registration = reg == Reg::window ? "window" : "local";
  return {};
}

void free_buffers(cc_comm_t comm, ncclComm_t raw, Buffers* b) {
  for (int i = 0; i < 2; ++i) {
    if (b->reg == Reg::window) {
      cc_comm_window_deregister(comm, b->cc_handle[i]);
      if (raw != nullptr && b->raw_handle[i] != nullptr) win_dereg()(raw, b->raw_handle[i]);
    } else if (b->reg == Reg::local) {
      cc_comm_deregister(comm, b->cc_handle[i]);
      if (raw != nullptr && b->raw_handle[i] != nullptr) ncclCommDeregister(raw, b->raw_handle[i]);
    }
    b->cc_handle[i] = b->raw_handle[i] = nullptr;
  }
  for (void* p : {b->send, b->recv}) {
    if (p == nullptr) continue;
    if (b->mem == Mem::cc)
      cc_mem_free(p);
    else
      cudaFree(p);
  }
  b->send = b->recv = nullptr;
}

}  // namespace cc::tools::bench
