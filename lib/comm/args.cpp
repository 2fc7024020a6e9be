#include "lib/comm/args.hpp"

#include <cstdint>
#include <limits>
#include <string>

#include "common/datatypes.hpp"
#include "common/who.hpp"

namespace cc::comm::args {

std::string who(const Caller& c) {
  if (c.rank < 0) return c.call;
  return std::string(c.call) + " on " +
         cc::who(Who{c.rank, c.host != nullptr ? std::string_view(*c.host) : std::string_view(),
                     c.pid, c.generation});
}

Status check_datatype(const Caller& c, cc_datatype_t dtype) {
  if (datatype_size(dtype) != 0) return Status::success();
  return make_status(CC_ERR_INVALID_ARGUMENT,
                     who(c) + ": dtype " + std::to_string(static_cast<int>(dtype)) +
                         " is not a cc_datatype_t; use one of CC_INT8 .. CC_FLOAT8_E5M2");
}

Status check_redop(const Caller& c, cc_redop_t op) {
  // Through int: the enum's underlying type may be unsigned.
  const int value = static_cast<int>(op);
  if (value >= 0 && value < static_cast<int>(CC_NUM_REDOPS)) return Status::success();
  return make_status(CC_ERR_INVALID_ARGUMENT,
                     who(c) + ": op " + std::to_string(value) +
                         " is not a cc_redop_t; use CC_SUM, CC_PROD, CC_MAX, CC_MIN or CC_AVG");
}

Status check_buffer(const Caller& c, const char* name, const void* buf, size_t count) {
  if (buf != nullptr || count == 0) return Status::success();
  return make_status(CC_ERR_INVALID_ARGUMENT,
                     who(c) + ": " + name + " is NULL but count is " + std::to_string(count) +
                         "; pass a device buffer of that many elements, or a count of 0");
}

Status check_rank(const Caller& c, const char* name, int value, int nranks) {
  if (value >= 0 && value < nranks) return Status::success();
  return make_status(CC_ERR_INVALID_ARGUMENT, who(c) + ": " + name + " " + std::to_string(value) +
                                                  " is outside the communicator's ranks [0, " +
                                                  std::to_string(nranks) + ")");
}

Status check_bytes(const Caller& c, const char* count_name, size_t count, size_t multiplier,
                   cc_datatype_t dtype, size_t* bytes) {
  constexpr size_t kMax = std::numeric_limits<size_t>::max();
  const size_t size = datatype_size(dtype);
  bool overflow = size == 0;
  size_t elements = count;
  if (!overflow && multiplier > 1) {
    overflow = count > kMax / multiplier;
    elements = count * multiplier;
  }
  if (!overflow) overflow = elements > kMax / size;
  if (!overflow) {
    *bytes = elements * size;
    return Status::success();
  }
  std::string what = std::string(count_name) + " " + std::to_string(count);
  if (multiplier > 1) what += " x " + std::to_string(multiplier) + " ranks";
  return make_status(CC_ERR_INVALID_ARGUMENT,
                     who(c) + ": " + what + " of " + datatype_name(dtype) +
                         " overflows the addressable byte size; pass a count of elements, "
                         "not bytes, and check it for a negative value cast to size_t");
}

}  // namespace cc::comm::args
