// An environment for a test: the variables it names, nothing else.
#pragma once

#include <map>
#include <string>

#include "common/settings.hpp"

namespace cc::test {

struct FakeEnv {
  std::map<std::string, std::string> vars;
  cc::settings::Getenv getenv() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

}  // namespace cc::test
