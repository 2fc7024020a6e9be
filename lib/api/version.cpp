#include "cc/cc.h"

extern "C" CC_API int cc_version(void) { return CC_VERSION_CODE; }
