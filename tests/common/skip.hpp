// A Catch2 case that cannot run on this machine: it says why and ends the
// process with exit status 77, which Meson counts as skipped (Catch2 2.13
// has no skip of its own). For a case that runs alone in its process: give
// it a hidden tag ("[.ipv6]"), so the binary's other runs leave it out, and
// a Meson test of its own that selects it by that tag.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace cc::test {

[[noreturn]] inline void skip_case(const std::string& why) {
  std::printf("SKIP: %s\n", why.c_str());
  std::fflush(stdout);
  std::_Exit(77);
}

}  // namespace cc::test
