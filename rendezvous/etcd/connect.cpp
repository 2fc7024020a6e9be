#include "rendezvous/etcd/connect.hpp"

#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "rendezvous/etcd/plugin.hpp"

namespace cc::rv::etcd {
namespace {

// The folder of the shared object (or program) this function is in.
std::string own_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_folder), &info) == 0 || info.dli_fname == nullptr)
    return {};
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

struct Loaded {
  const PluginApi* api = nullptr;
  Status error;
};

// Where to look, in order: beside this library (libcc.so and the plugin are
// installed side by side), the library folder beside a program's (bin/ and
// lib/, as in the build tree's tools/ and lib/), then the loader's path.
std::vector<std::string> candidates() {
  std::vector<std::string> out;
  if (const std::string folder = own_folder(); !folder.empty()) {
    out.push_back(folder + "/" + kPluginFile);
    out.push_back(folder + "/../lib/" + kPluginFile);
  }
  out.push_back(kPluginFile);
  return out;
}

Loaded load() {
  std::string tried;
  void* handle = nullptr;
  for (const std::string& path : candidates()) {
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
    const char* why = dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(why != nullptr ? why : path.c_str());
  }
  if (handle == nullptr) {
    return {nullptr,
            make_status(CC_ERR_RENDEZVOUS,
                        std::string("etcd addresses need cc's etcd backend, ") + kPluginFile +
                            ", which could not be loaded (" + tried +
                            "). Install it beside libcc.so (it is built where cpp-httplib is "
                            "found and needs libcpp-httplib at run time), or use cc's own "
                            "rendezvous (a host name and port)")};
  }
  using Entry = const PluginApi* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, kPluginSymbol));
  const PluginApi* api = entry != nullptr ? entry() : nullptr;
  if (api == nullptr || std::strcmp(api->version, CC_VERSION_STRING) != 0) {
    const std::string what = api == nullptr ? std::string("has no ") + kPluginSymbol
                                            : std::string("comes from cc ") + api->version +
                                                  ", this is cc " + CC_VERSION_STRING;
    return {nullptr,
            make_status(CC_ERR_RENDEZVOUS, std::string("cc's etcd backend ") + kPluginFile + " " +
                                               what + ": install the one built with this libcc")};
  }
  return {api, Status::success()};
}

const Loaded& plugin() {
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] { loaded = load(); });
  return loaded;
}

}  // namespace

Status open_election_plugin(const ElectionOptions& options, Deadline deadline,
                           std::unique_ptr<Election>* out) {
  const Loaded& loaded = plugin();
  if (loaded.api == nullptr) return loaded.error;
  return loaded.api->open_election(options, deadline, out);
}

}  // namespace cc::rv::etcd
