// STUB: replaced by the blocking client.
#include "client.hpp"

namespace cc::rv {
Status Client::connect(const ClientOptions&, std::unique_ptr<Client>*) {
  return make_status(CC_ERR_INTERNAL, "client not implemented yet");
}
}  // namespace cc::rv
