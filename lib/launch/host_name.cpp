#include "lib/launch/host_name.hpp"

#include <unistd.h>

#include <climits>

namespace cc::launch {

std::string host_name() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "unknown-host";
  return buf;
}

}  // namespace cc::launch
