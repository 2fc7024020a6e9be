#include "tools/cli/cli.hpp"

#include <memory>
#include <utility>
#include <vector>

namespace cc::cli {
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

  // Only the value's name ("N", "FILE"): defaults and limits are in the words.
  std::string make_option_opts(const CLI::Option* opt) const override {
    return opt->get_option_text().empty() ? std::string() : " " + opt->get_option_text();
  }

 private:
  std::string usage_;
};

// Whether the option takes a value (it is not a flag).
bool takes_value(const CLI::Option* opt) { return opt != nullptr && opt->get_type_size() != 0; }

// argv without the program name, in the reversed order CLI11 parses from.
// CLI11 reads "--name=" as "--name" followed by the next argument; cc's
// programs read it as an empty value, which the option then judges. Only
// arguments up to "--" (or, for a prefix command, the program) are options.
std::vector<std::string> arguments(const CLI::App& app, int argc, const char* const* argv) {
  std::vector<std::string> args;
  bool options = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (!options || a == "--") {
      options = false;
      args.push_back(a);
      continue;
    }
    if (a.rfind("--", 0) == 0) {
      const size_t eq = a.find('=');
      const CLI::Option* opt = app.get_option_no_throw(a.substr(0, eq));
      if (takes_value(opt) && eq == a.size() - 1) {
        args.push_back(a.substr(0, eq));
        args.emplace_back();
        continue;
      }
      args.push_back(a);
      if (takes_value(opt) && eq == std::string::npos && i + 1 < argc) args.push_back(argv[++i]);
    } else if (a.size() > 1 && a[0] == '-') {
      args.push_back(a);
      if (a.size() == 2 && takes_value(app.get_option_no_throw(a)) && i + 1 < argc)
        args.push_back(argv[++i]);
    } else {
      args.push_back(a);
      options = !app.get_prefix_command();
    }
  }
  return {args.rbegin(), args.rend()};
}

}  // namespace

void setup(CLI::App& app, std::string usage, std::size_t column) {
  auto formatter = std::make_shared<Formatter>(std::move(usage));
  formatter->column_width(column);
  app.formatter(formatter);
  app.set_help_flag();  // add_help() puts it back, listed last
  app.option_defaults()->group("options")->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

void add_help(CLI::App& app) { app.set_help_flag("-h,--help", "this text"); }

void reject(const std::string& words) { throw CLI::ValidationError(words); }

Parsed parse(CLI::App& app, int argc, const char* const* argv, const std::string& noun) {
  Parsed p;
  try {
    app.parse(arguments(app, argc, argv));
    p.ok = true;
  } catch (const CLI::CallForHelp&) {
    p.help = true;
  } catch (const CLI::ExtrasError&) {
    const std::vector<std::string> extra = app.remaining();
    p.error = "unknown " + noun + " '" + (extra.empty() ? std::string() : extra.front()) + "'";
  } catch (const CLI::ArgumentMismatch& e) {
    // CLI11 runs out of arguments for a value only at the end of the line.
    std::string flag = argc > 1 ? argv[argc - 1] : "";
    flag = flag.substr(0, flag.find('='));
    const CLI::Option* opt = flag.empty() ? nullptr : app.get_option_no_throw(flag);
    p.error = takes_value(opt) ? flag + " needs a value" : e.what();
  } catch (const CLI::ParseError& e) {
    p.error = e.what();
  }
  return p;
}

}  // namespace cc::cli
