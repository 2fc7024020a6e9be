// A GPU's UUID as nvidia-smi prints it: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
#pragma once

#include <string>

namespace cc::launch {

std::string format_gpu_uuid(const unsigned char bytes[16]);

}  // namespace cc::launch
