// cc-doctor: what this machine looks like to cc and NCCL, and what to fix.
//   cc-doctor [--json] [--master-addr A] [--master-port P] [--job-id J] [--timeout-ms T]
// Exit 0 when it ran (findings are not failures), 2 on bad arguments.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "lib/launch/env.hpp"
#include "tools/cc-doctor/doctor_report.hpp"

namespace {

constexpr const char* kUsage =
    "usage: cc-doctor [--json] [--master-addr ADDR] [--master-port PORT] [--job-id ID] "
    "[--timeout-ms MS]\n"
    "  Reports versions, GPUs and their links, network interfaces, the route to\n"
    "  MASTER_ADDR, what answers at MASTER_ADDR:MASTER_PORT, /dev/shm, the open-file\n"
    "  limit and the NCCL_*/CC_* variables, each problem with a fix.\n"
    "  --master-addr/--master-port default to CC_MASTER_ADDR or MASTER_ADDR and\n"
    "  CC_MASTER_PORT or MASTER_PORT; --job-id to CC_JOB_ID; --timeout-ms to 3000.\n";

int bad_argument(const std::string& why) {
  std::fprintf(stderr, "cc-doctor: %s\n%s", why.c_str(), kUsage);
  return 2;
}

const char* first_env(std::initializer_list<const char*> names, std::string* which) {
  for (const char* n : names)
    if (const char* v = std::getenv(n); v != nullptr && *v != '\0') {
      *which = n;
      return v;
    }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace cc::doctor;
  Options o;
  cc::doctor::Report report;

  if (const char* j = std::getenv("CC_JOB_ID"); j != nullptr && *j != '\0') o.job_id = j;
  std::string var;
  if (const char* a = first_env({"CC_MASTER_ADDR", "MASTER_ADDR"}, &var)) {
    o.master_addr = a;
    o.master_addr_var = var;
  }
  if (const char* p = first_env({"CC_MASTER_PORT", "MASTER_PORT"}, &var)) {
    long long port = 0;
    if (cc::Status s = cc::settings::parse_int(var.c_str(), p, 1, 65535, &port); s.ok()) {
      o.master_port = static_cast<int>(port);
      o.master_port_var = var;
    } else {
      report.add("rendezvous", Level::error, s.message,
                 "set " + var + " to the rendezvous's TCP port");
    }
  }

  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_value = false;
    if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
      has_value = true;
    }
    auto take = [&](std::string* out) {
      if (has_value) {
        *out = value;
        return true;
      }
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    auto take_int = [&](const char* name, long long min, long long max, int* out) -> int {
      std::string text;
      if (!take(&text)) return bad_argument(std::string(name) + " needs a value");
      long long v = 0;
      if (cc::Status s = cc::settings::parse_int(name, text.c_str(), min, max, &v); !s.ok())
        return bad_argument(s.message);
      *out = static_cast<int>(v);
      return 0;
    };
    if (arg == "--json" && !has_value) {
      o.json = true;
    } else if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--master-addr") {
      if (!take(&o.master_addr) || o.master_addr.empty())
        return bad_argument("--master-addr needs a host");
      o.master_addr_var = "--master-addr";
    } else if (arg == "--master-port") {
      if (int rc = take_int("--master-port", 1, 65535, &o.master_port)) return rc;
      o.master_port_var = "--master-port";
    } else if (arg == "--timeout-ms") {
      if (int rc = take_int("--timeout-ms", 1, 600000, &o.timeout_ms)) return rc;
    } else if (arg == "--job-id") {
      if (!take(&o.job_id) || o.job_id.empty()) return bad_argument("--job-id needs a value");
    } else {
      return bad_argument("unknown argument '" + std::string(argv[i]) + "'");
    }
  }

  collect_system(&report);
  collect_gpu(&report);
  collect_network(&report, o);
  const std::string text = o.json ? render_json(report) : render_text(report);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}
