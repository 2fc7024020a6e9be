#include "common/settings.hpp"

#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <system_error>

namespace cc::settings {
namespace {

constexpr long long kIntMax = INT_MAX;

// In the order of Id; a unit test checks the order and the README. Each entry:
// id, variables (in order of precedence), kind, default, min, max, choices, meaning.
// clang-format off
constexpr Setting kTable[] = {
    {Id::rank, {"CC_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}, Kind::integer, "", 0, kIntMax, {}, "this process's rank in the job"},
    {Id::world_size, {"CC_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}, Kind::integer, "", 1, kIntMax, {}, "the number of ranks in the job"},
    {Id::local_rank, {"CC_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}, Kind::integer, "", 0, kIntMax, {}, "this process's rank on its host; picks the GPU"},
    {Id::master_addr, {"CC_MASTER_ADDR", "MASTER_ADDR"}, Kind::text, "", 0, 0, {}, "the rendezvous host: rank 0's, cc-run's or cc-rendezvous's"},
    {Id::master_port, {"CC_MASTER_PORT", "MASTER_PORT"}, Kind::integer, "", 1, 65535, {}, "the rendezvous port"},
    {Id::job_id, {"CC_JOB_ID"}, Kind::text, "default", 0, 0, {}, "the job's name on the rendezvous"},
    {Id::token, {"CC_RENDEZVOUS_TOKEN"}, Kind::text, "", 0, 0, {}, "the rendezvous token (never sent: challenge and response)"},
    {Id::token_file, {"CC_RENDEZVOUS_TOKEN_FILE"}, Kind::path, "", 0, 0, {}, "a file holding the rendezvous token (mode 600)"},
    {Id::rendezvous, {"CC_RENDEZVOUS"}, Kind::choice, "embedded", 0, 0, {"embedded", "external"}, "embedded: rank 0 hosts the server; external: cc-run or cc-rendezvous does"},
    {Id::timeout_ms, {"CC_TIMEOUT_MS"}, Kind::integer, "300000", 0, kIntMax, {}, "init, store and collective deadline in ms (0: the default)"},
    {Id::log_level, {"CC_LOG_LEVEL"}, Kind::choice, "warn", 0, 0, {"trace", "debug", "info", "warn", "error", "off"}, "how much the library logs to stderr"},
    {Id::device, {"CC_DEVICE"}, Kind::integer, "", 0, kIntMax, {}, "the CUDA device; default LOCAL_RANK % device count"},
    {Id::heartbeat_ms, {"CC_HEARTBEAT_MS"}, Kind::integer, "1000", 1, kIntMax, {}, "how often each rank tells the rendezvous it lives"},
    {Id::heartbeat_misses, {"CC_HEARTBEAT_MISSES"}, Kind::integer, "5", 1, kIntMax, {}, "heartbeats missed before a rank counts as lost"},
    {Id::fast_allreduce, {"CC_FAST_ALLREDUCE"}, Kind::choice, "1", 0, 0, {"0", "1", "require"}, "cc's own all-reduce kernels: 0 off, 1 where they can run, require or fail"},
    {Id::watchdog, {"CC_WATCHDOG"}, Kind::choice, "1", 0, 0, {"0", "1", "off", "on", "false", "true"}, "the watchdog thread that turns failures into errors (0 turns it off)"},
    {Id::fast_allreduce_plan, {"CC_FAST_ALLREDUCE_PLAN"}, Kind::text, "auto", 0, 0, {}, "which sizes cc's all-reduce kernels take: auto (measured once per machine), measure, or a plan such as ll:1M,oneshot:8M"},
    {Id::cache_dir, {"CC_CACHE_DIR"}, Kind::path, "", 0, 0, {}, "where measured all-reduce plans are kept; default $XDG_CACHE_HOME/cc or ~/.cache/cc, empty for nowhere"},
    {Id::job_ttl_ms, {"CC_JOB_TTL_MS"}, Kind::integer, "3600000", 0, kIntMax, {}, "how long a server this process starts keeps a job's keys after its last connection (0: for the server's lifetime)"},
    {Id::nccl_shrink, {"CC_NCCL_SHRINK"}, Kind::choice, "1", 0, 0, {"0", "1"}, "cc_comm_shrink through ncclCommShrink where NCCL has it (1), or always through a new NCCL communicator (0)"},
    {Id::preflight, {"CC_PREFLIGHT"}, Kind::choice, "1", 0, 0, {"0", "1", "off", "on", "false", "true"}, "test before NCCL's init that the ranks' hosts reach each other (0 turns it off)"},
    {Id::etcd_auth_file, {"CC_ETCD_AUTH_FILE"}, Kind::path, "", 0, 0, {}, "etcd rendezvous: a file holding user:password for etcd's auth (mode 600)"},
    {Id::etcd_ca_file, {"CC_ETCD_CA_FILE"}, Kind::path, "", 0, 0, {}, "etcds:// rendezvous: the CA that etcd's certificates are checked against (default: the system's)"},
    {Id::etcd_cert_file, {"CC_ETCD_CERT_FILE"}, Kind::path, "", 0, 0, {}, "etcds:// rendezvous: a client certificate, for etcd with --client-cert-auth"},
    {Id::etcd_key_file, {"CC_ETCD_KEY_FILE"}, Kind::path, "", 0, 0, {}, "etcds:// rendezvous: the client certificate's key"},
    {Id::etcd_prefix, {"CC_ETCD_PREFIX"}, Kind::text, "cc", 0, 0, {}, "etcd rendezvous: the key prefix under which cc keeps its jobs"},
    {Id::share_gpu, {"CC_SHARE_GPU"}, Kind::choice, "0", 0, 0, {"0", "1", "off", "on", "false", "true"}, "every rank on one GPU, each as its own host to NCCL (over sockets; cc's kernels off): for testing with fewer GPUs than ranks"},
    {Id::check_calls, {"CC_CHECK_CALLS"}, Kind::choice, "1", 0, 0, {"0", "1", "off", "on", "false", "true"}, "compare every rank's calls through the rendezvous and fail them all at the first difference (0 turns it off)"},
    {Id::trace_buffer, {"CC_TRACE_BUFFER"}, Kind::integer, "2000", 0, 1000000, {}, "calls each communicator's flight recorder keeps"},
    {Id::trace_dir, {"CC_TRACE_DIR"}, Kind::path, "", 0, 0, {}, "where every rank writes its flight recorder on a failure, a timeout, a mismatch or SIGUSR1; unset: nowhere"},
    {Id::agent_socket, {"CC_AGENT_SOCKET"}, Kind::path, "", 0, 0, {}, "the Unix socket of cc-run's node agent, which carries a communicator's rendezvous traffic (cc-run sets it); unset: each communicator reaches the rendezvous directly"},
    {Id::nccl_ranks_per_id, {"CC_NCCL_RANKS_PER_ID"}, Kind::integer, "128", 1, kIntMax, {}, "a communicator of more ranks than this is made by ncclCommInitRankScalable from ceil(ranks / this) NCCL ids (at most 64), so NCCL's bootstrap has that many roots"},
    {Id::tls_ca, {"CC_TLS_CA"}, Kind::path, "", 0, 0, {}, "a client's TLS to cc's rendezvous: the CA the server's certificate is checked against; set: TLS on"},
    {Id::tls_server_name, {"CC_TLS_SERVER_NAME"}, Kind::text, "", 0, 0, {}, "the name the rendezvous server's certificate must carry; unset: the host dialled"},
    {Id::tls_cert, {"CC_TLS_CERT"}, Kind::path, "", 0, 0, {}, "a TLS certificate (PEM): an embedded or cc-run server's (TLS on), and a client's for mTLS"},
    {Id::tls_key, {"CC_TLS_KEY"}, Kind::path, "", 0, 0, {}, "the key of CC_TLS_CERT (PEM, not readable by others)"},
    {Id::tls_client_ca, {"CC_TLS_CLIENT_CA"}, Kind::path, "", 0, 0, {}, "an embedded or cc-run server: clients must show a certificate from this CA (mTLS)"},
};
// clang-format on

static_assert(std::size(kTable) == static_cast<size_t>(Id::count), "one row per setting");

constexpr bool in_order() {
  for (size_t i = 0; i < std::size(kTable); ++i)
    if (static_cast<size_t>(kTable[i].id) != i) return false;
  return true;
}
static_assert(in_order(), "the rows follow the order of Id");

Status invalid(std::string message) {
  return make_status(CC_ERR_INVALID_ARGUMENT, std::move(message));
}

}  // namespace

Getenv process_env() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

const Setting& get(Id id) { return kTable[static_cast<size_t>(id)]; }

std::span<const Setting> all() { return kTable; }

Found find(Id id, const Getenv& getenv) {
  for (const char* var : get(id).vars) {
    if (var == nullptr) break;
    if (const char* value = getenv(var)) return {var, value};
  }
  return {};
}

long long default_int(Id id) {
  const char* text = get(id).default_text;
  return *text == '\0' ? 0 : std::atoll(text);
}

Status read_int(Id id, const Getenv& getenv, long long* out, Found* found) {
  const Found f = find(id, getenv);
  if (found != nullptr) *found = f;
  if (f.var == nullptr) return Status::success();
  const Setting& s = get(id);
  return parse_int(f.var, f.value, s.min, s.max, out);
}

Status read_choice(Id id, const Getenv& getenv, int* index, Found* found) {
  const Found f = find(id, getenv);
  if (found != nullptr) *found = f;
  if (f.var == nullptr) return Status::success();
  const Setting& s = get(id);
  std::string listed;
  for (int i = 0; i < static_cast<int>(s.choices.size()) && s.choices[i] != nullptr; ++i) {
    if (std::strcmp(f.value, s.choices[i]) == 0) {
      *index = i;
      return Status::success();
    }
    listed += (i == 0 ? "" : ", ") + std::string(s.choices[i]);
  }
  return invalid(std::string(f.var) + "='" + f.value + "' is none of " + listed + ": " + s.meaning);
}

Status parse_int(const char* name, const char* text, long long min, long long max, long long* out) {
  const std::string shown = text == nullptr ? std::string() : std::string(text);
  const std::string range = std::to_string(min) + ".." + std::to_string(max);
  if (text == nullptr || *text == '\0') {
    return invalid(std::string(name) + "='' is empty: set it to a whole number in " + range);
  }
  const char* begin = text;
  const char* end = text + std::strlen(text);
  if (*begin == '+') ++begin;  // from_chars takes '-' but not '+'
  long long value = 0;
  auto [ptr, ec] = std::from_chars(begin, end, value, 10);
  if (ec == std::errc::result_out_of_range) {
    return invalid(std::string(name) + "=" + shown + " is out of range " + range);
  }
  if (ec != std::errc() || ptr != end || begin == end || (begin != text && *begin == '-')) {
    return invalid(std::string(name) + "='" + shown +
                   "' is not an integer: set it to a whole number in " + range);
  }
  if (value < min || value > max) {
    return invalid(std::string(name) + "=" + shown + " is out of range " + range);
  }
  *out = value;
  return Status::success();
}

}  // namespace cc::settings
