// /dev/shm, the open-file limit and the variables that steer NCCL and cc.
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "tools/cc-doctor/doctor_report.hpp"

extern char** environ;

namespace cc::tools::doctor {
namespace {

constexpr int64_t kShmWant = int64_t{1} << 30;
constexpr uint64_t kNofileWant = 65536;

bool shown_variable(const std::string& name) {
  static const char* const launch[] = {"MASTER_ADDR", "MASTER_PORT", "RANK",
                                       "WORLD_SIZE",  "LOCAL_RANK",  "CUDA_VISIBLE_DEVICES"};
  if (name.rfind("NCCL_", 0) == 0 || name.rfind("CC_", 0) == 0) return true;
  return std::find(std::begin(launch), std::end(launch), name) != std::end(launch);
}

bool secret(const std::string& name) {
  return name.find("TOKEN") != std::string::npos && name.find("_FILE") == std::string::npos;
}

}  // namespace

void collect_system(Report* r) {
  struct statvfs fs {};
  if (statvfs("/dev/shm", &fs) == 0) {
    r->shm_bytes = static_cast<int64_t>(fs.f_blocks) * static_cast<int64_t>(fs.f_frsize);
    if (r->shm_bytes < kShmWant) {
      r->add("shm", Level::warn,
             "/dev/shm is " + std::to_string(r->shm_bytes >> 20) +
                 " MiB; NCCL needs more for its shared-memory transport and may fail or hang",
             "in Docker run with --shm-size=1g (or more) or --ipc=host");
    }
  } else {
    r->add("shm", Level::warn, std::string("/dev/shm is missing (") + std::strerror(errno) + ")",
           "mount a tmpfs on /dev/shm; in Docker run with --shm-size=1g or --ipc=host");
  }

  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    r->nofile_soft = lim.rlim_cur == RLIM_INFINITY ? UINT64_MAX : lim.rlim_cur;
    r->nofile_hard = lim.rlim_max == RLIM_INFINITY ? UINT64_MAX : lim.rlim_max;
    if (r->nofile_soft < kNofileWant) {
      std::string fix =
          r->nofile_hard >= kNofileWant
              ? "ulimit -n 65536 before starting the job"
              : "raise the hard limit (limits.conf, systemd LimitNOFILE=, Docker --ulimit "
                "nofile=65536:65536), then ulimit -n 65536";
      r->add("limits", Level::warn,
             "the open-file limit is " + std::to_string(r->nofile_soft) +
                 "; large jobs and a busy cc-rendezvous need one descriptor per connection",
             fix);
    }
  }

  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;
    std::string name(*e, static_cast<size_t>(eq - *e));
    if (!shown_variable(name)) continue;
    std::string value = eq + 1;
    if (secret(name)) value = "(set, " + std::to_string(value.size()) + " characters, not shown)";
    r->env.emplace_back(name, value);
  }
  std::sort(r->env.begin(), r->env.end());
  r->host.resize(256);
  if (gethostname(r->host.data(), r->host.size() - 1) != 0) r->host = "?";
  r->host.resize(std::strlen(r->host.c_str()));
}

}  // namespace cc::tools::doctor
