// cc-doctor's findings about this machine, gathered by the doctor_* parts and
// printed as text or JSON. A finding is not a failure: the tool exits 0.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lib/launch/netif.hpp"

namespace cc::tools::doctor {

enum class Level { info, warn, error };
const char* level_name(Level level);  // "info", "warn", "error"

struct Finding {
  std::string section;  // "cuda", "network", "rendezvous", ...
  Level level = Level::info;
  std::string what;
  std::string fix;  // empty when nothing is to be done
};

struct Gpu {
  int index = 0;
  std::string name;
  std::string uuid;        // "GPU-xxxxxxxx-..."
  std::string pci_bus_id;  // "0000:3b:00.0"
  int pci_domain = 0, pci_bus = 0, pci_device = 0;
  uint64_t memory_bytes = 0;
  int cc_major = 0, cc_minor = 0;
  std::vector<int> p2p_peers{};                   // devices this one can access directly
  int nvlinks_active = -1;                        // -1: unknown (no NVML)
  std::vector<std::pair<int, int>> nvlinks_to{};  // (peer index or -1 for a switch, link count)
};

enum class Answer {
  not_tried,      // no MASTER_ADDR or MASTER_PORT
  cc_rendezvous,  // answered a Hello with a Challenge
  cc_refused,     // a cc rendezvous that answered with an error
  refused,        // connection refused: nothing listens
  unreachable,    // no route, host unreachable, or no answer before the deadline
  other_program,  // answered, but not with a cc frame
  silent,         // accepted the connection but sent nothing before the deadline
  closed,         // accepted and closed without a word
  unresolved,     // the name does not resolve
};
const char* answer_name(Answer a);
std::string cuda_version_text(int v);  // 13000 -> "13.0"

struct Probe {
  Answer answer = Answer::not_tried;
  std::string address;  // the numeric address tried last
  std::string server;   // the Challenge's server string
  bool auth_required = false;
  std::string detail;  // text for the answer
  int elapsed_ms = 0;
};

struct Report {
  std::string host;
  int cc_version_code = 0;
  std::string cc_version;
  int nccl_version_code = 0;
  std::string nccl_version;
  int cuda_runtime = 0;  // CUDART_VERSION style: 13000
  int cuda_driver = 0;   // 0 = no driver
  int device_count = 0;
  std::vector<Gpu> gpus;
  bool nvml = false;

  std::vector<launch::Interface> interfaces;
  std::string master_addr, master_addr_var;
  int master_port = 0;
  std::string master_port_var;
  // Whether the address takes its port apart (a host alone); tcp:// and
  // etcd:// addresses carry theirs.
  bool master_port_apart = true;
  bool route_found = false;
  launch::Route route;
  std::string route_error;
  Probe probe;

  int64_t shm_bytes = -1;  // -1: no /dev/shm
  uint64_t nofile_soft = 0, nofile_hard = 0;
  std::vector<std::pair<std::string, std::string>> env;  // NCCL_*, CC_* and launch variables

  std::vector<Finding> findings;
  void add(std::string section, Level level, std::string what, std::string fix = {}) {
    findings.push_back({std::move(section), level, std::move(what), std::move(fix)});
  }
};

struct Options {
  bool json = false;
  std::string master_addr;
  std::string master_addr_var;  // where it came from: "--master-addr", "MASTER_ADDR", ...
  int master_port = 0;
  std::string master_port_var;
  int timeout_ms = 3000;  // the rendezvous probe's deadline
  std::string job_id = "default";
};

void collect_gpu(Report* r);                        // doctor_gpu.cpp: cc, NCCL, CUDA, GPUs, NVLink
void collect_network(Report* r, const Options& o);  // doctor_network.cpp
void collect_system(Report* r);                     // doctor_system.cpp: /dev/shm, open files, env
Probe probe_rendezvous(const std::string& addr, int port, const std::string& job_id,
                       int timeout_ms);  // doctor_probe.cpp

std::string render_text(const Report& r);  // doctor_render.cpp
std::string render_json(const Report& r);

}  // namespace cc::tools::doctor
