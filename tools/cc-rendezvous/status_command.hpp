// `cc-rendezvous status`: asks a running rendezvous server (the daemon, or
// the server embedded in rank 0 or cc-run) for its status report, with the
// job's token, and prints it as text or JSON.
#pragma once

namespace cc::tools::rendezvous {

// argv[0] is "status". Returns the exit status: 0 with a report, 1 when the
// server cannot be asked, 2 for a bad command line.
int status_command(int argc, char** argv);

}  // namespace cc::tools::rendezvous
