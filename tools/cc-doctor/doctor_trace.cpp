// `cc-doctor trace DIR [--json]`: reads every flight recorder file in DIR
// (cc-trace.*.json, one per rank) and prints where the ranks diverged
// (trace_report.hpp). Exits 0 when it read at least one file, 1 when none,
// 2 on bad arguments.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tools/cc-doctor/doctor_trace.hpp"
#include "tools/cc-doctor/trace_report.hpp"
#include "tools/cli/cli.hpp"

namespace cc::tools::doctor {

int trace_command(int argc, char** argv) {
  cc::tools::cli::CommandLine command_line("usage: cc-doctor trace DIR [--json]", 22);
  CLI::App& app = command_line.app();
  app.description(
      "Reads every rank's flight recorder file in DIR (CC_TRACE_DIR) and prints, per\n"
      "communicator, the first op where the ranks' calls differ, who is behind and in\n"
      "which call, the last op every rank completed, and each rank's last five calls.");
  bool json = false;
  std::string dir;
  app.add_flag("--json", json, "the report as one JSON object");
  app.add_option("DIR", dir, "the directory the ranks wrote into")->required();
  command_line.add_help();
  if (const auto exit_status =
          command_line.parse_or_exit(argc, argv, "argument", [&](const std::string& message) {
            std::fprintf(stderr, "cc-doctor trace: %s\n%s", message.c_str(), app.help().c_str());
          }))
    return *exit_status;

  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::string> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("cc-trace.", 0) == 0 && name.size() > 5 &&
        name.compare(name.size() - 5, 5, ".json") == 0)
      files.push_back(it->path().string());
  }
  if (ec) {
    std::fprintf(stderr, "cc-doctor trace: cannot read %s: %s\n", dir.c_str(),
                 ec.message().c_str());
    return 1;
  }
  std::sort(files.begin(), files.end());
  std::vector<RankTrace> traces;
  for (const std::string& f : files) {
    std::ifstream in(f);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    RankTrace t;
    std::string why;
    if (j.is_discarded()) {
      std::fprintf(stderr, "cc-doctor trace: %s: not JSON (a file still being written?)\n",
                   f.c_str());
      continue;
    }
    if (!parse_trace(j, f, &t, &why)) {
      std::fprintf(stderr, "cc-doctor trace: %s: %s\n", f.c_str(), why.c_str());
      continue;
    }
    traces.push_back(std::move(t));
  }
  if (traces.empty()) {
    std::fprintf(stderr,
                 "cc-doctor trace: no flight recorder file (cc-trace.*.json) in %s; ranks write "
                 "them there when CC_TRACE_DIR names it\n",
                 dir.c_str());
    return 1;
  }
  const auto reports = analyse_traces(traces);
  const std::string text =
      json ? render_traces_json(reports).dump(2) + "\n" : render_traces_text(reports);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace cc::tools::doctor
