// Whether the loaded NCCL can encrypt its own bootstrap, as far as cc knows,
// in one line for cc-doctor and the communicator's init log. No NCCL here:
// the caller passes ncclGetVersion's code.
//
// What cc knows: NCCL's documentation for 2.32 (Setup: "Building with TLS
// support", "Configuring TCP encryption") describes builds with
// TLS_BACKEND=OPENSSL3 that encrypt NCCL's own TCP sockets (its bootstrap
// among them) once given a key; 2.30's has no such section, and cc has not
// read 2.31's.
#pragma once

#include <string>

namespace cc::launch {

// The first NCCL version whose documentation describes it.
inline constexpr int kNcclBootstrapTlsDocumented = 23200;

// "2.28.9" for 22809 (and 2.8.4 for the older form 2804); "unknown" for 0.
std::string nccl_version_text(int code);

// Starts "NCCL X.Y.Z here: "; says what to do where cc knows of no
// encryption, and that cc cannot tell whether this build has it where the
// version documents it.
std::string nccl_bootstrap_tls_line(int nccl_version_code);

}  // namespace cc::launch
