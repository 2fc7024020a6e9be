// A destroyed handle is never freed: it stays in a process-wide graveyard
// marked dead, so using it again is a clear error, not a use-after-free.
#pragma once

#include <memory>

#include "lib/comm/comm.hpp"

namespace cc::comm {

void bury(std::unique_ptr<cc_comm> comm);

}  // namespace cc::comm
