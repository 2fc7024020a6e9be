// libFuzzer's start hook for the targets whose code logs: cc's logger off, so
// the fuzzer's own output stays readable and the runs stay fast.
#include <cstdlib>

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("CC_LOG_LEVEL", "off", 1);
  return 0;
}
