#include "tools/cli/cli.hpp"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include "common/settings.hpp"
#include "common/units.hpp"

namespace cc::tools::cli {
namespace {

class Formatter : public CLI::Formatter {
 public:
  explicit Formatter(std::string usage) : usage_(std::move(usage)) {}

  std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode mode) const override {
    std::string out = usage_ + "\n";
    if (!app->get_description().empty()) out += "\n" + app->get_description() + "\n";
    out += make_groups(app, mode);
    if (!app->get_footer().empty()) out += "\n" + app->get_footer() + "\n";
    return out;
  }

  // "-n, --nproc" (CLI11 writes "-n,--nproc").
  std::string make_option_name(const CLI::Option* opt, bool) const override {
    std::string names;
    for (const auto& s : opt->get_snames()) names += (names.empty() ? "-" : ", -") + s;
    for (const auto& l : opt->get_lnames()) names += (names.empty() ? "--" : ", --") + l;
    return names;
  }

  // Only the value's name ("N", "FILE"): defaults and limits are in the message.
  std::string make_option_opts(const CLI::Option* opt) const override {
    return opt->get_option_text().empty() ? std::string() : " " + opt->get_option_text();
  }

 private:
  std::string usage_;
};

// Whether the option takes a value (it is not a flag).
bool takes_value(const CLI::Option* opt) { return opt != nullptr && opt->get_type_size() != 0; }

}  // namespace

void reject(const std::string& message) { throw CLI::ValidationError(message); }

CLI::Option* add_value(CLI::App& app, const std::string& flag, const std::string& value_name,
                       const std::string& help, std::function<void(const std::string&)> set) {
  return app.add_option_function<std::string>(flag, std::move(set), help)->option_text(value_name);
}

long long number(const std::string& flag, const std::string& text, long long min, long long max) {
  long long v = 0;
  if (Status s = settings::parse_int(flag.c_str(), text.c_str(), min, max, &v); !s.ok())
    reject(s.message);
  return v;
}

CLI::Option* add_number(CLI::App& app, const std::string& flag, const std::string& value_name,
                        long long min, long long max, int* target, const std::string& help) {
  return add_value(app, flag, value_name, help, [=](const std::string& v) {
    *target = static_cast<int>(number(flag, v, min, max));
  });
}

CLI::Option* add_size(CLI::App& app, const std::string& flag, std::size_t* target,
                      const std::string& examples, const std::string& help) {
  return add_value(app, flag, "SIZE", help, [=](const std::string& v) {
    uint64_t bytes = 0;
    if (!parse_bytes(v, &bytes) || bytes < 1 || bytes > (uint64_t{1} << 50))
      reject(flag + " needs a size in bytes, such as " + examples);
    *target = static_cast<std::size_t>(bytes);
  });
}

CLI::Option* add_duration(CLI::App& app, const std::string& flag, std::chrono::milliseconds* target,
                          const std::string& message, const std::string& help) {
  return add_value(app, flag, "DURATION", help, [=](const std::string& v) {
    if (!parse_duration(v, std::chrono::seconds(1), target)) reject(message);
  });
}

CommandLine::CommandLine(std::string usage, std::size_t column) {
  auto formatter = std::make_shared<Formatter>(std::move(usage));
  formatter->column_width(column);
  app_.formatter(formatter);
  app_.set_help_flag();  // add_help() puts it back, listed last
  app_.option_defaults()->group("options")->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

void CommandLine::add_help() { app_.set_help_flag("-h,--help", "this text"); }

// argv without the program name, in the reversed order CLI11 parses from;
// notes how each option was spelled. CLI11 reads "--name=" as "--name"
// followed by the next argument; cc's programs read it as an empty value,
// which the option then judges. Only arguments up to "--" (or, for a prefix
// command, up to the program) are options.
std::vector<std::string> CommandLine::arguments(int argc, const char* const* argv) {
  std::vector<std::string> args;
  bool options = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (!options || a == "--") {
      options = false;
      args.push_back(a);
      continue;
    }
    const bool is_long = a.rfind("--", 0) == 0;
    if (!is_long && (a.size() < 2 || a[0] != '-')) {
      args.push_back(a);
      options = !app_.get_prefix_command();
      continue;
    }
    const size_t eq = is_long ? a.find('=') : std::string::npos;
    const std::string name = is_long ? a.substr(0, eq) : a.substr(0, 2);
    const CLI::Option* opt = app_.get_option_no_throw(name);
    if (opt != nullptr) spelled_[opt] = name;
    if (takes_value(opt) && is_long && eq == a.size() - 1) {
      args.push_back(name);
      args.emplace_back();
      continue;
    }
    args.push_back(a);
    // The value as the next argument: "--name VALUE", "-n VALUE".
    if (takes_value(opt) && a.size() == name.size() && i + 1 < argc) args.push_back(argv[++i]);
  }
  return {args.rbegin(), args.rend()};
}

Parsed CommandLine::parse(int argc, const char* const* argv, const std::string& noun) {
  Parsed p;
  try {
    app_.parse(arguments(argc, argv));
    p.ok = true;
  } catch (const CLI::CallForHelp&) {
    p.help = true;
  } catch (const CLI::ExtrasError&) {
    const std::vector<std::string> extra = app_.remaining();
    p.error = "unknown " + noun + " '" + (extra.empty() ? std::string() : extra.front()) + "'";
  } catch (const CLI::ArgumentMismatch& e) {
    // CLI11 runs out of arguments for a value only at the end of the line.
    std::string flag = argc > 1 ? argv[argc - 1] : "";
    flag = flag.substr(0, flag.find('='));
    const CLI::Option* opt = flag.empty() ? nullptr : app_.get_option_no_throw(flag);
    p.error = takes_value(opt) ? flag + " needs a value" : e.what();
  } catch (const CLI::ParseError& e) {
    p.error = e.what();
  }
  return p;
}

std::optional<int> CommandLine::parse_or_exit(
    int argc, const char* const* argv, const std::string& noun,
    const std::function<void(const std::string&)>& usage_error) {
  const Parsed parsed = parse(argc, argv, noun);
  if (parsed.help) {
    std::fputs(help().c_str(), stdout);
    return 0;
  }
  if (!parsed.ok) {
    usage_error(parsed.error);
    return 2;
  }
  return std::nullopt;
}

std::string CommandLine::spelled(const std::string& name) const {
  const auto it = spelled_.find(app_.get_option_no_throw(name));
  return it != spelled_.end() ? it->second : name;
}

}  // namespace cc::tools::cli
