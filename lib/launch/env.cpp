#include "lib/launch/env.hpp"

#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <system_error>

namespace cc::env {
namespace {

struct Found {
  const char* name = nullptr;   // the variable that supplied the value
  const char* value = nullptr;  // nullptr when none of the list is set
};

// The first variable of the list that is set (even to ""), in order.
Found first_set(const Getenv& getenv, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (const char* value = getenv(name)) return {name, value};
  }
  return {};
}

Status invalid(std::string message) {
  return make_status(CC_ERR_INVALID_ARGUMENT, std::move(message));
}

}  // namespace

Getenv process_env() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

Status parse_int(const char* name, const char* text, long long min, long long max, long long* out) {
  const std::string shown = text == nullptr ? std::string() : std::string(text);
  const std::string range = std::to_string(min) + ".." + std::to_string(max);
  if (text == nullptr || *text == '\0') {
    return invalid(std::string(name) + "='' is empty: set it to a whole number in " + range);
  }
  const char* begin = text;
  const char* end = text + std::strlen(text);
  if (*begin == '+') ++begin;  // from_chars takes '-' but not '+'
  long long value = 0;
  auto [ptr, ec] = std::from_chars(begin, end, value, 10);
  if (ec == std::errc::result_out_of_range) {
    return invalid(std::string(name) + "=" + shown + " is out of range " + range);
  }
  if (ec != std::errc() || ptr != end || begin == end || (begin != text && *begin == '-')) {
    return invalid(std::string(name) + "='" + shown +
                   "' is not an integer: set it to a whole number in " + range);
  }
  if (value < min || value > max) {
    return invalid(std::string(name) + "=" + shown + " is out of range " + range);
  }
  *out = value;
  return Status::success();
}

Status read_launch_info(const Getenv& getenv, LaunchInfo* out) {
  LaunchInfo info;
  long long v = 0;

  const Found rank =
      first_set(getenv, {"CC_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"});
  if (rank.name == nullptr) {
    return invalid(
        "no rank in the environment: set RANK (or CC_RANK; launchers set OMPI_COMM_WORLD_RANK, "
        "PMI_RANK, SLURM_PROCID), or run the program under cc-run, mpirun or srun");
  }
  if (Status s = parse_int(rank.name, rank.value, 0, INT_MAX, &v); !s.ok()) return s;
  info.rank = static_cast<int>(v);
  info.rank_var = rank.name;

  const Found world = first_set(
      getenv, {"CC_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
  if (world.name == nullptr) {
    return invalid(
        "no world size in the environment: set WORLD_SIZE (or CC_WORLD_SIZE; launchers set "
        "OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS)");
  }
  if (Status s = parse_int(world.name, world.value, 1, INT_MAX, &v); !s.ok()) return s;
  info.world_size = static_cast<int>(v);
  info.world_size_var = world.name;

  if (info.rank >= info.world_size) {
    return invalid("rank " + std::to_string(info.rank) + " (from " + info.rank_var +
                   ") is not below the world size " + std::to_string(info.world_size) + " (from " +
                   info.world_size_var + "): ranks are numbered 0.." +
                   std::to_string(info.world_size - 1));
  }

  const Found local =
      first_set(getenv, {"CC_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                         "MPI_LOCALRANKID", "SLURM_LOCALID"});
  if (local.name != nullptr) {
    if (Status s = parse_int(local.name, local.value, 0, INT_MAX, &v); !s.ok()) return s;
    info.local_rank = static_cast<int>(v);
    info.local_rank_var = local.name;
  }

  const Found addr = first_set(getenv, {"CC_MASTER_ADDR", "MASTER_ADDR"});
  if (addr.name == nullptr) {
    return invalid(
        "no rendezvous address in the environment: set MASTER_ADDR (or CC_MASTER_ADDR) to the "
        "host name or IP address of rank 0 (or of the cc-rendezvous daemon)");
  }
  if (*addr.value == '\0') {
    return invalid(std::string(addr.name) +
                   "='' is empty: set it to the host name or IP address of rank 0 (or of the "
                   "cc-rendezvous daemon)");
  }
  info.master_addr = addr.value;
  info.addr_var = addr.name;

  const Found port = first_set(getenv, {"CC_MASTER_PORT", "MASTER_PORT"});
  if (port.name == nullptr) {
    return invalid(
        "no rendezvous port in the environment: set MASTER_PORT (or CC_MASTER_PORT) to the TCP "
        "port rank 0 (or cc-rendezvous) listens on, e.g. 29500");
  }
  if (Status s = parse_int(port.name, port.value, 1, 65535, &v); !s.ok()) return s;
  info.master_port = static_cast<int>(v);
  info.port_var = port.name;

  *out = std::move(info);
  return Status::success();
}

}  // namespace cc::env
