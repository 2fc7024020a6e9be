// The command line of cc's programs: CLI11 with cc's --help layout (the usage
// line first, then the description, "options:" and a footer; "-n, --nproc N"
// with its words beside it) and cc's words for a bad command line.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>

namespace cc::cli {

// Sets up `app` for one program: --help starts with `usage` ("usage: cc-run
// -n N [options] -- PROGRAM [ARGS...]") and puts option descriptions at
// `column`; options go under "options:", and the last of a repeated option
// wins. The description and footer are app.description() and app.footer().
void setup(CLI::App& app, std::string usage, std::size_t column);

// Adds "-h, --help" as the last option listed.
void add_help(CLI::App& app);

// For option callbacks: rejects the value with `words` as the whole message.
[[noreturn]] void reject(const std::string& words);

struct Parsed {
  bool ok = false;    // the options are set: run
  bool help = false;  // -h or --help: print app.help() and exit 0
  std::string error;  // why the command line is wrong (exit 2)
};

// Parses argv. An error is "unknown <noun> 'ARG'" for the first argument no
// option takes (`noun` is "option" or "argument"), "FLAG needs a value", or
// the words an option's callback rejected its value with.
Parsed parse(CLI::App& app, int argc, const char* const* argv, const std::string& noun);

}  // namespace cc::cli
