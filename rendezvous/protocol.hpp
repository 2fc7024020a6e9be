// The rendezvous wire protocol: frames and messages, encoded and decoded
// without touching a socket, so the code is unit-tested and fuzzed alone.
//
// A frame is a 16-byte header followed by `length` payload bytes:
//   u32 magic 'CCRV' | u16 version | u16 type | u32 request_id | u32 length
// Integers are little-endian. Strings and byte blobs are a u32 length and the
// bytes. A reply carries the request_id of its request; messages the server
// pushes on its own (peer events) carry request_id 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/call_desc.hpp"

namespace cc::rv {

inline constexpr uint32_t kMagic = 0x56524343;  // "CCRV" in little-endian bytes
inline constexpr uint16_t kProtocolVersion = 1;
inline constexpr size_t kHeaderSize = 16;

// Sizes every decoder enforces. The server may configure tighter ones.
struct Limits {
  uint32_t max_frame = 4u << 20;  // payload bytes of one frame
  uint32_t max_key = 1024;        // bytes of one key
  uint32_t max_value = 1u << 20;  // bytes of one value
  uint32_t max_string = 4096;     // any other string (host, job id, reasons)
  uint32_t max_wait_keys = 1024;  // keys in one WAIT
};

enum class MsgType : uint16_t {
  // client -> server
  hello = 1,
  auth = 2,
  set = 10,
  get = 11,
  add = 12,
  wait = 13,
  del = 14,
  compare_set = 15,
  join = 20,
  leave = 21,
  heartbeat = 22,
  abort = 23,
  heartbeat_window = 24,  // announce me as failed after a silence
  progress_query = 25,    // who is behind
  resume = 26,            // go on as a member on a successor server (failover)
  recover = 30,           // go on as the next generation of a communicator (shrink, regrow)
  recover_id = 31,        // the NCCL id of that generation, from the rank asked to make it
  calls_end = 32,         // a member's last calls before its communicator ends (cc_comm_destroy)
  init_failed = 40,       // this member's init failed after its join, with its own message
  preflight_ready = 41,   // where this member listens for the reachability test
  preflight_report = 42,  // what this member's test connections found
  status_query = 50,      // an operator's view of the server's jobs
  relay = 60,             // (both ways) the frames of the ranks behind a node agent
  // server -> client
  challenge = 101,
  ok = 102,
  error = 103,
  value = 104,
  integer = 105,
  joined = 106,
  peer_event = 107,
  heartbeat_ack = 108,
  progress = 109,
  compare_set_result = 110,
  recover_id_wanted = 115,  // answers recover: this rank makes the next generation's id
  calls_wanted = 116,       // pushed, or answers calls_end: the points of some calls, from the flight recorder
  preflight_plan = 125,
  status_report = 135,
};

// ---- messages --------------------------------------------------------

// First message on every connection: who is calling and for which job.
struct Hello {
  std::string job_id;
  std::string host;
  uint32_t pid = 0;
  std::string client;  // free text: "cc 0.1.0 store", "cc 0.1.0 comm"
  // Chosen once by a client and kept across its reconnects: with the
  // request id it names a store write, so one sent again after a failover
  // is answered, not applied twice. Empty: none (absent in older frames).
  std::vector<uint8_t> session{};
};
inline constexpr uint32_t kMaxSessionBytes = 64;
// The server's answer to Hello. When auth_required the client must send Auth
// with HMAC-SHA256(token, nonce || job_id) before anything else.
struct Challenge {
  bool auth_required = false;
  std::vector<uint8_t> nonce;
  std::string server;  // "cc-rendezvous 0.1.0"
};
struct Auth {
  std::vector<uint8_t> mac;
};
struct Set {
  std::string key;
  std::vector<uint8_t> value;
};
// Answered with Value once the key exists, or Error(timeout) at the deadline.
// timeout_ms 0 answers at once (Error not-found when absent).
struct Get {
  std::string key;
  uint32_t timeout_ms = 0;
};
struct Add {
  std::string key;
  int64_t delta = 0;
};
struct Wait {
  std::vector<std::string> keys;
  uint32_t timeout_ms = 0;
};
struct Del {
  std::string key;
};
// Sets key to value when its current value is exactly `expected`; without
// has_expected, only when the key is absent. Answered with CompareSetResult,
// or with Error when a store limit refuses the write. A key it sets wakes
// the requests parked on it, as Set does.
struct CompareSet {
  std::string key;
  bool has_expected = false;
  std::vector<uint8_t> expected;  // empty without has_expected
  std::vector<uint8_t> value;
};

// Who a rank is, as it joins a communicator's rendezvous.
struct MemberInfo {
  int32_t rank = -1;
  int32_t world_size = 0;
  uint32_t comm_number = 0;  // n-th communicator this process creates in the job
  std::string host;
  uint32_t pid = 0;
  int32_t nccl_version = 0;  // NCCL_VERSION_CODE of the loaded library
  int32_t cuda_driver = 0;
  int32_t cuda_runtime = 0;
  std::string gpu_uuid;
  std::string nccl_addr;  // the address NCCL will use
  std::string host_key;   // NCCL's idea of the host: NCCL_HOSTID, or host name and boot id
};
// Who holds a GPU, as NCCL tells GPUs apart: its host identity (the host name
// where a member sent none) and the GPU's UUID. Two members of one
// communicator with the same key would be refused by NCCL.
inline std::string gpu_owner_key(const MemberInfo& i) {
  return (i.host_key.empty() ? i.host : i.host_key) + "\n" + i.gpu_uuid;
}
// The bytes of one generation's NCCL ids, opaque to the rendezvous: one
// ncclUniqueId (128 bytes), or up to 64 of them end to end for NCCL's
// scalable init (lib/comm/nccl_ids.hpp).
inline constexpr uint32_t kMaxUniqueIdBytes = 8192;

// Join a communicator. Rank 0 sends the NCCL id(s) in unique_id; past the
// scalable-init threshold each rank rooting one of NCCL's bootstrap trees
// sends its own too, the others send it empty; Joined carries them all, end
// to end in rank order (rules::JoinCheck). Answered with Joined once all
// world_size ranks have joined, or Error (mismatch / timeout naming the
// missing ranks).
struct Join {
  MemberInfo info;
  std::vector<uint8_t> unique_id;
  uint32_t timeout_ms = 0;
};
struct Leave {};
// The fields after last_completed are absent in frames of older clients.
// `calls` are points of the member's calls in generation `generation` of
// communicator `comm_number`, for the server to compare across its ranks
// (rendezvous/rules/call_check.hpp); empty when the member checks none.
inline constexpr size_t kMaxHeartbeatCalls = 256;
// split > 0: the calls are those of a communicator made by cc_comm_split of
// that generation (its split-th split there, in the part `split_color`), in
// which the member is rank `split_rank`: they are compared among that
// child's members only, and last_completed is still the parent's. (Absent
// in older frames: 0, the communicator itself.)
// answers (absent in older frames: 0): the CallsWanted whose points `calls`
// carry.
struct Heartbeat {
  uint64_t last_completed = 0;  // sequence number of the last finished operation
  uint32_t comm_number = 0;
  uint32_t generation = 0;
  std::vector<CallPoint> calls{};
  uint32_t split = 0;
  int32_t split_color = 0;
  int32_t split_rank = -1;
  uint64_t answers = 0;
};
// A member's calls up to its last, as its communicator ends (cc_comm_destroy):
// its points not yet sent and the number of its last collective. The server
// answers once every live member of the generation has sent its own (a
// member that is gone is not waited for): Ok when their calls agree, Error
// CC_ERR_MISMATCH naming the first op where they differ, or CallsWanted when
// it needs more of this member's points, which come in another CallsEnd
// (answers: that want's id). The member waits at most timeout_ms.
// split > 0 (absent in older frames: 0): the calls are those of a
// communicator made by cc_comm_split, keyed as Heartbeat's split lines, in
// which the member is rank split_rank of split_ranks; the server waits for
// every live rank of that child. last_replay (absent in older frames: 0):
// the number of its last replay of a CUDA graph (CallPoint::Line::replay).
struct CallsEnd {
  uint32_t comm_number = 0;
  uint32_t generation = 0;
  uint64_t last = 0;
  std::vector<CallPoint> calls{};
  uint64_t answers = 0;
  uint32_t timeout_ms = 0;
  uint32_t split = 0;
  int32_t split_color = 0;
  int32_t split_rank = -1;
  int32_t split_ranks = 0;
  uint64_t last_replay = 0;
};
// The points of a member's collectives numbered after `after` up to
// `through`, lowest first, as its flight recorder holds them (at most
// kMaxHeartbeatCalls): asked where reports left a gap before a difference.
// Pushed (request id 0) to a running member, whose next Heartbeat answers;
// split > 0 names a split child's line as in Heartbeat.
struct CallsWanted {
  uint32_t comm_number = 0;
  uint32_t generation = 0;
  uint32_t split = 0;
  int32_t split_color = 0;
  uint64_t id = 0;
  uint64_t after = 0;
  uint64_t through = 0;
};
struct Abort {
  std::string reason;
};
// Asks the server to watch this connection's heartbeats: a member silent for
// window_ms is announced as failed. Answered with Ok. A client that never
// sends HeartbeatWindow is never dropped for silence (unless the server was started
// with a heartbeat timeout of its own).
struct HeartbeatWindow {
  uint32_t window_ms = 0;
};
// Asks for members' last completed operation in one generation of this
// connection's job. rank >= 0: that member only. rank -1: the members other
// than the asker that are furthest behind (the lowest number; at most
// kMaxProgressMembers), so the answer stays small in a large job. Answered
// with Progress.
inline constexpr size_t kMaxProgressMembers = 64;
struct ProgressQuery {
  uint32_t comm_number = 0;
  int32_t rank = -1;
  uint32_t generation = 0;  // which recovery generation of it (absent in older frames: 0)
  // Also where every member is, as text (Progress::calls; absent in older frames: false).
  bool with_calls = false;
};

struct Ok {};
struct Error {
  uint32_t code = 0;  // a cc_result_t
  std::string message;
};
struct Value {
  std::vector<uint8_t> value;
};
struct Integer {
  int64_t value = 0;
};
struct MemberSummary {
  int32_t rank = -1;
  std::string host;
  uint32_t pid = 0;
};
// How the ranks of a generation made by a recovery build its NCCL communicator.
enum class RecoverMethod : uint8_t {
  new_id = 0,       // ncclCommInitRank with unique_id
  nccl_shrink = 1,  // ncclCommShrink of the previous generation's communicator, excluding `failed`
};
struct Joined {
  std::vector<uint8_t> unique_id;
  // Rank 0 only (an older server's recovery: all, by rank); .rank: the job rank.
  std::vector<MemberSummary> members;
  // Warnings every rank should log, one a line: e.g. a rank whose NCCL
  // address differs from the address its connection came from (NAT).
  std::string notice;
  // The fields below are absent in frames of older servers (decoded as the
  // defaults). generation is the communicator's (cc_comm_generation):
  // 0 for a join, one more for each shrink or regrow. rank is the receiver's
  // rank in it (-1: its Join's rank). failed lists the ranks of the previous
  // generation, in its numbering, that this one leaves out or replaces.
  uint32_t generation = 0;
  int32_t rank = -1;
  std::vector<int32_t> failed;
  RecoverMethod method = RecoverMethod::new_id;
  // The generation's number of ranks. members names rank 0 only, after a
  // recovery as after a join: a list of all in every member's Joined would
  // cost O(W^2) bytes. Absent in frames of older servers: 0, and then
  // members.size() is the number (world_size_of).
  uint32_t world_size = 0;
  // The receiver's seat: a secret of its own that proves, in a later
  // Recover or Resume, that the caller is the process this member is (host
  // and pid are no proof). The same for a rank across generations; a
  // replacement gets a new one. Absent in frames of older servers.
  std::vector<uint8_t> seat{};
};
inline constexpr uint32_t kMaxSeatBytes = 64;
inline size_t world_size_of(const Joined& j) {
  return j.world_size > 0 ? j.world_size : j.members.size();
}
// init_failed: the member's init failed after its join; reason holds its own message.
enum class PeerEventKind : uint8_t {
  failed = 1,
  aborted = 2,
  left = 3,
  server_stopping = 4,
  init_failed = 5,
  mismatch = 6  // the member's calls differ from another's; reason names both calls
};
// split > 0 (a mismatch only): about the calls of that split child of the
// member's communicator (Heartbeat::split), not the communicator itself.
// Absent in older frames: 0.
// `with` (a failure only): the other ranks of the same generation that
// failed together with `rank`, in its numbering: the ranks of one node whose
// agent was lost. Absent in older frames: empty.
inline constexpr size_t kMaxPeerEventWith = 4096;
struct PeerEvent {
  PeerEventKind kind = PeerEventKind::failed;
  int32_t rank = -1;
  std::string host;
  uint32_t pid = 0;
  std::string reason;
  uint32_t split = 0;
  int32_t split_color = 0;
  std::vector<int32_t> with{};
};
struct HeartbeatAck {};
struct MemberProgress {
  int32_t rank = -1;
  std::string host;
  uint32_t pid = 0;
  uint64_t last_completed = 0;
  uint32_t silent_ms = 0;  // since its last heartbeat (or since joining)
};
struct Progress {
  std::vector<MemberProgress> members;  // sorted by rank; ranks gone are absent
  // For a query with_calls: the members grouped by their last collective
  // (rendezvous/rules/call_positions.hpp); "" when they all are in one, or
  // none reported its calls. Absent in frames of older servers.
  std::string calls{};
};
// Whether a CompareSet wrote its value.
struct CompareSetResult {
  bool swapped = false;
};

// ---- recovery (cc_comm_shrink, cc_comm_regrow) ------------------------
// A communicator of a job is named by its join number (MemberInfo::comm_number).
// Its generations (cc_comm_generation; `generation` here) start at 0 with the
// ranks that joined it; each shrink or regrow makes the next one, whose
// membership the server decides. A rank's job rank is the rank it joined
// generation 0 with (a replacement: the rank it was started with); in a shrunk
// generation ranks are renumbered densely in job-rank order, in a regrown one
// rank = job rank.

enum class RecoverKind : uint8_t { shrink = 1, regrow = 2 };

// A survivor asks to go on in the next generation of a communicator. Sent on
// a connection of its own, which becomes the survivor's membership of that
// generation. Answered with Joined once the server has decided it (and has
// its id), with RecoverIdWanted when this rank is to make the id, or with
// Error (a mismatch, a stale rank, the deadline naming who never came, a
// second failure that made the decision impossible).
struct Recover {
  MemberInfo info;          // rank: the job rank; comm_number: the communicator's
  uint32_t generation = 0;  // the generation it recovers from (its communicator's)
  RecoverKind kind = RecoverKind::shrink;
  int32_t nranks = 0;       // regrow: the size to grow back to
  bool can_shrink = false;  // its communicator can still serve ncclCommShrink
  uint32_t timeout_ms = 0;
  std::vector<uint8_t> seat{};  // Joined::seat of the communicator it recovers (absent: none)
};
// The id of the next generation, from the rank that got RecoverIdWanted.
// Answered like Recover.
struct RecoverId {
  uint32_t generation = 0;  // the generation being made
  std::vector<uint8_t> unique_id;
  uint32_t timeout_ms = 0;
};
struct RecoverIdWanted {
  uint32_t generation = 0;  // the generation being made
};

// ---- failover: resuming on a successor server ---------------------------
//
// When the server a client talks to goes away, the client finds the next
// one (FrameClientOptions::locate), says Hello (with the same session) and
// sends one Resume per communicator membership its connection held, before
// anything else; then it sends again the requests left unanswered. The
// successor rebuilds each communicator's generation from the Resumes of its
// members (server_core/resume.cpp). Answered with Ok, or with Error when the
// server takes no resumes (it is no successor, or its grace period is over),
// the member disagrees with those that resumed before it (world size,
// generation, NCCL ids), or its seat is taken or was declared failed.
struct Resume {
  MemberInfo info;             // as the member joined: rank is its job rank
  uint32_t generation = 0;     // of its communicator (info.comm_number)
  int32_t rank = -1;           // its rank in that generation
  int32_t world_size = 0;      // that generation's number of ranks
  uint32_t heartbeat_window_ms = 0;  // the silence it may keep (0: unwatched)
  uint64_t last_completed = 0;
  std::vector<uint8_t> unique_id;  // the generation's NCCL id bytes, as it got them
  std::vector<uint8_t> seat{};     // Joined::seat, as it got it (absent: none)
};

// ---- operations: what an operator asks during a hang ---------------------
//
// A connection whose Hello names no job (an empty job id) enters no job: it
// may only send StatusQuery (after authenticating when the server has a
// token). The report is bounded: at most kMaxStatusJobs jobs and about
// kStatusBudget bytes in all; the members left out are counted.
inline constexpr size_t kMaxStatusJobs = 256;
inline constexpr size_t kStatusBudget = 1u << 20;
inline constexpr size_t kMaxStatusText = 512;  // a failure or a member's reason, cut to this
struct StatusQuery {
  std::string job_id;  // empty: every job
};
enum class MemberState : uint8_t { joining = 1, member = 2, left = 3, failed = 4, aborted = 5 };
struct MemberStatus {
  int32_t rank = -1;
  MemberState state = MemberState::member;
  std::string host;
  uint32_t pid = 0;
  std::string peer;       // where its rendezvous connection came from, "10.0.0.3:5555"
  std::string nccl_addr;  // the address it said NCCL will use
  uint64_t last_completed = 0;
  uint32_t heartbeat_age_ms = 0;     // since its last heartbeat (or its join); 0 once gone
  uint32_t heartbeat_window_ms = 0;  // the silence it may keep before it is dropped (0: unwatched)
  std::string reason;                // why it failed or aborted
};
enum class JoinState : uint8_t { joining = 1, complete = 2, failed = 3 };
struct CommStatus {
  uint32_t comm_number = 0;
  JoinState state = JoinState::joining;
  int32_t world_size = 0;
  int32_t joined = 0;
  std::string failure;                // why a failed generation failed
  std::vector<int32_t> missing;       // ranks that never joined (while joining)
  std::vector<MemberStatus> members;  // by rank
};
struct JobStatus {
  std::string id;
  uint32_t connections = 0;
  uint32_t keys = 0;
  uint64_t bytes = 0;          // of its keys and values
  uint64_t expires_in_ms = 0;  // with no connection: time left of its job TTL (0: not expiring)
  std::vector<CommStatus> comms;
};
struct StatusReport {
  std::string server;  // "cc-rendezvous 0.1.0"
  uint64_t uptime_ms = 0;
  uint32_t jobs_total = 0;       // jobs on the server (the query's one, when it named one)
  uint32_t members_omitted = 0;  // members left out to keep the report small
  uint64_t store_bytes = 0;      // of keys and values over every job
  uint64_t store_bytes_limit = 0;
  std::vector<JobStatus> jobs;  // sorted by id
};

// ---- a communicator's start: init failures and the reachability test ----
//
// After its join a member tells the server when its init fails (NCCL, CUDA,
// its device, anything), so the others stop waiting for it. Before NCCL's
// init the members test that they can open TCP connections to each other on
// the addresses NCCL will use (docs/FAILURES.md, "When a rank cannot start").

// This member's init failed after its join. The server tells every other
// member of the job (PeerEvent init_failed carrying this message) and fails
// the generation's reachability test. Answered with Ok.
struct InitFailed {
  uint32_t comm_number = 0;
  std::string reason;  // the member's own message
};

// Where this member listens for the reachability test and what it knows of
// its network. Answered with PreflightPlan once every member of the
// generation sent its own (or timeout_ms passed: then the test is skipped),
// or with Error when a member of the generation failed meanwhile.
struct PreflightReady {
  uint32_t comm_number = 0;
  bool enabled = true;       // false: CC_PREFLIGHT=0 here; the sender awaits no answer
  std::string host_key;      // NCCL's idea of the host: NCCL_HOSTID, or host name and boot id
  std::string addr;          // the address NCCL's sockets will use on this host
  uint32_t port = 0;         // the test's listening port there; 0: cannot be tested
  std::string ifname;        // the interface holding addr
  std::string user_ifname;   // NCCL_SOCKET_IFNAME when the user set it; empty when cc chose
  std::string route_ifname;  // the interface whose route reaches the rendezvous
  std::string route_addr;    // the source address of that route
  uint32_t timeout_ms = 0;   // how long to wait for the other members
};
struct ProbeTarget {
  int32_t rank = -1;
  std::string host;
  uint32_t pid = 0;
  std::string addr;
  uint32_t port = 0;
};
// probe: connect to the targets and report. passed: nothing to test (every
// rank on one host) or already decided. skipped: the test is off for this
// generation; note says why.
enum class PreflightStep : uint8_t { probe = 1, passed = 2, skipped = 3 };
inline constexpr size_t kMaxProbeTargets = 64;
struct PreflightPlan {
  PreflightStep step = PreflightStep::probe;
  std::string note;
  std::vector<ProbeTarget> targets;
};
struct ProbeResult {
  int32_t rank = -1;     // the target
  bool reached = false;  // connected and answered as that rank of this job
  int32_t error = 0;     // errno of the failed connect (0: none, or not a connect error)
  std::string words;     // what happened, as text ("connection timed out after 1200 ms")
};
// What this member's connections found. Answered with Ok when every member
// reached its targets, or with Error naming who cannot reach whom, the
// address, the error, the likely cause and the fix (the same message to every
// member), once every member reported or timeout_ms passed.
struct PreflightReport {
  uint32_t comm_number = 0;
  std::vector<ProbeResult> results;
  uint32_t timeout_ms = 0;
};

// ---- node agents ---------------------------------------------------------
//
// cc-run is its node's agent: the ranks it starts speak this protocol to it
// over a local socket, and it carries their frames to the rendezvous server
// on one connection of its own (docs/RENDEZVOUS.md, "Node agents"). On that
// connection each rank is a channel. After its own handshake the agent sends
// Relay frames, each holding entries for any number of channels, and the
// server answers with Relay frames for the same channels (request_id 0).
// open: a channel begins; data is the rank's Hello, a whole frame, which the
//   agent has answered itself (the agent's authentication covers its ranks).
// frames: data is one or more whole frames of that channel, in order.
// close: the channel ends; data is why, as text ("exited with signal 9
//   (killed)") from the agent, or the server's reason for closing it.
enum class RelayOp : uint8_t { open = 1, frames = 2, close = 3 };
struct RelayEntry {
  uint32_t channel = 0;
  RelayOp op = RelayOp::frames;
  std::vector<uint8_t> data;
};
struct Relay {
  std::vector<RelayEntry> entries;
};
// The bytes an entry adds to a Relay frame besides its data.
inline constexpr size_t kRelayEntryOverhead = 9;

using Message = std::variant<Hello, Auth, Set, Get, Add, Wait, Del, Join, Leave, Heartbeat, Abort,
                             Challenge, Ok, Error, Value, Integer, Joined, PeerEvent, HeartbeatAck,
                             HeartbeatWindow, ProgressQuery, Progress, CompareSet, CompareSetResult,
                             Recover, RecoverId, RecoverIdWanted, StatusQuery, StatusReport,
                             InitFailed, PreflightReady, PreflightReport, PreflightPlan, Relay,
                             Resume, CallsEnd, CallsWanted>;

MsgType type_of(const Message& m);
const char* type_name(MsgType t);  // "set", "join", ... or "unknown"

// ---- decoding errors ---------------------------------------------------

enum class DecodeError : uint8_t {
  none = 0,
  bad_magic,        // not a cc rendezvous frame (wrong program on the port?)
  bad_version,      // a client of another protocol version
  frame_too_large,  // length over Limits::max_frame
  truncated,        // the payload ends inside a field
  trailing_bytes,   // the payload has bytes after the last field
  unknown_type,     // a type this version does not know
  field_too_large,  // a key, value, string or list over its limit
  bad_field,        // a field with an impossible value (e.g. negative world size)
};
const char* describe(DecodeError e);

// ---- frames --------------------------------------------------------------

struct FrameHeader {
  uint32_t magic = 0;
  uint16_t version = 0;
  uint16_t type = 0;
  uint32_t request_id = 0;
  uint32_t length = 0;
};

// Parses a header from exactly kHeaderSize bytes and checks magic, version
// and length; the type is checked by decode_message.
DecodeError parse_header(std::span<const uint8_t> bytes, const Limits& limits, FrameHeader* out);

// Encodes one complete frame (header and payload).
std::vector<uint8_t> encode_frame(uint32_t request_id, const Message& m);
// Appends one complete frame to out (no reallocation when out has room).
void append_frame(std::vector<uint8_t>& out, uint32_t request_id, const Message& m);
// The same bytes as append_frame(out, request_id, Value{value}), without
// first copying the value into a Value: a Get's answer of a large value is
// copied once, from the store into the frame.
void append_value_frame(std::vector<uint8_t>& out, uint32_t request_id,
                        std::span<const uint8_t> value);

// Decodes a payload of the given type. Every limit is enforced; trailing
// bytes are an error.
DecodeError decode_message(uint16_t type, std::span<const uint8_t> payload, const Limits& limits,
                           Message* out);

// Incremental frame splitter for a byte stream: feed what arrived, then take
// frames until none is complete. After an error the stream is unusable.
class FrameReader {
 public:
  explicit FrameReader(Limits limits = {}) : limits_(limits) {}

  void feed(std::span<const uint8_t> bytes);

  struct Frame {
    uint32_t request_id = 0;
    Message message;
  };
  // Returns a frame when one is complete; std::nullopt when more bytes are
  // needed or on error (then error() != none).
  std::optional<Frame> next();
  DecodeError error() const { return error_; }
  // Bytes held that do not yet form a complete frame.
  size_t buffered() const { return buf_.size() - pos_; }
  // True while a frame has begun but is incomplete (for per-frame deadlines).
  bool mid_frame() const { return buffered() > 0; }
  const Limits& limits() const { return limits_; }

 private:
  Limits limits_;
  std::vector<uint8_t> buf_;
  size_t pos_ = 0;
  DecodeError error_ = DecodeError::none;
};

}  // namespace cc::rv
