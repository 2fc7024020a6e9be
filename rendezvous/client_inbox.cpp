#include "rendezvous/client_inbox.hpp"

#include <utility>

#include "common/log.hpp"
#include "common/printable.hpp"

namespace cc::rv {

Status server_error(const Error& e, const std::string& endpoint) {
  const auto code = e.code > CC_SUCCESS && e.code < CC_NUM_RESULTS
                        ? static_cast<cc_result_t>(e.code)
                        : CC_ERR_RENDEZVOUS;
  if (code == CC_ERR_AUTH) {
    // The server's message names the job where it keeps a token per job.
    return make_status(CC_ERR_AUTH, "the rendezvous at " + endpoint +
                                        " refused our token: check that CC_RENDEZVOUS_TOKEN "
                                        "(or CC_RENDEZVOUS_TOKEN_FILE) holds the same token as "
                                        "the server" +
                                        (e.message.empty() ? "" : " (it said: " +
                                                                      printable(e.message) + ")"));
  }
  return make_status(code, printable(e.message));
}

ClientInbox::ClientInbox(std::string endpoint, Limits limits)
    : endpoint_(std::move(endpoint)), reader_(limits) {}

void ClientInbox::receive(std::span<const uint8_t> bytes) {
  if (!usable()) return;
  reader_.feed(bytes);
  while (usable()) {
    std::optional<FrameReader::Frame> frame = reader_.next();
    if (!frame) break;
    file(std::move(*frame));
  }
  if (usable() && reader_.error() != DecodeError::none) {
    break_with(make_status(CC_ERR_RENDEZVOUS,
                           "the rendezvous at " + endpoint_ + " sent a frame we cannot read (" +
                               describe(reader_.error()) +
                               "): is it a cc rendezvous server of the same version?"));
  }
}

void ClientInbox::await(uint32_t request_id) { awaited_.insert(request_id); }

void ClientInbox::give_up(uint32_t request_id) {
  awaited_.erase(request_id);
  replies_.erase(request_id);
}

std::optional<Message> ClientInbox::take_reply(uint32_t request_id) {
  auto it = replies_.find(request_id);
  if (it == replies_.end()) return std::nullopt;
  Message m = std::move(it->second);
  replies_.erase(it);
  awaited_.erase(request_id);
  return m;
}

std::optional<PeerEvent> ClientInbox::take_event() {
  if (events_.empty()) return std::nullopt;
  PeerEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

std::optional<CallsWanted> ClientInbox::take_want() {
  if (wants_.empty()) return std::nullopt;
  CallsWanted w = wants_.front();
  wants_.pop_front();
  return w;
}

const Status& ClientInbox::break_with(Status why) {
  moving_ = false;
  if (broken_.ok()) {
    broken_ = std::move(why);
    PeerEvent e;
    e.kind = PeerEventKind::server_stopping;
    e.reason = broken_.message;
    events_.push_back(std::move(e));
  }
  return broken_;
}

bool ClientInbox::lose(Status why) {
  if (!broken_.ok()) return false;
  if (!failover_) {
    break_with(std::move(why));
    return false;
  }
  if (!moving_) lost_ = std::move(why);
  moving_ = true;
  return true;
}

void ClientInbox::resumed(std::string endpoint) {
  endpoint_ = std::move(endpoint);
  reader_ = FrameReader(reader_.limits());
  moving_ = false;
  lost_ = Status::success();
}

void ClientInbox::push_event(PeerEvent e) {
  if (events_.size() >= kMaxEvents) {
    break_with(make_status(
        CC_ERR_RENDEZVOUS,
        "the rendezvous at " + endpoint_ + " pushed more than " + std::to_string(kMaxEvents) +
            " peer events that were not taken yet: a cc server tells a generation of at most "
            "16 failures, so this is a server of another kind or version, or a hostile one; "
            "this connection is given up"));
    return;
  }
  e.host = printable(e.host);
  e.reason = printable(e.reason);
  events_.push_back(std::move(e));
}

void ClientInbox::file(FrameReader::Frame frame) {
  if (frame.request_id == 0) {
    if (auto* event = std::get_if<PeerEvent>(&frame.message)) {
      // A client that can follow the job to the next server does so.
      const bool stopping = event->kind == PeerEventKind::server_stopping;
      Status stopped;
      if (stopping)
        stopped = make_status(CC_ERR_RENDEZVOUS, "the rendezvous server at " + endpoint_ +
                                                     " stopped: " + printable(event->reason));
      if (stopping && failover_) {
        lose(std::move(stopped));
        return;
      }
      push_event(std::move(*event));
      // Its message is every later call's: nothing more comes from it.
      if (stopping && broken_.ok()) broken_ = std::move(stopped);
    } else if (auto* want = std::get_if<CallsWanted>(&frame.message)) {
      if (wants_.size() >= kMaxWants) wants_.pop_front();
      wants_.push_back(*want);
    } else if (auto* error = std::get_if<Error>(&frame.message)) {
      // The server dropping us on its own: every waiter gets its message.
      break_with(server_error(*error, endpoint_));
    } else {
      log().debug("rendezvous {}: ignoring an unsolicited '{}' message", endpoint_,
                  type_name(type_of(frame.message)));
    }
  } else if (awaited_.count(frame.request_id) != 0) {
    replies_[frame.request_id] = std::move(frame.message);
  }
}

}  // namespace cc::rv
