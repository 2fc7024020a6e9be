// A symbol of the libnccl this code is linked to, for calls newer than the
// oldest NCCL it must load with (ncclCommWindowRegister: 2.27). Looked up in
// that very library (found through one of its functions), so it works even
// when the host program loaded libcc with RTLD_LOCAL.
#pragma once

#include <dlfcn.h>

#include <nccl.h>

namespace cc::core {

inline void* nccl_symbol(const char* name) {
  static void* const library = [] {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&ncclGetVersion), &info) == 0 || info.dli_fname == nullptr)
      return static_cast<void*>(nullptr);
    return dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  }();
  void* sym = library != nullptr ? dlsym(library, name) : nullptr;
  return sym != nullptr ? sym : dlsym(RTLD_DEFAULT, name);
}

}  // namespace cc::core
