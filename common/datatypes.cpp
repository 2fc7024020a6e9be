#include "common/datatypes.hpp"

#include <algorithm>
#include <iterator>
#include <utility>

namespace cc {

namespace {

struct DatatypeFacts {
  cc_datatype_t dtype;
  size_t size;  // bytes of one element
  const char* name;
};
constexpr DatatypeFacts kDatatypes[] = {{CC_INT8, 1, "CC_INT8"},
                                        {CC_UINT8, 1, "CC_UINT8"},
                                        {CC_INT32, 4, "CC_INT32"},
                                        {CC_UINT32, 4, "CC_UINT32"},
                                        {CC_INT64, 8, "CC_INT64"},
                                        {CC_UINT64, 8, "CC_UINT64"},
                                        {CC_FLOAT16, 2, "CC_FLOAT16"},
                                        {CC_FLOAT32, 4, "CC_FLOAT32"},
                                        {CC_FLOAT64, 8, "CC_FLOAT64"},
                                        {CC_BFLOAT16, 2, "CC_BFLOAT16"},
                                        {CC_FLOAT8_E4M3, 1, "CC_FLOAT8_E4M3"},
                                        {CC_FLOAT8_E5M2, 1, "CC_FLOAT8_E5M2"}};
static_assert(std::size(kDatatypes) == CC_NUM_DATATYPES);

constexpr std::pair<cc_redop_t, const char*> kRedops[] = {{CC_SUM, "CC_SUM"},
                                                          {CC_PROD, "CC_PROD"},
                                                          {CC_MAX, "CC_MAX"},
                                                          {CC_MIN, "CC_MIN"},
                                                          {CC_AVG, "CC_AVG"}};
static_assert(std::size(kRedops) == CC_NUM_REDOPS);

const DatatypeFacts* facts(cc_datatype_t dtype) {
  for (const DatatypeFacts& f : kDatatypes)
    if (f.dtype == dtype) return &f;
  return nullptr;
}

}  // namespace

size_t datatype_size(cc_datatype_t dtype) {
  const DatatypeFacts* f = facts(dtype);
  return f ? f->size : 0;
}

const char* datatype_name(cc_datatype_t dtype) {
  const DatatypeFacts* f = facts(dtype);
  return f ? f->name : "unknown";
}

const char* redop_name(cc_redop_t op) {
  for (const auto& [o, name] : kRedops)
    if (o == op) return name;
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
