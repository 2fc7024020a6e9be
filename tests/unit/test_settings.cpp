// The settings table (common/settings.cpp) against the README's environment
// table, the table's readers, and the one spelling of who a message is about.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "common/settings.hpp"
#include "common/who.hpp"

using Catch::Matchers::Contains;
namespace settings = cc::settings;

namespace {

// The README's "## Environment" section, up to the next "## " heading.
std::string readme_environment() {
  const char* path = std::getenv("README");
  REQUIRE(path != nullptr);
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  const size_t start = text.find("\n## Environment\n");
  REQUIRE(start != std::string::npos);
  const size_t end = text.find("\n## ", start + 1);
  return text.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

settings::Getenv fake(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

}  // namespace

TEST_CASE("every setting's variables and default are in the README's environment table") {
  const std::string section = readme_environment();
  for (const settings::Setting& s : settings::all()) {
    for (const char* var : s.vars) {
      if (var == nullptr) break;
      INFO(var);
      CHECK_THAT(section, Contains("`" + std::string(var) + "`"));
    }
    if (*s.default_text != '\0' && std::string(s.vars[0]).rfind("CC_", 0) == 0) {
      INFO(s.vars[0] << " default " << s.default_text);
      CHECK_THAT(section, Contains(s.default_text));
    }
  }
}

TEST_CASE("every CC_ variable the README's environment table names is in the settings table") {
  std::string table;  // the table's rows only: the prose around it names other things
  std::istringstream lines(readme_environment());
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("|", 0) == 0) table += line + "\n";
  std::set<std::string> known;
  for (const settings::Setting& s : settings::all())
    for (const char* var : s.vars)
      if (var != nullptr) known.insert(var);
  const std::regex name("CC_[A-Z_]+");
  for (auto it = std::sregex_iterator(table.begin(), table.end(), name);
       it != std::sregex_iterator(); ++it) {
    INFO(it->str());
    CHECK(known.count(it->str()) == 1);
  }
}

TEST_CASE("the first variable set wins, and words name the variable") {
  long long v = -1;
  settings::Found found;
  auto env = fake({{"RANK", "3"}, {"OMPI_COMM_WORLD_RANK", "5"}});
  REQUIRE(settings::read_int(settings::Id::rank, env, &v, &found).ok());
  CHECK(v == 3);
  CHECK(std::string(found.var) == "RANK");

  const cc::Status bad =
      settings::read_int(settings::Id::master_port, fake({{"MASTER_PORT", "70000"}}), &v);
  CHECK(bad.code == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(bad.message, Contains("MASTER_PORT=70000 is out of range 1..65535"));

  int index = -1;
  const cc::Status choice = settings::read_choice(settings::Id::fast_allreduce,
                                                  fake({{"CC_FAST_ALLREDUCE", "maybe"}}), &index);
  CHECK(choice.code == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(choice.message, Contains("CC_FAST_ALLREDUCE='maybe' is none of 0, 1, require"));
  REQUIRE(settings::read_choice(settings::Id::fast_allreduce,
                                fake({{"CC_FAST_ALLREDUCE", "require"}}), &index)
              .ok());
  CHECK(index == 2);

  v = 42;  // unset: the value stays
  REQUIRE(settings::read_int(settings::Id::timeout_ms, fake({}), &v, &found).ok());
  CHECK(v == 42);
  CHECK(found.var == nullptr);
  CHECK(settings::default_int(settings::Id::timeout_ms) == 300000);
}

TEST_CASE("who: one spelling of a rank, its host and its pid") {
  CHECK(cc::who(3, "gpu-a", 4242) == "rank 3 (host gpu-a, pid 4242)");
  CHECK(cc::who(3, "gpu-a") == "rank 3 (host gpu-a)");
  CHECK(cc::who(3, "") == "rank 3");
  CHECK(cc::who(cc::Who{1, "b", 7, 2}) == "rank 1 (host b, pid 7, generation 2)");
  CHECK(cc::who(-1, "gpu-a", 9) == "host gpu-a (pid 9)");
}
