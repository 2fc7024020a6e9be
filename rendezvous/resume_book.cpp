#include "rendezvous/resume_book.hpp"

#include <algorithm>
#include <type_traits>

#include "common/who.hpp"

namespace cc::rv {
namespace {

// The server-side timeout of a request that has one (0: none, or the
// request waits on nothing).
uint32_t* timeout_of(Message& m) {
  return std::visit(
      [](auto& r) -> uint32_t* {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, Get> || std::is_same_v<T, Wait> ||
                      std::is_same_v<T, Join> || std::is_same_v<T, Recover> ||
                      std::is_same_v<T, RecoverId> || std::is_same_v<T, PreflightReady> ||
                      std::is_same_v<T, PreflightReport>)
          return &r.timeout_ms;
        else
          return nullptr;
      },
      m);
}

}  // namespace

void ResumeBook::joined(const MemberInfo& info, const Joined& joined) {
  Resume r;
  r.info = info;
  r.generation = joined.generation;
  r.rank = joined.rank >= 0 ? joined.rank : info.rank;
  r.world_size = static_cast<int32_t>(world_size_of(joined));
  r.unique_id = joined.unique_id;
  r.seat = joined.seat;
  r.heartbeat_window_ms = window_ms_;
  r.last_completed = last_completed_;
  members_.push_back(std::move(r));
}

void ResumeBook::completed(uint64_t last_completed) {
  last_completed_ = last_completed;
  for (Resume& r : members_) r.last_completed = last_completed;
}

std::string ResumeBook::who() const {
  if (members_.empty()) return "";
  const Resume& r = members_.front();
  return cc::who(r.rank, r.info.host, r.info.pid) + " of communicator " +
         std::to_string(r.info.comm_number) + " (generation " + std::to_string(r.generation) +
         ")";
}

void ResumeBook::await(uint32_t id, Message request, Clock::time_point deadline) {
  requests_[id] = Request{std::move(request), deadline, false};
}

bool ResumeBook::take_for_sending(uint32_t id) {
  auto it = requests_.find(id);
  if (it == requests_.end() || it->second.sent) return false;
  it->second.sent = true;
  return true;
}

std::vector<std::pair<uint32_t, Message>> ResumeBook::to_send_again(Clock::time_point now) {
  std::vector<std::pair<uint32_t, Message>> out;
  out.reserve(requests_.size());
  for (auto& [id, r] : requests_) {
    r.sent = true;
    Message m = r.message;
    if (uint32_t* timeout = timeout_of(m); timeout != nullptr && *timeout > 0) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(r.deadline - now) - kAnswerGrace;
      *timeout = static_cast<uint32_t>(std::clamp<long long>(left.count(), 1, *timeout));
    }
    out.emplace_back(id, std::move(m));
  }
  return out;
}

}  // namespace cc::rv
