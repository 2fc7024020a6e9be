// The message of a member's departure (see event_rules.hpp).
#include "rendezvous/rules/event_rules.hpp"

namespace cc::rv::rules {

std::string abort_reason(const std::string& reason) {
  return reason.empty() ? "the rank called abort" : reason;
}

std::string init_failed_reason(const std::string& reason) {
  return reason.empty() ? "no reason given" : reason;
}

std::string closed_without_leaving_words() {
  return "it closed its connection to the rendezvous without leaving (the process exited or "
         "dropped the communicator without destroying it)";
}

std::string init_failed_while_joining_words(const std::string& who, const std::string& where,
                                            const std::string& reason) {
  return who + " could not start while joining " + where + ": " + reason;
}

}  // namespace cc::rv::rules
