// STUB: replaced by the Asio server.
#include "server.hpp"

namespace cc::rv {
Status Server::start(const ServerOptions&, std::unique_ptr<Server>*) {
  return make_status(CC_ERR_INTERNAL, "server not implemented yet");
}
}  // namespace cc::rv
