// Whether the loaded NCCL can encrypt its own bootstrap, in one line for
// cc-doctor and the communicator's init log. No NCCL here: the caller passes
// ncclGetVersion's code and whether the loaded libnccl exports
// ncclSetEncryption (lib/core/nccl_symbol.hpp looks it up).
//
// What cc knows: NCCL 2.32 added ncclSetEncryption (process-wide TLS with a
// pre-shared key on NCCL's own TCP sockets, its bootstrap among them) in
// every build; a build made without TLS_BACKEND=OPENSSL3 refuses the key
// (NCCL's Setup page, "Building with TLS support", "Configuring TCP
// encryption"). Whether the loaded library has the call is told by looking
// it up; whether the build has TLS is not, short of setting a key.
#pragma once

#include <string>

namespace cc::launch {

// "2.28.9" for 22809 (and 2.8.4 for the older form 2804); "unknown" for 0.
std::string nccl_version_text(int code);

// Starts "NCCL X.Y.Z here: "; says whether this NCCL has ncclSetEncryption,
// what that means for its bootstrap, and what to do.
std::string nccl_bootstrap_tls_line(int nccl_version_code, bool has_set_encryption);

}  // namespace cc::launch
