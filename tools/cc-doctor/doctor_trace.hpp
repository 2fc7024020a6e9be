// `cc-doctor trace DIR [--json]` (doctor_trace.cpp).
#pragma once

namespace cc::tools::doctor {

// argv[0] is "trace"; returns the exit status.
int trace_command(int argc, char** argv);

}  // namespace cc::tools::doctor
