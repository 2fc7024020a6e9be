// cc-doctor: what this machine looks like to cc and NCCL, and what to fix.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/settings.hpp"
#include "lib/launch/env.hpp"
#include "tools/cc-doctor/doctor_report.hpp"
#include "tools/cc-doctor/doctor_trace.hpp"
#include "tools/cli/cli.hpp"

namespace {

using cc::tools::cli::add_value;

constexpr const char* kUsage =
    "usage: cc-doctor [--json] [--master-addr ADDR] [--master-port PORT] "
    "[--job-id ID] [--timeout-ms MS]\n       cc-doctor trace DIR [--json]";

constexpr const char* kAbout =
    "Reports versions, GPUs and their links, network interfaces, the route to\n"
    "MASTER_ADDR, what answers at MASTER_ADDR:MASTER_PORT, /dev/shm, the open-file\n"
    "limit and the NCCL_*/CC_* variables, each problem with a fix. Exits 0 when it\n"
    "ran (findings are not failures), 2 on bad arguments. `cc-doctor trace DIR` reads\n"
    "the ranks' flight recorder files instead (cc-doctor trace --help).";

// A setting's value when one of its variables is set and not empty.
const char* setting(cc::settings::Id id, std::string* which) {
  const cc::settings::Found f = cc::settings::find(id, cc::settings::process_env());
  if (f.var == nullptr || *f.value == '\0') return nullptr;
  *which = f.var;
  return f.value;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace cc::tools::doctor;
  if (argc >= 2 && std::strcmp(argv[1], "trace") == 0) return trace_command(argc - 1, argv + 1);
  Options o;
  cc::tools::doctor::Report report;

  using cc::settings::Id;
  std::string var;
  if (const char* j = setting(Id::job_id, &var)) o.job_id = j;
  if (const char* a = setting(Id::master_addr, &var)) {
    o.master_addr = a;
    o.master_addr_var = var;
  }
  if (const char* p = setting(Id::master_port, &var)) {
    long long port = 0;
    const cc::settings::Setting& range = cc::settings::get(Id::master_port);
    if (cc::Status s = cc::settings::parse_int(var.c_str(), p, range.min, range.max, &port);
        s.ok()) {
      o.master_port = static_cast<int>(port);
      o.master_port_var = var;
    } else {
      report.add("rendezvous", Level::error, s.message,
                 "set " + var + " to the rendezvous's TCP port");
    }
  }

  cc::tools::cli::CommandLine command_line(kUsage, 22);
  CLI::App& app = command_line.app();
  app.description(kAbout);
  app.add_flag("--json", o.json, "the report as one JSON object");
  add_value(app, "--master-addr", "ADDR",
            "the rendezvous host (default CC_MASTER_ADDR, else MASTER_ADDR)",
            [&](const std::string& v) {
              if (v.empty()) cc::tools::cli::reject("--master-addr needs a host");
              o.master_addr = v;
              o.master_addr_var = "--master-addr";
            });
  add_value(app, "--master-port", "PORT", "its TCP port (default CC_MASTER_PORT, else MASTER_PORT)",
            [&](const std::string& v) {
              o.master_port = static_cast<int>(cc::tools::cli::number("--master-port", v, 1, 65535));
              o.master_port_var = "--master-port";
            });
  add_value(app, "--job-id", "ID",
            "the job the probe says hello for (default CC_JOB_ID, else\n\"default\")",
            [&](const std::string& v) {
              if (v.empty()) cc::tools::cli::reject("--job-id needs a value");
              o.job_id = v;
            });
  cc::tools::cli::add_number(app, "--timeout-ms", "MS", 1, 600000, &o.timeout_ms,
                      "the probe's deadline (default 3000)");
  command_line.add_help();

  if (const auto exit_status =
          command_line.parse_or_exit(argc, argv, "argument", [&](const std::string& message) {
            std::fprintf(stderr, "cc-doctor: %s\n%s", message.c_str(), app.help().c_str());
          }))
    return *exit_status;

  collect_system(&report);
  collect_gpu(&report);
  collect_network(&report, o);
  const std::string text = o.json ? render_json(report) : render_text(report);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}
