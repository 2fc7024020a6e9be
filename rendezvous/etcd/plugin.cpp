// libcc-etcd.so's one exported function (see plugin.hpp).
#include "rendezvous/etcd/plugin.hpp"

#include <exception>
#include <string>

#include "cc/cc.h"

namespace cc::rv::etcd {
namespace {

Status plugin_connect(const BackendOptions& options, std::unique_ptr<Client>* out) {
  try {
    std::unique_ptr<Backend> backend;
    Status s = Backend::connect(options, &backend);
    if (s.ok()) *out = std::move(backend);
    return s;
  } catch (const std::exception& e) {
    return make_status(CC_ERR_INTERNAL, std::string("etcd backend: ") + e.what());
  }
}

constexpr PluginApi kApi{CC_VERSION_STRING, &plugin_connect};

}  // namespace
}  // namespace cc::rv::etcd

extern "C" __attribute__((visibility("default"))) const cc::rv::etcd::PluginApi*
cc_etcd_plugin_v1() {
  return &cc::rv::etcd::kApi;
}
