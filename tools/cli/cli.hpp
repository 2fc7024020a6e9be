// The command line of cc's programs: CLI11 with cc's --help layout (the usage
// line first, then the description, "options:" and a footer; "-n, --nproc N"
// with its help beside it) and cc's message for a bad command line.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace cc::tools::cli {

// For option callbacks: rejects the value with `message` as the whole error message.
[[noreturn]] void reject(const std::string& message);

// Adds option `flag` ("--port", "-n,--nproc") taking one value, handed to
// `set` (which may reject() it); `value_name` ("PORT") stands for the value
// in --help.
CLI::Option* add_value(CLI::App& app, const std::string& flag, const std::string& value_name,
                       const std::string& help, std::function<void(const std::string&)> set);

// A whole number from min to max, else rejected with settings::parse_int's
// message naming `flag`.
long long number(const std::string& flag, const std::string& text, long long min, long long max);

// Adds option `flag` taking a whole number from min to max into *target.
CLI::Option* add_number(CLI::App& app, const std::string& flag, const std::string& value_name,
                        long long min, long long max, int* target, const std::string& help);

// Adds option `flag` taking a size in bytes (common/units.hpp: "64MiB",
// "64M", "65536") from 1 to 2^50 into *target; a bad value is rejected as
// "FLAG needs a size in bytes, such as EXAMPLES".
CLI::Option* add_size(CLI::App& app, const std::string& flag, std::size_t* target,
                      const std::string& examples, const std::string& help);

// Adds option `flag` taking a duration (common/units.hpp: "500ms", "30s",
// "10m", "2h", "0"; a bare number is seconds) into *target; a bad value is
// rejected with `message` as the whole error message.
CLI::Option* add_duration(CLI::App& app, const std::string& flag, std::chrono::milliseconds* target,
                          const std::string& message, const std::string& help);

struct Parsed {
  bool ok = false;    // the options are set: run
  bool help = false;  // -h or --help: print help() and exit 0
  std::string error;  // why the command line is wrong (exit 2)
};

class CommandLine {
 public:
  // --help starts with `usage` ("usage: cc-run -n N [options] -- PROGRAM
  // [ARGS...]") and puts option descriptions at `column`. Options go under
  // "options:"; the last of a repeated option wins. The description and the
  // footer are app().description() and app().footer().
  CommandLine(std::string usage, std::size_t column);

  CLI::App& app() { return app_; }
  std::string help() const { return app_.help(); }

  // Adds "-h, --help"; call it after the other options, so it is listed last.
  void add_help();

  // Parses argv. An error is "unknown <noun> 'ARG'" for the first argument
  // no option takes (`noun` is "option" or "argument"), "FLAG needs a value",
  // or the message an option's callback rejected its value with.
  Parsed parse(int argc, const char* const* argv, const std::string& noun);

  // parse(), then what a program does when it is not to run: -h or --help
  // prints help() on stdout and gives exit status 0; a bad command line hands
  // the error's message to `usage_error` (which writes it to stderr) and gives
  // 2. Gives nothing when the options are set and the program runs.
  std::optional<int> parse_or_exit(int argc, const char* const* argv, const std::string& noun,
                                   const std::function<void(const std::string&)>& usage_error);

  // The option named `name` ("-n") as the command line spelled it
  // ("--iters"), so that messages quote the user; `name` when not given.
  std::string spelled(const std::string& name) const;

 private:
  std::vector<std::string> arguments(int argc, const char* const* argv);

  CLI::App app_;
  std::map<const CLI::Option*, std::string> spelled_;
};

}  // namespace cc::tools::cli
