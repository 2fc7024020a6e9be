#include "common/datatypes.hpp"

#include <algorithm>

namespace cc {

size_t datatype_size(cc_datatype_t dtype) {
  switch (dtype) {
    case CC_INT8:
    case CC_UINT8:
    case CC_FLOAT8_E4M3:
    case CC_FLOAT8_E5M2:
      return 1;
    case CC_FLOAT16:
    case CC_BFLOAT16:
      return 2;
    case CC_INT32:
    case CC_UINT32:
    case CC_FLOAT32:
      return 4;
    case CC_INT64:
    case CC_UINT64:
    case CC_FLOAT64:
      return 8;
    case CC_NUM_DATATYPES:
      break;
  }
  return 0;
}

const char* datatype_name(cc_datatype_t dtype) {
  switch (dtype) {
    case CC_INT8:
      return "CC_INT8";
    case CC_UINT8:
      return "CC_UINT8";
    case CC_INT32:
      return "CC_INT32";
    case CC_UINT32:
      return "CC_UINT32";
    case CC_INT64:
      return "CC_INT64";
    case CC_UINT64:
      return "CC_UINT64";
    case CC_FLOAT16:
      return "CC_FLOAT16";
    case CC_FLOAT32:
      return "CC_FLOAT32";
    case CC_FLOAT64:
      return "CC_FLOAT64";
    case CC_BFLOAT16:
      return "CC_BFLOAT16";
    case CC_FLOAT8_E4M3:
      return "CC_FLOAT8_E4M3";
    case CC_FLOAT8_E5M2:
      return "CC_FLOAT8_E5M2";
    case CC_NUM_DATATYPES:
      break;
  }
  return "unknown";
}

const char* redop_name(cc_redop_t op) {
  switch (op) {
    case CC_SUM:
      return "CC_SUM";
    case CC_PROD:
      return "CC_PROD";
    case CC_MAX:
      return "CC_MAX";
    case CC_MIN:
      return "CC_MIN";
    case CC_AVG:
      return "CC_AVG";
    case CC_NUM_REDOPS:
      break;
  }
  return "unknown";
}

double reduce_step(cc_redop_t op, double acc, double value) {
  switch (op) {
    case CC_SUM:
    case CC_AVG:
      return acc + value;
    case CC_PROD:
      return acc * value;
    case CC_MAX:
      return std::max(acc, value);
    case CC_MIN:
      return std::min(acc, value);
    case CC_NUM_REDOPS:
      break;
  }
  return acc;
}

}  // namespace cc
