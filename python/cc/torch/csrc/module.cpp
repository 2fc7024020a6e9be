// The extension's Python face, used by cc/torch/__init__.py only.
#include <cstdint>
#include <string>

#include <torch/extension.h>

#include "backend.hpp"
#include "cc_api.hpp"

namespace {

// A Backend for one process group; torch.distributed wraps it. Returned as
// c10d::Backend, the type torch registered with Python.
c10::intrusive_ptr<c10d::Backend> create_backend(int rank, int size, const std::string& addr,
                                                 int port, const std::string& job_id,
                                                 int timeout_ms, std::intptr_t server) {
  cc_torch::Rendezvous rendezvous;
  rendezvous.addr = addr;
  rendezvous.port = port;
  rendezvous.job_id = job_id;
  rendezvous.timeout_ms = timeout_ms;
  rendezvous.server = reinterpret_cast<cc_server_t>(server);
  return c10::make_intrusive<cc_torch::CCBackend>(rank, size, std::move(rendezvous));
}

std::intptr_t comm_handle(const c10::intrusive_ptr<c10d::Backend>& backend) {
  auto* cc = dynamic_cast<cc_torch::CCBackend*>(backend.get());
  if (cc == nullptr)
    cc_torch::fail(
        cc_torch::text("comm_handle: not a cc backend (", backend->getBackendName(), ")"));
  return cc->comm_handle();
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "cc's torch.distributed backend (import cc.torch to use it)";
  m.def("load_library", &cc_torch::load, pybind11::arg("path"),
        "Resolves libcc's functions from the library at path (the one `import cc` loaded)");
  m.def("create_backend", &create_backend, pybind11::arg("rank"), pybind11::arg("size"),
        pybind11::arg("addr"), pybind11::arg("port"), pybind11::arg("job_id"),
        pybind11::arg("timeout_ms"), pybind11::arg("server"),
        "A cc Backend for one process group; server: a cc_server_t it takes over, or 0");
  m.def("comm_handle", &comm_handle, pybind11::arg("backend"),
        "The cc_comm_t of a cc Backend as an int (0 before its first operation)");
}
