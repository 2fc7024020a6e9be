// Text that came from another machine (a job id, a host name, a reason, a
// server's message), made safe to show on a terminal or in a log: control
// characters and bytes that are not UTF-8 become visible escapes, so no
// remote peer can move the cursor, retitle a window or clear the screen of
// whoever reads the output. Also a name too long to show whole, cut short.
#pragma once

#include <string>
#include <string_view>

namespace cc {

// Tab, newline and the other C0 controls, DEL, the C1 controls (U+0080 to
// U+009F) and every byte outside valid UTF-8 become "\xNN" (one per byte);
// everything else, printable UTF-8 included, is kept. A backslash is kept as
// it is, so printable(printable(s)) == printable(s): text escaped where it
// arrives may be escaped again where it is shown.
std::string printable(std::string_view text);

// A name too long to show whole, cut to its start: "aaaa... (2000 bytes)";
// one of at most 32 bytes is kept as it is.
std::string shortened(std::string_view name);

}  // namespace cc
