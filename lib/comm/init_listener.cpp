#include "lib/comm/init_listener.hpp"

#include <cctype>

#include "common/log.hpp"
#include "common/printable.hpp"
#include "common/who.hpp"

namespace cc::comm {
namespace {

using std::chrono::milliseconds;

// NCCL on the survivors often fails a moment before the news of the cause
// is read; this long a wait for it costs a rank whose failure is its own.
constexpr milliseconds kNewsGrace{100};
constexpr milliseconds kTellTimeout{1000};
// What a PeerEvent's reason may carry (the protocol's string limit is 4096).
constexpr size_t kMaxReason = 3000;

// Advice that starts a sentence.
std::string capitalized(std::string text) {
  if (!text.empty()) text[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(text[0])));
  return text;
}

}  // namespace

InitListener::InitListener(rv::Membership& client, std::string who, int rank, uint32_t comm_number,
                           std::vector<rv::MemberSummary> members, bool server_in_rank0)
    : client_(client),
      who_(std::move(who)),
      rank_(rank),
      comm_number_(comm_number),
      members_(std::move(members)),
      server_in_rank0_(server_in_rank0) {}

std::string InitListener::rank0_words() const {
  for (const auto& m : members_)
    if (m.rank == 0) return cc::who(0, m.host, m.pid);
  return cc::who(0, {});
}

Status InitListener::from_event(const rv::PeerEvent& e) const {
  std::string host = e.host;
  uint32_t pid = e.pid;
  for (const auto& m : members_)
    if (m.rank == e.rank) {
      if (host.empty()) host = m.host;
      if (pid == 0) pid = m.pid;
    }
  const std::string peer = cc::who(e.rank, host, pid);
  const std::string reason = printable(e.reason);  // from another machine
  std::string story;
  switch (e.kind) {
    case rv::PeerEventKind::init_failed:
      story = peer + " could not start, so this communicator cannot either. Its words: " + reason;
      break;
    case rv::PeerEventKind::aborted:
      story = peer + " aborted during init: " + reason + ". Look at that rank's output first";
      break;
    case rv::PeerEventKind::server_stopping:
      if (server_in_rank0_)
        story = rank0_words() + ", which hosts the job's rendezvous server (" + client_.endpoint() +
                "), is gone during init: " + reason +
                ". Rank 0 most likely failed or died: look at its output";
      else
        story = client_.named() + " is gone during init: " + reason + ". " +
                capitalized(client_.lost_advice()) + ", then start the job again";
      break;
    default:
      story = peer + " was lost during init: " + reason +
              ". It crashed, was killed or lost its network: look at its output and its host's "
              "kernel log";
      break;
  }
  return make_status(CC_ERR_PEER_FAILED, who_ + ": cc_comm_init cannot finish: " + story);
}

std::optional<Status> InitListener::news_from(const rv::PeerEvent& e) {
  if (e.kind == rv::PeerEventKind::left) return std::nullopt;
  if (e.kind != rv::PeerEventKind::server_stopping && e.rank == rank_) return std::nullopt;
  heard_ = true;
  return from_event(e);
}

std::optional<Status> InitListener::news() {
  client_.pump();
  while (auto e = client_.next_event(milliseconds(0)))
    if (auto st = news_from(*e)) return st;
  return std::nullopt;
}

std::optional<Status> InitListener::news_within(milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + wait;
  for (;;) {
    if (auto st = news()) return st;
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) return std::nullopt;
    if (auto e = client_.next_event(std::chrono::duration_cast<milliseconds>(until - now)))
      if (auto st = news_from(*e)) return st;
  }
}

Status InitListener::conclude(Status st, bool from_rendezvous) {
  if (from_rendezvous) heard_ = true;
  if (!heard_) {
    if (auto cause = news_within(kNewsGrace)) {
      log().debug("{}: this rank's own error follows from the news: {}", who_, st.message);
      st = std::move(*cause);
    }
  }
  if (heard_) {
    // The others know already; leaving is not announced to them again.
    if (Status left = client_.leave(); !left.ok())
      log().debug("{}: leaving the rendezvous after the news: {}", who_, left.message);
    return st;
  }
  std::string message = st.message;
  if (message.size() > kMaxReason) message = message.substr(0, kMaxReason) + " ...";
  if (Status told = client_.init_failed(comm_number_, message, kTellTimeout); !told.ok())
    log().debug("{}: telling the other ranks about the failed init: {}", who_, told.message);
  return st;
}

}  // namespace cc::comm
