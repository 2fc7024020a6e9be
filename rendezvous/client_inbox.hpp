// What a rendezvous client files from the bytes its server sends, with no
// socket: replies under their request id for the call that awaits them,
// peer events and requests for calls' points (request id 0) in bounded
// queues, and the first reason the connection broke. FrameClient (frame_client.cpp) holds its state mutex around
// every call; tests and the fuzzer drive it alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>

#include "common/status.hpp"
#include "rendezvous/protocol.hpp"

namespace cc::rv {

// An Error the server sent, as the Status a call returns: its code
// (CC_ERR_RENDEZVOUS for one this version does not know) and its message,
// made printable. A refused token never says which part was wrong.
Status server_error(const Error& e, const std::string& endpoint);

class ClientInbox {
 public:
  // Peer events queued and not yet taken. A member's watchdog takes them as
  // they come, and a server tells a generation of at most 16 failures
  // (ServerCore::kMaxAnnouncedFailures), so only a server of another kind
  // gets near this. Each event holds at most two strings of
  // Limits::max_string bytes: the queue holds at most about 8.5 MiB.
  static constexpr size_t kMaxEvents = 1024;

  explicit ClientInbox(std::string endpoint, Limits limits = {});

  // Files every whole frame in what arrived so far. A frame it cannot read,
  // or an event past kMaxEvents, breaks the connection with a message; once
  // broken, nothing more is filed.
  void receive(std::span<const uint8_t> bytes);

  // A request was sent: its reply is to be kept.
  void await(uint32_t request_id);
  // Nobody waits any more (a deadline, a failed send): a late reply is dropped.
  void give_up(uint32_t request_id);
  bool has_reply(uint32_t request_id) const { return replies_.count(request_id) != 0; }
  // The reply, if it came; taking it ends the wait for it.
  std::optional<Message> take_reply(uint32_t request_id);

  bool has_event() const { return !events_.empty(); }
  std::optional<PeerEvent> take_event();
  size_t events_queued() const { return events_.size(); }

  // The server asks for points of this member's calls (CallsWanted) at most
  // once per difference it looks into: a few are kept, the oldest dropped.
  static constexpr size_t kMaxWants = 16;
  std::optional<CallsWanted> take_want();

  // Marks the connection unusable for good (the first reason stays) and
  // queues one server_stopping event with it, so the event reader learns
  // that the server is gone. Returns the reason in force.
  const Status& break_with(Status why);
  // Success while the connection is usable or moving, else why not.
  const Status& broken() const { return broken_; }
  bool usable() const { return broken_.ok() && !moving_; }

  // Failover (the client has a locator, frame_client.hpp): a connection
  // lost by accident, or a server that says it is stopping, is `moving`
  // instead of broken: nothing more is filed from it and no event is queued
  // while the client looks for the next server. Without failover, lose() is
  // break_with().
  void set_failover(bool on) { failover_ = on; }
  bool failover() const { return failover_; }
  // The connection is lost (end of stream, reset, a read or write error).
  // True when it is moving now (or was already).
  bool lose(Status why);
  bool moving() const { return moving_; }
  // Why the connection that is moving was lost.
  const Status& lost() const { return lost_; }
  // The client took up a new connection at `endpoint`: frames are read
  // afresh from it; the replies held, the requests awaited and the events
  // queued stay.
  void resumed(std::string endpoint);
  // An event that arrived on the next server's connection before it was
  // taken up.
  void queue_event(PeerEvent e) { push_event(std::move(e)); }

  // Requests awaited and replies held, for tests of the bounds.
  size_t awaited() const { return awaited_.size(); }
  size_t replies_held() const { return replies_.size(); }

 private:
  void file(FrameReader::Frame frame);
  void push_event(PeerEvent e);

  std::string endpoint_;
  FrameReader reader_;
  std::set<uint32_t> awaited_;
  std::map<uint32_t, Message> replies_;
  std::deque<PeerEvent> events_;
  std::deque<CallsWanted> wants_;
  Status broken_;
  bool failover_ = false;
  bool moving_ = false;
  Status lost_;
};

}  // namespace cc::rv
