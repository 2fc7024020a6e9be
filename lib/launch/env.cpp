#include "lib/launch/env.hpp"

#include "common/return_if_error.hpp"
#include "rendezvous/factory/address.hpp"

namespace cc::launch {
namespace {

// The message when the environment lacks what every rank needs.
constexpr const char* kNoRank =
    "no rank in the environment: set RANK (or CC_RANK; launchers set OMPI_COMM_WORLD_RANK, "
    "PMI_RANK, SLURM_PROCID), or run the program under cc-run, mpirun or srun";
constexpr const char* kNoWorldSize =
    "no world size in the environment: set WORLD_SIZE (or CC_WORLD_SIZE; launchers set "
    "OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS)";
constexpr const char* kNoPort =
    "no rendezvous port in the environment: set MASTER_PORT (or CC_MASTER_PORT) to the TCP "
    "port rank 0 (or cc-rendezvous) listens on, e.g. 29500";

// A whole number the launch cannot do without, and the variable that held
// it; `missing` is the error when no variable does.
Status read_required(settings::Id id, const Getenv& getenv, const char* missing, int* value,
                     std::string* var) {
  long long v = 0;
  settings::Found found;
  CC_RETURN_IF_ERROR(settings::read_int(id, getenv, &v, &found));
  if (found.var == nullptr) return invalid_argument(missing);
  *value = static_cast<int>(v);
  *var = found.var;
  return Status::success();
}

}  // namespace

Status read_local_rank(const Getenv& getenv, int* local_rank, std::string* var) {
  *local_rank = -1;
  long long v = -1;
  settings::Found found;
  CC_RETURN_IF_ERROR(settings::read_int(settings::Id::local_rank, getenv, &v, &found));
  if (found.var == nullptr) return Status::success();
  *local_rank = static_cast<int>(v);
  if (var != nullptr) *var = found.var;
  return Status::success();
}

Status read_launch_info(const Getenv& getenv, LaunchInfo* out) {
  using settings::Id;
  LaunchInfo info;

  CC_RETURN_IF_ERROR(read_required(Id::rank, getenv, kNoRank, &info.rank, &info.rank_var));
  CC_RETURN_IF_ERROR(
      read_required(Id::world_size, getenv, kNoWorldSize, &info.world_size, &info.world_size_var));

  if (info.rank >= info.world_size) {
    return invalid_argument("rank " + std::to_string(info.rank) + " (from " + info.rank_var +
                   ") is not below the world size " + std::to_string(info.world_size) + " (from " +
                   info.world_size_var + "): ranks are numbered 0.." +
                   std::to_string(info.world_size - 1));
  }

  CC_RETURN_IF_ERROR(read_local_rank(getenv, &info.local_rank, &info.local_rank_var));

  const settings::Found addr = settings::find(Id::master_addr, getenv);
  if (addr.var == nullptr) {
    return invalid_argument(
        "no rendezvous address in the environment: set MASTER_ADDR (or CC_MASTER_ADDR) to the "
        "host name or IP address of rank 0 (or of the cc-rendezvous daemon), or to an etcd "
        "cluster as etcd://host:port[,host:port...]");
  }
  if (*addr.value == '\0') {
    return invalid_argument(std::string(addr.var) +
                   "='' is empty: set it to the host name or IP address of rank 0 (or of the "
                   "cc-rendezvous daemon)");
  }
  info.master_addr = addr.value;
  info.addr_var = addr.var;

  // A malformed address is named with its variable before any wait. One
  // that carries its port (tcp://, etcd://) leaves MASTER_PORT unread.
  if (Status s = rv::factory::parse_address(info.master_addr, &info.address); !s.ok())
    return invalid_argument(info.addr_var + "=" + info.master_addr + ": " + s.message);
  if (!info.address.needs_port()) {
    *out = std::move(info);
    return Status::success();
  }

  CC_RETURN_IF_ERROR(
      read_required(Id::master_port, getenv, kNoPort, &info.master_port, &info.port_var));
  info.address.set_port(info.master_port);

  *out = std::move(info);
  return Status::success();
}

}  // namespace cc::launch
