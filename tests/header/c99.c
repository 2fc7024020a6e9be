/* cc.h alone, as C99: every public name must be usable from C. */
#include <cc/cc.h>

int main(void) {
  cc_config_t config = CC_CONFIG_INIT;
  cc_result_t r = CC_SUCCESS;
  cc_datatype_t t = CC_FLOAT8_E5M2;
  cc_redop_t op = CC_AVG;
  (void)t;
  (void)op;
  return (config.size == sizeof(cc_config_t) && r == 0 && CC_NUM_RESULTS > 14) ? 0 : 1;
}
