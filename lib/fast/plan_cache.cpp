#include "lib/fast/plan_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <cuda_runtime_api.h>

namespace cc::fast {
namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

// mkdir -p; true when the folder exists afterwards.
bool make_dirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string part = dir.substr(0, pos);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  struct stat st {};
  return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

std::string machine_key(int device, const std::vector<PeerRecord>& records, int nccl_version,
                        const std::string& cc_version) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) cudaGetLastError();
  int driver = 0;
  cudaDriverGetVersion(&driver);
  // How this GPU reaches each peer: CUDA's relative P2P performance rank
  // where the peer's GPU is visible here, else through IPC alone.
  std::string link;
  for (const PeerRecord& r : records) {
    int peer = -1;
    std::string word = "self";
    if (cudaDeviceGetByPCIBusId(&peer, r.bus_id) != cudaSuccess) {
      cudaGetLastError();
      word = "ipc";
    } else if (peer != device) {
      int perf = -1, access = 0;
      cudaDeviceGetP2PAttribute(&access, cudaDevP2PAttrAccessSupported, device, peer);
      cudaDeviceGetP2PAttribute(&perf, cudaDevP2PAttrPerformanceRank, device, peer);
      cudaGetLastError();
      word = "p2p" + std::to_string(access) + "/" + std::to_string(perf);
    }
    link += (link.empty() ? "" : ",") + word;
  }
  return "cc-allreduce-plan 1; gpu " + std::string(prop.name) + "; sms " +
         std::to_string(prop.multiProcessorCount) + "; ranks " + std::to_string(records.size()) +
         "; links " + link + "; nccl " + std::to_string(nccl_version) + "; driver " +
         std::to_string(driver) + "; cc " + cc_version;
}

std::string plan_path(const std::string& dir, const std::string& key) {
  char name[64];
  std::snprintf(name, sizeof name, "allreduce-plan-%016llx.txt",
                static_cast<unsigned long long>(fnv1a(key)));
  return dir + "/" + name;
}

bool load_plan(const std::string& dir, const std::string& key, std::string* plan_text) {
  if (dir.empty()) return false;
  std::ifstream in(plan_path(dir, key));
  std::string stored_key, text;
  if (!in || !std::getline(in, stored_key) || !std::getline(in, text)) return false;
  if (stored_key != key || text.empty()) return false;
  Plan plan;
  std::string why;
  if (!parse_plan(text, &plan, &why)) return false;
  *plan_text = text;
  return true;
}

bool store_plan(const std::string& dir, const std::string& key, const std::string& plan_text,
                std::string* why) {
  if (dir.empty()) return true;
  if (!make_dirs(dir)) {
    *why = "cannot make the folder " + dir + ": " + std::strerror(errno);
    return false;
  }
  const std::string path = plan_path(dir, key);
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << key << "\n" << plan_text << "\n";
    if (!out.flush()) {
      *why = "cannot write " + tmp;
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    *why = "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace cc::fast
