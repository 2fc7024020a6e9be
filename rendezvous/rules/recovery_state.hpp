// One communicator's recovery (cc_comm_shrink, cc_comm_regrow) as every
// rendezvous backend holds and decides it: the processes of its current
// generation (seats, by job rank), whether each is alive, which of them
// called and how, the replacements waiting for a failed rank, and, once
// nobody alive is awaited (and a regrow has a process for every rank), the
// next generation. cc's server feeds it from its connections
// (server_core/recovery.cpp), the etcd backend's coordinator from the keys
// it reads and watches (etcd/backend_recover.cpp); each keeps only its own
// mechanics (parked requests, leases, who makes the NCCL id) and says the
// messages this gives. The rules themselves are listed in docs/FAILURES.md.
//
// Incremental: every event costs O(log n) (a map by job rank) and ready()
// is O(1): counts of the seats awaited, of the callers, of the callers that
// cannot shrink and of a regrow's ranks without a process are kept as
// events come. Only decide(), the deadline's message and a regrow's first call
// (which counts its holes) walk the seats, once each.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/protocol.hpp"
#include "rendezvous/rules/join_rules.hpp"
#include "rendezvous/rules/recovery_rules.hpp"

namespace cc::rv::rules {

// alive: waited for until it calls; gone: left cleanly, not waited for, but
// may still call; dead: declared failed, cannot come back.
enum class SeatState : uint8_t { alive, gone, dead };

// The next generation, as decided.
struct NextGeneration {
  RecoverKind kind = RecoverKind::shrink;
  RecoverMethod method = RecoverMethod::new_id;
  std::vector<MemberInfo> members;  // by new rank; rank: the job rank
  std::vector<bool> replacement;    // by new rank: a replacement's process
  std::vector<int32_t> failed;      // ranks of the old generation left out or replaced
  // Rank 0 is a replacement that brought an NCCL id from its Join.
  std::vector<uint8_t> replacement_id;
};

class Recovery {
 public:
  // Generation `generation` of communicator `comm_number` of job `job`:
  // its processes (info.rank: the job rank; host and pid name the process,
  // empty and 0 where a backend no longer knows them), every one alive.
  // Their ranks in the generation are their order by job rank.
  void start(std::string job, uint32_t comm_number, uint32_t generation,
             std::vector<MemberInfo> seats);

  // A backend's news of a seat (`why`, for dead: "its connection closed").
  // Dead is for good: later news of that seat changes nothing.
  // A seat that dies while it takes part stops taking part: returns true
  // then (its call is answered by stale_words()).
  bool set_state(int32_t job_rank, SeatState s, const std::string& why = {});
  // Names the process of a seat whose record a backend reads late.
  void set_process(int32_t job_rank, const MemberInfo& info);

  // A survivor's call. A refusal either answers the caller alone (stale,
  // a size no job has, a second call) or ends the attempt for every caller
  // (ends_attempt: ranks that disagree, a regrow too small for a survivor).
  struct Refused {
    Refusal refusal;
    bool ends_attempt = false;
  };
  std::optional<Refused> call(const MemberInfo& caller, RecoverKind kind, int32_t nranks,
                              bool can_shrink);
  // The refusals of call() that do not depend on calls (stale, a size no
  // job has), without calling.
  std::optional<Refusal> check_caller(const MemberInfo& caller, RecoverKind kind,
                                      int32_t nranks) const;
  // A caller went (its request or connection). When nobody calls any more
  // the attempt is over: the next call sets what the others must call.
  void withdraw(int32_t job_rank);

  // A process that joined with the rank of a failed one (`late`: its
  // late_join_words()), waiting for a regrow; `id`: what it brought.
  std::optional<Refusal> replacement(const MemberInfo& in, const std::string& late,
                                     std::vector<uint8_t> id = {});
  // Its refusal, without taking it.
  std::optional<Refusal> check_replacement(const MemberInfo& in, const std::string& late) const;
  void replacement_gone(int32_t rank);

  // An attempt is in progress: somebody called.
  bool pending() const { return callers_ > 0; }
  // Nobody alive is awaited and, for a regrow, every rank has a process:
  // decide (after refusing the wrong replacements). O(1).
  bool ready() const;
  // The waiting replacements of a ready regrow whose world size is not its
  // size, taken out, each with its refusal.
  std::vector<std::pair<MemberInfo, Refusal>> take_wrong_replacements();
  // The next generation; call when ready() and no wrong replacement waits.
  NextGeneration decide() const;
  // The decided generation becomes the current one; its replacements stop
  // waiting, the others go on waiting.
  void advance(const NextGeneration& next);
  // The attempt failed (refused, or late): nobody takes part any more.
  void end_attempt();

  // At a deadline: who did not call, which ranks of a regrow never got a
  // process (`settings`: what a replacement must be given), then `also`
  // (what else held it, a backend's); `idle`: the message when none of these.
  std::string late_words(uint32_t timeout_ms, const std::string& settings, const std::string& also,
                         const std::string& idle) const;
  // A process the recovery cannot take (`caller`), with why.
  std::string stale_words(const MemberInfo& caller) const;

  // "rank 2 (host h, pid 7, generation 1)": its rank in this generation.
  std::string seat_who(int32_t job_rank) const;
  // "job 'j', communicator 1, generation 2".
  std::string where() const;
  uint32_t generation() const { return generation_; }
  RecoverKind kind() const { return agreement_.kind(); }
  int32_t nranks() const { return agreement_.nranks(); }
  int32_t awaited() const { return awaited_; }
  int32_t callers() const { return callers_; }
  bool has_seat(int32_t job_rank) const { return seats_.count(job_rank) != 0; }
  SeatState state(int32_t job_rank) const;
  bool taking_part(int32_t job_rank) const;
  // The seat's process as last known (nullptr: no such seat).
  const MemberInfo* seat(int32_t job_rank) const;
  // The seats in job-rank order (their ranks in this generation).
  std::vector<int32_t> job_ranks() const;
  const MemberInfo* waiting_replacement(int32_t rank) const;

 private:
  struct Seat {
    MemberInfo info;
    int32_t position = 0;
    SeatState state = SeatState::alive;
    std::string why;  // dead: why
    bool calling = false;
    bool can_shrink = false;
  };
  struct Waiting {
    MemberInfo info;
    std::vector<uint8_t> id;
  };

  // Changes a seat or a replacement, keeping the counts in step.
  template <class F>
  void change(int32_t job_rank, F&& f);
  bool counts_awaited(const Seat& s) const { return s.state == SeatState::alive && !s.calling; }
  bool filled(int32_t rank) const;  // a regrow's rank has a process
  void count_holes();

  std::string job_;
  uint32_t comm_number_ = 0;
  uint32_t generation_ = 0;
  int32_t nccl_major_minor_ = 0;
  std::map<int32_t, Seat> seats_;
  std::map<int32_t, Waiting> replacements_;
  RecoveryAgreement agreement_;
  int32_t awaited_ = 0;        // seats alive and not calling
  int32_t callers_ = 0;        // seats calling
  int32_t cannot_shrink_ = 0;  // callers without ncclCommShrink
  int32_t holes_ = 0;          // a regrow's ranks without a process
};

}  // namespace cc::rv::rules
