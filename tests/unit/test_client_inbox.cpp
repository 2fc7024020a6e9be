// The client's filing of what its server sends (rendezvous/client_inbox),
// without sockets: replies only for requests awaited, peer events in a
// bounded queue, a flood or garbage giving the connection up with a message.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "rendezvous/client_inbox.hpp"

namespace rv = cc::rv;

namespace {

const std::string kEndpoint = "10.1.2.3:29500";

std::vector<uint8_t> event_frame(int32_t rank, const std::string& host = "h",
                                 const std::string& reason = "gone") {
  return rv::encode_frame(0, rv::PeerEvent{rv::PeerEventKind::failed, rank, host, 7, reason});
}

}  // namespace

TEST_CASE("client inbox: replies are kept for the requests awaited, others dropped") {
  rv::ClientInbox inbox(kEndpoint);
  inbox.await(5);
  inbox.receive(rv::encode_frame(9, rv::Ok{}));  // nobody asked
  CHECK_FALSE(inbox.has_reply(9));
  CHECK(inbox.replies_held() == 0);
  // A reply split across reads is filed once whole.
  const auto frame = rv::encode_frame(5, rv::Integer{41});
  inbox.receive(std::span(frame).first(3));
  CHECK_FALSE(inbox.has_reply(5));
  inbox.receive(std::span(frame).subspan(3));
  auto reply = inbox.take_reply(5);
  REQUIRE(reply.has_value());
  CHECK(std::get<rv::Integer>(*reply).value == 41);
  CHECK(inbox.awaited() == 0);
  // A reply after its caller gave up is dropped.
  inbox.await(6);
  inbox.give_up(6);
  inbox.receive(rv::encode_frame(6, rv::Ok{}));
  CHECK_FALSE(inbox.has_reply(6));
  CHECK(inbox.usable());
}

TEST_CASE("client inbox: a server pushing events nobody takes is given up past the bound") {
  rv::ClientInbox inbox(kEndpoint);
  std::vector<uint8_t> flood;
  for (size_t i = 0; i < rv::ClientInbox::kMaxEvents; ++i) {
    const auto f = event_frame(static_cast<int32_t>(i));
    flood.insert(flood.end(), f.begin(), f.end());
  }
  inbox.receive(flood);
  CHECK(inbox.usable());
  CHECK(inbox.events_queued() == rv::ClientInbox::kMaxEvents);

  // Taking one makes room for one.
  REQUIRE(inbox.take_event().has_value());
  inbox.receive(event_frame(5000));
  CHECK(inbox.usable());

  // One more than the bound ends the connection with a message, and the event
  // reader learns it after the events already queued.
  inbox.await(1);
  std::vector<uint8_t> more = event_frame(5001);
  const auto reply = rv::encode_frame(1, rv::Ok{});
  more.insert(more.end(), reply.begin(), reply.end());
  inbox.receive(more);
  REQUIRE_FALSE(inbox.usable());
  CHECK(inbox.broken().code == CC_ERR_RENDEZVOUS);
  CHECK_THAT(inbox.broken().message,
             Catch::Contains("the rendezvous at " + kEndpoint) &&
                 Catch::Contains("pushed more than " +
                                 std::to_string(rv::ClientInbox::kMaxEvents) + " peer events"));
  CHECK_FALSE(inbox.has_reply(1));  // nothing is filed after the break
  CHECK(inbox.events_queued() == rv::ClientInbox::kMaxEvents + 1);
  inbox.receive(event_frame(6000));
  CHECK(inbox.events_queued() == rv::ClientInbox::kMaxEvents + 1);

  size_t taken = 0;
  std::optional<rv::PeerEvent> last;
  while (auto e = inbox.take_event()) {
    ++taken;
    last = std::move(e);
  }
  CHECK(taken == rv::ClientInbox::kMaxEvents + 1);
  REQUIRE(last.has_value());
  CHECK(last->kind == rv::PeerEventKind::server_stopping);
  CHECK_THAT(last->reason, Catch::Contains("pushed more than"));
}

TEST_CASE("client inbox: garbage, or the server's own error, breaks it once with words") {
  SECTION("garbage") {
    rv::ClientInbox inbox(kEndpoint);
    const std::string junk = "HTTP/1.1 400 Bad Request\r\n\r\n";
    inbox.receive(std::span(reinterpret_cast<const uint8_t*>(junk.data()), junk.size()));
    REQUIRE_FALSE(inbox.usable());
    CHECK_THAT(inbox.broken().message,
               Catch::Contains("sent a frame we cannot read") && Catch::Contains("bad magic"));
    CHECK(inbox.events_queued() == 1);
  }
  SECTION("an error pushed by the server, its words printable") {
    rv::ClientInbox inbox(kEndpoint);
    inbox.receive(rv::encode_frame(
        0, rv::Error{CC_ERR_RENDEZVOUS, "the rendezvous server is stopping\x1b[2J"}));
    REQUIRE_FALSE(inbox.usable());
    CHECK(inbox.broken().message == "the rendezvous server is stopping\\x1b[2J");
    inbox.break_with(cc::make_status(CC_ERR_RENDEZVOUS, "later"));
    CHECK(inbox.broken().message == "the rendezvous server is stopping\\x1b[2J");
    CHECK(inbox.events_queued() == 1);
  }
  SECTION("an error code this version does not know") {
    CHECK(rv::server_error(rv::Error{9999, "x"}, kEndpoint).code == CC_ERR_RENDEZVOUS);
    const cc::Status auth = rv::server_error(rv::Error{CC_ERR_AUTH, "mac mismatch"}, kEndpoint);
    CHECK(auth.code == CC_ERR_AUTH);
    // The server's message follows (a server with a token per job names the job).
    CHECK_THAT(auth.message, Catch::Contains("refused our token") &&
                                 Catch::EndsWith("(it said: mac mismatch)"));
  }
}

TEST_CASE("client inbox: an event's host and reason are printable when taken") {
  rv::ClientInbox inbox(kEndpoint);
  inbox.receive(event_frame(3, "gpu\x1b]0;x\x07", "killed\x1b[2J"));
  auto e = inbox.take_event();
  REQUIRE(e.has_value());
  CHECK(e->rank == 3);
  CHECK(e->host == "gpu\\x1b]0;x\\x07");
  CHECK(e->reason == "killed\\x1b[2J");
}
