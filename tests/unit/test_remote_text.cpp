// Text from other machines on an operator's terminal: common/printable's
// escapes, the who-text, `cc-rendezvous status`'s text view and the
// server's log lines, fed names and reasons that carry terminal escapes.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/printable.hpp"
#include "common/who.hpp"
#include "rendezvous/server_core/words.hpp"
#include "tests/rendezvous/log_capture.hpp"
#include "tests/unit/server_core_harness.hpp"
#include "tools/cc-rendezvous/status_render.hpp"

namespace rv = cc::rv;
using cc::printable;

namespace {

// Set a window title, ring the bell, clear the screen.
const std::string kHostile = "evil\x1b]0;pwned\x07\x1b[2J";
const std::string kHostileShown = "evil\\x1b]0;pwned\\x07\\x1b[2J";

// The first control character (other than a line break) or DEL in text, as
// its code; -1 when there is none.
int first_control(const std::string& text) {
  for (const char ch : text) {
    const auto b = static_cast<unsigned char>(ch);
    if ((b < 0x20 && b != '\n') || b == 0x7F) return b;
  }
  return -1;
}

// The capturing "cc" logger is registered before anything logs.
cc::test::LogCapture& logs = cc::test::LogCapture::install();

}  // namespace

TEST_CASE("printable: control characters and bytes outside UTF-8 become \\xNN") {
  CHECK(printable(kHostile) == kHostileShown);
  CHECK(printable(std::string("a\tb\nc\rd\x7f", 8)) == "a\\x09b\\x0ac\\x0dd\\x7f");
  CHECK(printable(std::string("nul\0byte", 8)) == "nul\\x00byte");
  // UTF-8 stays: accents, CJK, an emoji.
  CHECK(printable("h\xc3\xa9te \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80") ==
        "h\xc3\xa9te \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80");
  // The C1 controls (CSI as U+009B, a raw 0x9B), invalid, overlong and cut
  // sequences, surrogates and code points past U+10FFFF do not.
  CHECK(printable("\xc2\x9b" "2J") == "\\xc2\\x9b2J");
  CHECK(printable("\x9b" "2J") == "\\x9b2J");
  CHECK(printable("\xff\xfe") == "\\xff\\xfe");
  CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");
  CHECK(printable("\xe6\x97") == "\\xe6\\x97");
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");
  CHECK(printable("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");
  // Escaping twice changes nothing, so each layer may escape.
  CHECK(printable(printable(kHostile)) == printable(kHostile));
  CHECK(printable("plain host-01.example:29500") == "plain host-01.example:29500");
}

TEST_CASE("printable: who-words and the server's quoted names") {
  CHECK(cc::who(3, kHostile, 42) == "rank 3 (host " + kHostileShown + ", pid 42)");
  CHECK(cc::who(-1, kHostile) == "host " + kHostileShown);
  CHECK(rv::server_core::quote(kHostile) == "'" + kHostileShown + "'");
}

TEST_CASE("status text: names and reasons from the server cannot reach the terminal raw") {
  rv::StatusReport r;
  r.server = "cc-rendezvous " + kHostile;
  r.jobs_total = 1;
  rv::CommStatus g{1, rv::JoinState::failed, 2, 2, "rank 1 failed: " + kHostile, {}, {}};
  g.members.push_back({0, rv::MemberState::member, kHostile, 10, "10.0.0.1:1" + kHostile,
                       "10.0.0.1" + kHostile, 4, 100, 5000, ""});
  g.members.push_back({1, rv::MemberState::failed, kHostile, 11, "10.0.0.2:1", "", 4, 0, 0,
                       "the reason " + kHostile});
  r.jobs.push_back({"job-" + kHostile, 2, 0, 0, 0, {g}});

  const std::string text = cc::tools::rendezvous::status_text(r, "127.0.0.1:29500");
  INFO(text);
  CHECK(first_control(text) == -1);
  CHECK_THAT(text, Catch::Contains("job 'job-" + kHostileShown + "'"));
  CHECK_THAT(text, Catch::Contains("failed: rank 1 (host " + kHostileShown +
                                   ", pid 11) at 10.0.0.2:1: the reason " + kHostileShown));
  CHECK_THAT(text, Catch::Contains("cc-rendezvous " + kHostileShown));

  // The JSON view keeps the names as the server sent them.
  const auto json = cc::tools::rendezvous::status_json(r, "127.0.0.1:29500");
  CHECK(json["jobs"][0]["id"] == "job-" + kHostile);
  CHECK(json["jobs"][0]["communicators"][0]["members"][0]["host"] == kHostile);
}

TEST_CASE("server log lines: a joiner's host, job id and reason are printable") {
  cc::test::Harness h;
  h.client(1, "job-" + kHostile);
  h.client(2, "job-" + kHostile);
  rv::Join a = cc::test::join_msg(0, 2, kHostile);
  a.info.gpu_uuid = "GPU-a";
  rv::Join b = cc::test::join_msg(1, 2, "host-b");
  b.info.gpu_uuid = "GPU-b";
  h.feed(1, a);
  h.feed(2, b);
  REQUIRE(std::holds_alternative<rv::Joined>(h.one(1)));
  REQUIRE(std::holds_alternative<rv::Joined>(h.one(2)));
  h.feed(1, rv::Abort{"gave up " + kHostile});
  (void)h.take(1);

  const auto lines = logs.find({"aborted", "gave up"});
  REQUIRE_FALSE(lines.empty());
  for (const std::string& line : lines) {
    INFO(line);
    CHECK(first_control(line) == -1);
    CHECK_THAT(line, Catch::Contains("job 'job-" + kHostileShown + "'") &&
                         Catch::Contains("host " + kHostileShown) &&
                         Catch::Contains("gave up " + kHostileShown));
  }
  // The other member hears of it with the reason as it was given: escaping
  // is for what is shown, and the client shows it printable.
  const auto told = h.take(2);
  REQUIRE(told.size() == 1);
  const auto* event = std::get_if<rv::PeerEvent>(&told[0].message);
  REQUIRE(event != nullptr);
  CHECK(event->reason == "gave up " + kHostile);
}
