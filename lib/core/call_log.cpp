#include "lib/core/call_log.hpp"

#include <algorithm>

namespace cc::core {

CallLog::CallLog(int nranks, size_t capacity)
    : capacity_(capacity),
      sends_(static_cast<size_t>(std::max(nranks, 0))),
      recvs_(static_cast<size_t>(std::max(nranks, 0))) {
  ring_.resize(capacity_);
}

void CallLog::LastPoints::push(const CallPoint& p) {
  slots_[(first_ + size_) % slots_.size()] = p;
  if (size_ < slots_.size())
    ++size_;
  else
    first_ = (first_ + 1) % slots_.size();  // the oldest was overwritten
}

void CallLog::record(const CallDesc& call, uint64_t op, uint64_t stream, int64_t now_us) {
  CallPoint p;
  p.call = call;
  std::lock_guard<std::mutex> lock(mu_);
  const bool p2p = call.kind == CallKind::send || call.kind == CallKind::recv;
  if (p2p && call.root >= 0 && static_cast<size_t>(call.root) < sends_.size()) {
    Line& l = (call.kind == CallKind::send ? sends_ : recvs_)[static_cast<size_t>(call.root)];
    l.count(fingerprint_step(l.fingerprint, pair_part(call)), &p);
    p.line = call.kind == CallKind::send ? CallPoint::Line::send : CallPoint::Line::recv;
    p.peer = call.root;
    recent_p2p_.push(p);
  } else if (!p2p) {
    collectives_.count(fingerprint_step(collectives_.fingerprint, call), &p);
    recent_.push(p);
    if (p.seq % kCheckpointEvery == 0) checkpoints_.push(p);
  }
  if (capacity_ == 0) return;
  ring_[next_] = TraceEntry{p, op, stream, now_us, 0};
  next_ = (next_ + 1) % capacity_;
  filled_ = std::min(filled_ + 1, capacity_);
}

void CallLog::record_replay(uint64_t graph, const CallDesc& first, int32_t calls) {
  CallPoint p;
  p.line = CallPoint::Line::replay;
  p.call = first;
  p.peer = calls;
  std::lock_guard<std::mutex> lock(mu_);
  replays_.count(fingerprint_fold(replays_.fingerprint, graph), &p);
  recent_replays_.push(p);
  if (p.seq % kCheckpointEvery == 0) replay_checkpoints_.push(p);
}

void CallLog::completed_through(uint64_t op, int64_t now_us) {
  std::lock_guard<std::mutex> lock(mu_);
  if (op <= completed_op_) return;
  completed_op_ = op;
  // Newest first, until an entry already seen complete.
  for (size_t i = 0; i < filled_; ++i) {
    TraceEntry& e = ring_[(next_ + capacity_ - 1 - i) % capacity_];
    if (e.op > op) continue;
    if (e.completed_us != 0) break;
    e.completed_us = now_us;
  }
}

std::vector<CallPoint> CallLog::take_report() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CallPoint> out;
  out.reserve(checkpoints_.size() + recent_.size() + recent_p2p_.size() +
              replay_checkpoints_.size() + recent_replays_.size());
  // A checkpoint that is also among the recent ones is sent once.
  auto checkpoints_then_recent = [&out](LastPoints& checkpoints, LastPoints& recent) {
    const uint64_t first_recent = recent.size() == 0 ? UINT64_MAX : recent[0].seq;
    for (size_t i = 0; i < checkpoints.size(); ++i)
      if (checkpoints[i].seq < first_recent) out.push_back(checkpoints[i]);
    for (size_t i = 0; i < recent.size(); ++i) out.push_back(recent[i]);
    checkpoints.clear();
    recent.clear();
  };
  checkpoints_then_recent(checkpoints_, recent_);
  for (size_t i = 0; i < recent_p2p_.size(); ++i) out.push_back(recent_p2p_[i]);
  recent_p2p_.clear();
  checkpoints_then_recent(replay_checkpoints_, recent_replays_);
  reported_seq_ = collectives_.seq;
  return out;
}

bool CallLog::report_due() const {
  std::lock_guard<std::mutex> lock(mu_);
  return collectives_.seq - reported_seq_ >= kReportEvery;
}

std::vector<CallPoint> CallLog::points_in(uint64_t after, uint64_t through, size_t max) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CallPoint> out;
  for (size_t i = 0; i < filled_ && out.size() < max; ++i) {
    const CallPoint& p = ring_[(next_ + capacity_ - filled_ + i) % capacity_].point;
    if (p.line == CallPoint::Line::collective && p.seq > after && p.seq <= through)
      out.push_back(p);
  }
  return out;
}

std::vector<TraceEntry> CallLog::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TraceEntry> out;
  out.reserve(filled_);
  for (size_t i = 0; i < filled_; ++i)
    out.push_back(ring_[(next_ + capacity_ - filled_ + i) % capacity_]);
  return out;
}

uint64_t CallLog::collectives() const {
  std::lock_guard<std::mutex> lock(mu_);
  return collectives_.seq;
}

uint64_t CallLog::replays() const {
  std::lock_guard<std::mutex> lock(mu_);
  return replays_.seq;
}

uint64_t CallLog::fingerprint() const {
  std::lock_guard<std::mutex> lock(mu_);
  return collectives_.fingerprint;
}

}  // namespace cc::core
