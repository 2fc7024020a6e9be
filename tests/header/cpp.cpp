// cc.h alone, as C++.
#include <cc/cc.h>

int main() {
  cc_config_t config = CC_CONFIG_INIT;
  return (config.magic == CC_CONFIG_MAGIC && cc_version() == CC_VERSION_CODE) ? 0 : 1;
}
