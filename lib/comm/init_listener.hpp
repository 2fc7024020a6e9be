// What a rank hears from the rendezvous while its communicator starts, and
// what it tells it. Between its join and a working communicator a rank
// waits in NCCL's init, in cc's own set-up steps and in the reachability
// test; a member that fails meanwhile (its init failed, it died, it aborted)
// or the rendezvous going away must end those waits at once, with a message that
// names the failed rank, its host and pid, and its own account. And when this
// rank's own init fails, it tells the others before it returns. No CUDA
// here: CI drives it with processes as ranks.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "rendezvous/membership.hpp"
#include "rendezvous/protocol.hpp"

namespace cc::comm {

class InitListener {
 public:
  // `who` names this rank as text; `members` come with the join (for rank
  // 0's host and pid when its embedded server goes away).
  InitListener(rv::Membership& client, std::string who, int rank, uint32_t comm_number,
               std::vector<rv::MemberSummary> members, bool server_in_rank0);

  // News that ends this rank's init: CC_ERR_PEER_FAILED with a message, once. Reads
  // what arrived without waiting (about a millisecond of poll).
  std::optional<Status> news();
  // The same, waiting up to `wait` for it.
  std::optional<Status> news_within(std::chrono::milliseconds wait);
  // Whether news() returned something: this rank's init ends because of it.
  bool heard() const { return heard_; }

  // How this rank's init ends after a failure `st`: when the rendezvous
  // brought the cause (now, or within a moment: NCCL often fails on the
  // survivors before the news is read), the news wins and this rank leaves
  // quietly; otherwise this rank tells the others its own message. A failure
  // the rendezvous itself answered (the reachability test's verdict, a
  // member's failure) is news already: `from_rendezvous`. Returns the status
  // cc_comm_init returns.
  Status conclude(Status st, bool from_rendezvous = false);

 private:
  // The news in `e`, marked heard; none in a member's leaving or in this
  // rank's own events.
  std::optional<Status> news_from(const rv::PeerEvent& e);
  Status from_event(const rv::PeerEvent& e) const;
  std::string rank0_words() const;

  rv::Membership& client_;
  std::string who_;
  int rank_;
  uint32_t comm_number_;
  std::vector<rv::MemberSummary> members_;
  bool server_in_rank0_;
  bool heard_ = false;
};

}  // namespace cc::comm
