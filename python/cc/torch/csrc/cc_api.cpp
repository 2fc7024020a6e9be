#include "cc_api.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include <c10/util/Exception.h>

namespace cc_torch {
namespace {

Api loaded;
bool is_loaded = false;
std::mutex load_mutex;

template <class F>
void resolve(void* handle, const std::string& path, const char* name, F* slot, bool required) {
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr && required)
    throw std::runtime_error(std::string(name) + " is not in the libcc at " + path +
                             ": the torch backend needs a libcc at least as new as itself");
  *slot = reinterpret_cast<F>(symbol);
}

}  // namespace

void load(const std::string& path) {
  std::lock_guard<std::mutex> lock(load_mutex);
  if (is_loaded) return;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw std::runtime_error("cc.torch could not open libcc at " + path + ": " +
                             (why != nullptr ? why : "unknown reason"));
  }
  Api a;
  resolve(handle, path, "cc_comm_init", &a.comm_init, true);
  resolve(handle, path, "cc_comm_destroy", &a.comm_destroy, true);
  resolve(handle, path, "cc_comm_abort", &a.comm_abort, true);
  resolve(handle, path, "cc_comm_timeout", &a.comm_timeout, true);
  resolve(handle, path, "cc_allreduce", &a.allreduce, true);
  resolve(handle, path, "cc_broadcast", &a.broadcast, true);
  resolve(handle, path, "cc_reduce", &a.reduce, true);
  resolve(handle, path, "cc_allgather", &a.allgather, true);
  resolve(handle, path, "cc_reducescatter", &a.reducescatter, true);
  resolve(handle, path, "cc_alltoall", &a.alltoall, true);
  resolve(handle, path, "cc_send", &a.send, true);
  resolve(handle, path, "cc_recv", &a.recv, true);
  resolve(handle, path, "cc_barrier", &a.barrier, true);
  resolve(handle, path, "cc_group_start", &a.group_start, true);
  resolve(handle, path, "cc_group_end", &a.group_end, true);
  resolve(handle, path, "cc_server_stop", &a.server_stop, true);
  resolve(handle, path, "cc_result_string", &a.result_string, true);
  resolve(handle, path, "cc_last_error", &a.last_error, true);
  resolve(handle, path, "cc_comm_failed_ranks", &a.comm_failed_ranks, false);
  resolve(handle, path, "cc_comm_check", &a.comm_check, false);
  resolve(handle, path, "cc_comm_shrink", &a.comm_shrink, false);
  resolve(handle, path, "cc_comm_rank", &a.comm_rank, false);
  resolve(handle, path, "cc_comm_size", &a.comm_size, false);
  resolve(handle, path, "cc_comm_generation", &a.comm_generation, false);
  loaded = a;  // the handle stays open for the life of the process
  is_loaded = true;
}

const Api& api() {
  if (!is_loaded)
    throw std::runtime_error("cc.torch: libcc is not loaded; import cc.torch, not its _C module");
  return loaded;
}

std::string words(const char* call, cc_result_t r) {
  const char* last = loaded.last_error != nullptr ? loaded.last_error() : nullptr;
  std::string text = call;
  text += ": ";
  if (last != nullptr && *last != '\0') {
    text += last;
  } else if (loaded.result_string != nullptr) {
    text += loaded.result_string(r);
  } else {
    text += "cc result " + std::to_string(static_cast<int>(r));
  }
  return text;
}

void fail(const char* call, cc_result_t r) { fail(words(call, r)); }

void fail(const std::string& message) { C10_THROW_ERROR(DistBackendError, message); }

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace cc_torch
