#include "lib/launch/gpu_uuid.hpp"

#include <cstdio>

namespace cc::launch {

std::string format_gpu_uuid(const unsigned char b[16]) {
  char s[64];
  std::snprintf(s, sizeof s,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return s;
}

}  // namespace cc::launch
