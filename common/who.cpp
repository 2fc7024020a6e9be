#include "common/who.hpp"

#include "common/printable.hpp"

namespace cc {

std::string who(const Who& w) {
  const std::string pid = w.pid != 0 ? "pid " + std::to_string(w.pid) : std::string();
  if (w.rank < 0) {  // before a rank is known: the process alone
    if (w.host.empty()) return pid.empty() ? "an unknown process" : pid;
    return "host " + printable(w.host) + (pid.empty() ? "" : " (" + pid + ")");
  }
  std::string details;
  auto add = [&details](const std::string& part) {
    if (part.empty()) return;
    if (!details.empty()) details += ", ";
    details += part;
  };
  if (!w.host.empty()) add("host " + printable(w.host));
  add(pid);
  if (w.generation >= 0) add("generation " + std::to_string(w.generation));
  std::string out = "rank " + std::to_string(w.rank);
  if (!details.empty()) out += " (" + details + ")";
  return out;
}

}  // namespace cc
