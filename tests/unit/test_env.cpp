// Reading the launch environment and resolving cc_config_t, with a fake
// environment: every launcher's variables, precedence, and every malformed or
// missing case with its message.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "common/token_file.hpp"
#include "lib/launch/config.hpp"
#include "lib/launch/env.hpp"
#include "tests/unit/fake_env.hpp"

using Catch::Contains;
using cc::launch::LaunchInfo;
using cc::test::FakeEnv;

namespace {

cc::Status read(const FakeEnv& env, LaunchInfo* info) {
  return cc::launch::read_launch_info(env.getenv(), info);
}

// What `env` gives, which must be no error.
LaunchInfo read_ok(const FakeEnv& env) {
  LaunchInfo info;
  const cc::Status s = read(env, &info);
  INFO(s.message);
  REQUIRE(s.ok());
  return info;
}

// CHECKs every field of `got` against `want`.
void check_info(const LaunchInfo& got, const LaunchInfo& want) {
  CHECK(got.rank == want.rank);
  CHECK(got.world_size == want.world_size);
  CHECK(got.local_rank == want.local_rank);
  CHECK(got.master_addr == want.master_addr);
  CHECK(got.master_port == want.master_port);
  CHECK(got.rank_var == want.rank_var);
  CHECK(got.world_size_var == want.world_size_var);
  CHECK(got.local_rank_var == want.local_rank_var);
  CHECK(got.addr_var == want.addr_var);
  CHECK(got.port_var == want.port_var);
  // The address comes parsed, once, with its port where it needs one.
  CHECK(got.address.text() == want.master_addr);
  if (got.address.needs_port()) CHECK(got.address.server()->port == want.master_port);
}

// CHECKs the settings that the environment and the config both give.
void check_settings(const cc::launch::ResolvedConfig& r, int device, int timeout_ms,
                    const std::string& job_id, const std::string& token, int rendezvous,
                    int heartbeat_ms, int heartbeat_misses, int fast_allreduce) {
  CHECK(r.device == device);
  CHECK(r.timeout_ms == timeout_ms);
  CHECK(r.job_id == job_id);
  CHECK(r.token == token);
  CHECK(r.rendezvous == rendezvous);
  CHECK(r.heartbeat_ms == heartbeat_ms);
  CHECK(r.heartbeat_misses == heartbeat_misses);
  CHECK(r.fast_allreduce == fast_allreduce);
}

// CHECKs that `s` refuses an invalid argument with a message that contains `message`
// (text) or matches it (a matcher).
template <class Message>
void check_refused(const cc::Status& s, const Message& message) {
  INFO(s.message);
  CHECK(s.code == CC_ERR_INVALID_ARGUMENT);
  if constexpr (std::is_convertible_v<Message, std::string>)
    CHECK_THAT(s.message, Contains(std::string(message)));
  else
    CHECK_THAT(s.message, message);
}

// One variable set to a malformed value, and the message of its refusal.
struct Malformed {
  std::string var, value, words;
};

// For each case, `call` refuses `base` with the case's variable set as text
// that contain the case's.
template <class Call>
void check_each_refused(const FakeEnv& base, Call call, std::initializer_list<Malformed> cases) {
  for (const Malformed& c : cases) {
    FakeEnv env{base};
    env.vars[c.var] = c.value;
    INFO(c.var << "=" << c.value);
    check_refused(call(env), c.words);
  }
}

// A file in the system's temporary directory, removed at the end of the scope.
struct TempFile {
  std::filesystem::path path;
  TempFile(const std::string& content, std::filesystem::perms perms) {
    path = std::filesystem::temp_directory_path() /
           ("cc-test-token-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::ofstream(path) << content;
    std::filesystem::permissions(path, perms);
  }
  ~TempFile() { std::filesystem::remove(path); }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

}  // namespace

TEST_CASE("env: torchrun, Open MPI, PMI and Slurm variables") {
  struct Launcher {
    std::string rank_var, world_size_var, local_rank_var;
    int rank, world_size, local_rank;
    std::string master_addr;
    int master_port;
  };
  for (const Launcher& l : {
           Launcher{"RANK", "WORLD_SIZE", "LOCAL_RANK", 1, 2, 0, "10.10.10.2", 12345},
           Launcher{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", 3,
                    4, 1, "node0", 65535},
           Launcher{"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", 5, 8, 2, "node0", 65535},
           Launcher{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", 7, 16, 3, "node0", 65535},
       }) {
    INFO(l.rank_var);
    FakeEnv env{{{l.rank_var, std::to_string(l.rank)},
                 {l.world_size_var, std::to_string(l.world_size)},
                 {l.local_rank_var, std::to_string(l.local_rank)},
                 {"MASTER_ADDR", l.master_addr},
                 {"MASTER_PORT", std::to_string(l.master_port)}}};
    check_info(read_ok(env),
               {l.rank, l.world_size, l.local_rank, l.master_addr, l.master_port, l.rank_var,
                l.world_size_var, l.local_rank_var, "MASTER_ADDR", "MASTER_PORT", {}});
  }
}

TEST_CASE("env: CC_* variables win over every other, first found wins") {
  FakeEnv env{{{"CC_RANK", "0"},
               {"RANK", "1"},
               {"OMPI_COMM_WORLD_RANK", "2"},
               {"PMI_RANK", "3"},
               {"SLURM_PROCID", "4"},
               {"CC_WORLD_SIZE", "6"},
               {"WORLD_SIZE", "9"},
               {"SLURM_NTASKS", "10"},
               {"CC_LOCAL_RANK", "5"},
               {"LOCAL_RANK", "1"},
               {"CC_MASTER_ADDR", "cc-host"},
               {"MASTER_ADDR", "other-host"},
               {"CC_MASTER_PORT", "2000"},
               {"MASTER_PORT", "3000"}}};
  check_info(read_ok(env), {0, 6, 5, "cc-host", 2000, "CC_RANK", "CC_WORLD_SIZE", "CC_LOCAL_RANK",
                            "CC_MASTER_ADDR", "CC_MASTER_PORT", {}});

  // without CC_*: RANK before OMPI before PMI before Slurm
  struct Next {
    std::string removed;
    int rank;
    std::string rank_var;
  };
  for (const Next& n :
       {Next{"CC_RANK", 1, "RANK"}, Next{"RANK", 2, "OMPI_COMM_WORLD_RANK"},
        Next{"OMPI_COMM_WORLD_RANK", 3, "PMI_RANK"}, Next{"PMI_RANK", 4, "SLURM_PROCID"}}) {
    INFO("without " << n.removed);
    env.vars.erase(n.removed);
    const LaunchInfo info = read_ok(env);
    CHECK(info.rank == n.rank);
    CHECK(info.rank_var == n.rank_var);
  }
}

TEST_CASE("env: no local rank is -1, not an error") {
  FakeEnv env{{{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "5"}}};
  const LaunchInfo info = read_ok(env);
  CHECK(info.local_rank == -1);
  CHECK(info.local_rank_var.empty());
}

TEST_CASE("env: missing variables are named with what to set") {
  struct Case {
    std::map<std::string, std::string> vars;
    std::vector<std::string> words;
  };
  const Case cases[] = {
      {{},
       {"no rank in the environment: set RANK (or CC_RANK; launchers set "
        "OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID)"}},
      {{{"RANK", "0"}}, {"no world size", "WORLD_SIZE", "SLURM_NTASKS"}},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}},
       {"set MASTER_ADDR (or CC_MASTER_ADDR)"}},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}},
       {"set MASTER_PORT (or CC_MASTER_PORT)"}},
  };
  for (const Case& c : cases) {
    FakeEnv env{c.vars};
    LaunchInfo info;
    const cc::Status s = read(env, &info);
    for (const std::string& w : c.words) check_refused(s, w);
  }
}

TEST_CASE("env: malformed values name the variable") {
  const FakeEnv good{{{"RANK", "0"},
                      {"WORLD_SIZE", "2"},
                      {"LOCAL_RANK", "0"},
                      {"MASTER_ADDR", "h"},
                      {"MASTER_PORT", "29500"}}};
  const auto read_env = [](const FakeEnv& env) {
    LaunchInfo info;
    return read(env, &info);
  };
  check_each_refused(
      good, read_env,
      {
          {"RANK", "abc", "RANK='abc' is not an integer"},
          {"RANK", "1x", "RANK='1x' is not an integer"},
          {"RANK", " 1", "RANK=' 1' is not an integer"},
          {"RANK", "", "RANK='' is empty"},
          {"RANK", "-1", "RANK=-1 is out of range 0.."},
          {"RANK", "99999999999999999999", "RANK=99999999999999999999 is out of range"},
          {"RANK", "2", "rank 2 (from RANK) is not below the world size 2 (from WORLD_SIZE)"},
          {"WORLD_SIZE", "0", "WORLD_SIZE=0 is out of range 1.."},
          {"WORLD_SIZE", "two", "WORLD_SIZE='two' is not an integer"},
          {"LOCAL_RANK", "x", "LOCAL_RANK='x' is not an integer"},
          {"MASTER_PORT", "70000", "MASTER_PORT=70000 is out of range 1..65535"},
          {"MASTER_PORT", "0", "MASTER_PORT=0 is out of range 1..65535"},
          {"MASTER_PORT", "29500 ", "MASTER_PORT='29500 ' is not an integer"},
          {"MASTER_ADDR", "", "MASTER_ADDR='' is empty"},
      });
  // a malformed CC_* variable is an error even when a good RANK exists
  FakeEnv env{good};
  env.vars["CC_RANK"] = "";
  LaunchInfo info;
  check_refused(read(env, &info), "CC_RANK=''");
}

TEST_CASE("env: parse_int is strict") {
  long long v = 0;
  CHECK(cc::settings::parse_int("X", "42", 0, 100, &v).ok());
  CHECK(v == 42);
  CHECK(cc::settings::parse_int("X", "+7", 0, 100, &v).ok());
  CHECK(v == 7);
  CHECK(cc::settings::parse_int("X", "-5", -10, 100, &v).ok());
  CHECK(v == -5);
  CHECK_FALSE(cc::settings::parse_int("X", "0x10", 0, 100, &v).ok());
  CHECK_FALSE(cc::settings::parse_int("X", "1.5", 0, 100, &v).ok());
  CHECK_FALSE(cc::settings::parse_int("X", "+-1", -10, 100, &v).ok());
  CHECK_FALSE(cc::settings::parse_int("X", "+", 0, 100, &v).ok());
  CHECK_FALSE(cc::settings::parse_int("X", nullptr, 0, 100, &v).ok());
  const cc::Status s = cc::settings::parse_int("X", "101", 0, 100, &v);
  CHECK(s.code == CC_ERR_INVALID_ARGUMENT);
  CHECK(s.message == "X=101 is out of range 0..100");
  CHECK(v == -5);  // untouched on failure
}

TEST_CASE("config: NULL gives the defaults") {
  FakeEnv env;
  cc::launch::ResolvedConfig r;
  REQUIRE(cc::launch::resolve_config(nullptr, env.getenv(), &r).ok());
  CHECK(r.device == -1);
  CHECK(r.timeout_ms == 300000);
  CHECK(r.job_id == "default");
  CHECK(r.token.empty());
  CHECK(r.rendezvous == CC_RENDEZVOUS_EMBEDDED);
  CHECK(r.heartbeat_ms == 1000);
  CHECK(r.heartbeat_misses == 5);

  cc_config_t config = CC_CONFIG_INIT;
  REQUIRE(cc::launch::resolve_config(&config, env.getenv(), &r).ok());
  CHECK(r.timeout_ms == 300000);
  CHECK(r.job_id == "default");
}

TEST_CASE("config: a struct not from CC_CONFIG_INIT is refused") {
  FakeEnv env;
  cc::launch::ResolvedConfig r;
  cc_config_t config = CC_CONFIG_INIT;
  config.magic = 12345;
  check_refused(cc::launch::resolve_config(&config, env.getenv(), &r),
                "config was not initialised with CC_CONFIG_INIT");

  config = CC_CONFIG_INIT;
  config.size = 3;
  check_refused(cc::launch::resolve_config(&config, env.getenv(), &r), "impossible size 3");
}

TEST_CASE("config: the environment fills undefined fields; set fields win") {
  FakeEnv env{{{"CC_DEVICE", "3"},
               {"CC_TIMEOUT_MS", "1500"},
               {"CC_JOB_ID", "job-env"},
               {"CC_RENDEZVOUS_TOKEN", "secret"},
               {"CC_RENDEZVOUS", "external"},
               {"CC_HEARTBEAT_MS", "250"},
               {"CC_HEARTBEAT_MISSES", "8"},
               {"CC_FAST_ALLREDUCE", "require"}}};
  cc::launch::ResolvedConfig r;
  CHECK(r.fast_allreduce == CC_FAST_ALLREDUCE_AUTO);  // the default
  REQUIRE(cc::launch::resolve_config(nullptr, env.getenv(), &r).ok());
  CHECK(r.fast_allreduce == CC_FAST_ALLREDUCE_REQUIRE);
  env.vars["CC_FAST_ALLREDUCE"] = "0";
  REQUIRE(cc::launch::resolve_config(nullptr, env.getenv(), &r).ok());
  check_settings(r, 3, 1500, "job-env", "secret", CC_RENDEZVOUS_EXTERNAL, 250, 8,
                 CC_FAST_ALLREDUCE_OFF);

  cc_config_t config = CC_CONFIG_INIT;
  config.device = 1;
  config.timeout_ms = 700;
  config.job_id = "job-config";
  config.token = "from-config";
  config.rendezvous = CC_RENDEZVOUS_EMBEDDED;
  config.heartbeat_ms = 100;
  config.heartbeat_misses = 2;
  config.fast_allreduce = CC_FAST_ALLREDUCE_AUTO;
  REQUIRE(cc::launch::resolve_config(&config, env.getenv(), &r).ok());
  check_settings(r, 1, 700, "job-config", "from-config", CC_RENDEZVOUS_EMBEDDED, 100, 2,
                 CC_FAST_ALLREDUCE_AUTO);

  // timeout 0 means the default, from the config or the environment
  config.timeout_ms = 0;
  REQUIRE(cc::launch::resolve_config(&config, env.getenv(), &r).ok());
  CHECK(r.timeout_ms == 300000);
  env.vars["CC_TIMEOUT_MS"] = "0";
  REQUIRE(cc::launch::resolve_config(nullptr, env.getenv(), &r).ok());
  CHECK(r.timeout_ms == 300000);
}

TEST_CASE("config: an older, smaller struct reads only the fields it has") {
  FakeEnv env{{{"CC_RENDEZVOUS", "external"}, {"CC_HEARTBEAT_MS", "321"}}};
  cc_config_t config = CC_CONFIG_INIT;
  config.timeout_ms = 900;
  config.rendezvous = 77;    // beyond the old size: must not be read
  config.heartbeat_ms = -5;  // likewise
  config.size = offsetof(cc_config_t, rendezvous);
  cc::launch::ResolvedConfig r;
  const cc::Status s = cc::launch::resolve_config(&config, env.getenv(), &r);
  INFO(s.message);
  REQUIRE(s.ok());
  CHECK(r.timeout_ms == 900);
  CHECK(r.rendezvous == CC_RENDEZVOUS_EXTERNAL);
  CHECK(r.heartbeat_ms == 321);
}

TEST_CASE("config: the job TTL is unset unless the config or CC_JOB_TTL_MS sets it") {
  FakeEnv env;
  cc::launch::ResolvedConfig r;
  REQUIRE(cc::launch::resolve_config(nullptr, env.getenv(), &r).ok());
  CHECK(r.job_ttl_ms == -1);
  CHECK(r.job_ttl_or(0) == 0);  // each server's own default
  CHECK(r.job_ttl_or(3600000) == 3600000);
  env.vars["CC_JOB_TTL_MS"] = "5000";
  REQUIRE(cc::launch::resolve_config(nullptr, env.getenv(), &r).ok());
  CHECK(r.job_ttl_or(0) == 5000);
  cc_config_t config = CC_CONFIG_INIT;
  config.job_ttl_ms = 0;  // set: 0 = for the server's lifetime, over the environment
  REQUIRE(cc::launch::resolve_config(&config, env.getenv(), &r).ok());
  CHECK(r.job_ttl_or(3600000) == 0);
  config.job_ttl_ms = -1;
  check_refused(cc::launch::resolve_config(&config, env.getenv(), &r), "config.job_ttl_ms=-1");
  env.vars["CC_JOB_TTL_MS"] = "an hour";
  CHECK_THAT(cc::launch::resolve_config(nullptr, env.getenv(), &r).message,
             Contains("CC_JOB_TTL_MS='an hour' is not an integer"));
}

TEST_CASE("config: malformed values name the variable or field") {
  const auto resolve_env = [](const FakeEnv& env) {
    cc::launch::ResolvedConfig r;
    return cc::launch::resolve_config(nullptr, env.getenv(), &r);
  };
  check_each_refused(
      FakeEnv{}, resolve_env,
      {
          {"CC_TIMEOUT_MS", "-1", "CC_TIMEOUT_MS=-1 is out of range 0.."},
          {"CC_TIMEOUT_MS", "soon", "CC_TIMEOUT_MS='soon' is not an integer"},
          {"CC_DEVICE", "gpu0", "CC_DEVICE='gpu0' is not an integer"},
          {"CC_DEVICE", "-2", "CC_DEVICE=-2 is out of range"},
          {"CC_JOB_ID", "", "CC_JOB_ID='' is empty"},
          {"CC_RENDEZVOUS", "inside", "CC_RENDEZVOUS='inside' is none of embedded, external"},
          {"CC_HEARTBEAT_MS", "0", "CC_HEARTBEAT_MS=0 is out of range 1.."},
          {"CC_HEARTBEAT_MISSES", "x", "CC_HEARTBEAT_MISSES='x' is not an integer"},
          {"CC_RENDEZVOUS_TOKEN", "", "CC_RENDEZVOUS_TOKEN='' is empty"},
          {"CC_FAST_ALLREDUCE", "yes", "CC_FAST_ALLREDUCE='yes' is none of 0"},
      });

  struct FieldCase {
    void (*set)(cc_config_t*);
    std::string words;
  };
  const FieldCase fields[] = {
      {[](cc_config_t* c) { c->timeout_ms = -10; }, "config.timeout_ms=-10"},
      {[](cc_config_t* c) { c->rendezvous = 9; }, "config.rendezvous=9"},
      {[](cc_config_t* c) { c->fast_allreduce = 5; }, "config.fast_allreduce=5"},
      {[](cc_config_t* c) { c->job_id = ""; }, "config.job_id is empty"},
  };
  FakeEnv env;
  for (const FieldCase& f : fields) {
    cc_config_t config = CC_CONFIG_INIT;
    f.set(&config);
    cc::launch::ResolvedConfig r;
    check_refused(cc::launch::resolve_config(&config, env.getenv(), &r), f.words);
  }
}

TEST_CASE("config: the token from a file, trailing whitespace stripped") {
  namespace fs = std::filesystem;
  TempFile file("s3cret \n\n", fs::perms::owner_read | fs::perms::owner_write);
  FakeEnv env{{{"CC_RENDEZVOUS_TOKEN_FILE", file.path.string()}}};
  cc::launch::ResolvedConfig r;
  REQUIRE(cc::launch::resolve_config(nullptr, env.getenv(), &r).ok());
  CHECK(r.token == "s3cret");

  // CC_RENDEZVOUS_TOKEN wins over the file
  env.vars["CC_RENDEZVOUS_TOKEN"] = "direct";
  REQUIRE(cc::launch::resolve_config(nullptr, env.getenv(), &r).ok());
  CHECK(r.token == "direct");

  // a file others can read still works (with a logged warning)
  TempFile open_file("tok\n",
                     fs::perms::owner_read | fs::perms::owner_write | fs::perms::others_read);
  FakeEnv env2{{{"CC_RENDEZVOUS_TOKEN_FILE", open_file.path.string()}}};
  REQUIRE(cc::launch::resolve_config(nullptr, env2.getenv(), &r).ok());
  CHECK(r.token == "tok");

  TempFile empty(" \n", fs::perms::owner_read | fs::perms::owner_write);
  FakeEnv env3{{{"CC_RENDEZVOUS_TOKEN_FILE", empty.path.string()}}};
  check_refused(cc::launch::resolve_config(nullptr, env3.getenv(), &r), "is empty");

  const std::string missing = (fs::temp_directory_path() / "cc-test-no-such-token-file").string();
  FakeEnv env4{{{"CC_RENDEZVOUS_TOKEN_FILE", missing}}};
  check_refused(cc::launch::resolve_config(nullptr, env4.getenv(), &r),
                Contains("cannot read the token file '" + missing + "'") &&
                    Contains("CC_RENDEZVOUS_TOKEN_FILE") && Contains("No such file"));
}

TEST_CASE("token file: one reader, one token for the daemon, the tools and every rank") {
  namespace fs = std::filesystem;
  const auto rw = fs::perms::owner_read | fs::perms::owner_write;
  for (const char* content :
       {"third-token \n", "third-token", "third-token\r\n", "third-token\t \n\n"}) {
    TempFile file(content, rw);
    std::string token;
    const cc::Status read = cc::read_token_file(file.path.string(), "--token-file", &token);
    INFO(read.message);
    REQUIRE(read.ok());
    CHECK(token == "third-token");
    FakeEnv env{{{"CC_RENDEZVOUS_TOKEN_FILE", file.path.string()}}};
    cc::launch::ResolvedConfig r;
    REQUIRE(cc::launch::resolve_config(nullptr, env.getenv(), &r).ok());
    CHECK(r.token == token);
  }
  CHECK(cc::token_of(" lead stays\n") == " lead stays");
  const std::string missing = (fs::temp_directory_path() / "cc-test-no-such-token-file").string();
  std::string token = "kept";
  const cc::Status refused = cc::read_token_file(missing, "--token-file", &token);
  CHECK(refused.code == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(refused.message, Contains("cannot read the token file '" + missing +
                                       "' (from --token-file)") &&
                                  Contains("No such file"));
  CHECK(token == "kept");
}

TEST_CASE("token file: a table gives jobs tokens of their own; anything else is one token") {
  namespace fs = std::filesystem;
  const auto rw = fs::perms::owner_read | fs::perms::owner_write;
  TempFile table(
      "# the daemon's tokens\n"
      "job train- t1\n"
      "\n"
      "job train-big- t2\n"
      "admin a0\n",
      rw);
  cc::Tokens tokens;
  const cc::Status read = cc::read_tokens(table.path.string(), "--token-file", &tokens);
  INFO(read.message);
  REQUIRE(read.ok());
  CHECK(tokens.admin == "a0");
  REQUIRE(tokens.jobs.size() == 2);
  REQUIRE(tokens.for_job("train-big-7") != nullptr);
  CHECK(tokens.for_job("train-big-7")->token == "t2");  // the longest prefix
  CHECK(tokens.for_job("train-3")->token == "t1");
  CHECK(tokens.for_job("eval-1") == nullptr);

  // A file of one token stays one token, whatever it holds.
  REQUIRE(cc::tokens_of("just one token\n", "f", &tokens).ok());
  CHECK(tokens.admin == "just one token");
  CHECK(tokens.jobs.empty());

  // A table with a line it cannot read names the line and keeps nothing.
  tokens = {"kept", {}};
  const cc::Status bad = cc::tokens_of("job a- x\njob b- y z\n", "the token file 'f'", &tokens);
  CHECK(bad.code == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(bad.message, Contains("the token file 'f', line 2") && Contains("job PREFIX TOKEN"));
  CHECK(tokens.admin == "kept");
  CHECK_THAT(cc::tokens_of("job a- x\njob a- y\n", "f", &tokens).message,
             Contains("line 2: the prefix 'a-' has a token already"));
  CHECK_THAT(cc::tokens_of("admin x\nadmin y\n", "f", &tokens).message,
             Contains("line 2: a second admin line"));
}

TEST_CASE("config: a job id over 1024 bytes is refused naming its start and the limit") {
  const std::string job = "job-" + std::string(1996, 'x');
  FakeEnv env{{{"CC_JOB_ID", job}}};
  cc::launch::ResolvedConfig r;
  check_refused(cc::launch::resolve_config(nullptr, env.getenv(), &r),
                Contains("CC_JOB_ID 'job-xxxx") && Contains("(2000 bytes)") &&
                    Contains("over the limit of 1024 bytes"));
  cc_config_t config = CC_CONFIG_INIT;
  config.job_id = job.c_str();
  const FakeEnv none;
  check_refused(cc::launch::resolve_config(&config, none.getenv(), &r),
                Contains("config.job_id 'job-xxxx") && Contains("over the limit of 1024 bytes"));
  const std::string longest(1024, 'y');
  FakeEnv fits{{{"CC_JOB_ID", longest}}};
  REQUIRE(cc::launch::resolve_config(nullptr, fits.getenv(), &r).ok());
  CHECK(r.job_id == longest);
}

TEST_CASE("config: the all-reduce plan and the cache folder") {
  FakeEnv env{{{"HOME", "/home/u"}}};
  cc::launch::ResolvedConfig r;
  REQUIRE(cc::launch::resolve_config(nullptr, env.getenv(), &r).ok());
  CHECK(r.fast_allreduce_plan == "auto");
  CHECK(r.cache_dir == "/home/u/.cache/cc");
  env.vars["XDG_CACHE_HOME"] = "/xdg";
  env.vars["CC_FAST_ALLREDUCE_PLAN"] = "ll:64K,oneshot:8M";
  REQUIRE(cc::launch::resolve_config(nullptr, env.getenv(), &r).ok());
  CHECK(r.fast_allreduce_plan == "ll:64K,oneshot:8M");
  CHECK(r.fast_allreduce_plan_source == "CC_FAST_ALLREDUCE_PLAN");
  CHECK(r.cache_dir == "/xdg/cc");
  env.vars["CC_CACHE_DIR"] = "";  // keep nothing
  env.vars["CC_FAST_ALLREDUCE_PLAN"] = "measure";
  REQUIRE(cc::launch::resolve_config(nullptr, env.getenv(), &r).ok());
  CHECK(r.fast_allreduce_plan == "measure");
  CHECK(r.cache_dir.empty());
  // The config's field wins; the text is checked where the kernels are set up.
  cc_config_t config = CC_CONFIG_INIT;
  config.fast_allreduce_plan = "nccl";
  REQUIRE(cc::launch::resolve_config(&config, env.getenv(), &r).ok());
  CHECK(r.fast_allreduce_plan == "nccl");
  CHECK(r.fast_allreduce_plan_source == "config.fast_allreduce_plan");
}

TEST_CASE("env: an etcd address needs no MASTER_PORT; a malformed one names its variable") {
  FakeEnv env{
      {{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "etcd://10.0.0.1:2379,10.0.0.2:2379"}}};
  LaunchInfo info;
  cc::Status s = read(env, &info);
  INFO(s.message);
  REQUIRE(s.ok());
  CHECK(info.master_addr == "etcd://10.0.0.1:2379,10.0.0.2:2379");
  CHECK(info.addr_var == "MASTER_ADDR");
  CHECK(info.master_port == 0);

  env.vars["CC_MASTER_ADDR"] = "etcds://[::1]:2379";
  REQUIRE(read(env, &info).ok());
  CHECK(info.master_addr == "etcds://[::1]:2379");

  env.vars["CC_MASTER_ADDR"] = "etcd://10.0.0.1";
  check_refused(read(env, &info), Contains("CC_MASTER_ADDR=etcd://10.0.0.1: ") && Contains("port"));
}

TEST_CASE("env: tcp://host:port needs no MASTER_PORT; a host with a port in it is named") {
  FakeEnv env{{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "tcp://10.0.0.1:29511"}}};
  LaunchInfo info = read_ok(env);
  CHECK(info.master_addr == "tcp://10.0.0.1:29511");
  CHECK(info.master_port == 0);
  CHECK(info.port_var.empty());

  env.vars["MASTER_ADDR"] = "10.0.0.1:29511";
  check_refused(read(env, &info),
                "MASTER_ADDR=10.0.0.1:29511: the rendezvous address '10.0.0.1:29511' has a port "
                "in it: write tcp://10.0.0.1:29511, or the host alone with its port apart "
                "(MASTER_PORT)");
}

TEST_CASE("config: CC_SHARE_GPU puts every rank on one device with cc's kernels off") {
  FakeEnv env{{{"CC_SHARE_GPU", "1"}}};
  cc::launch::ResolvedConfig r;
  REQUIRE(cc::launch::resolve_config(nullptr, env.getenv(), &r).ok());
  CHECK(r.share_gpu);
  CHECK(r.device == 0);
  CHECK(r.fast_allreduce == CC_FAST_ALLREDUCE_OFF);

  env.vars["CC_DEVICE"] = "2";  // the device stays the user's choice
  REQUIRE(cc::launch::resolve_config(nullptr, env.getenv(), &r).ok());
  CHECK(r.device == 2);

  env.vars["CC_SHARE_GPU"] = "0";
  env.vars.erase("CC_DEVICE");
  REQUIRE(cc::launch::resolve_config(nullptr, env.getenv(), &r).ok());
  CHECK_FALSE(r.share_gpu);
  CHECK(r.device == -1);
  CHECK(r.fast_allreduce == CC_FAST_ALLREDUCE_AUTO);

  env.vars["CC_SHARE_GPU"] = "1";
  env.vars["CC_FAST_ALLREDUCE"] = "require";
  check_refused(cc::launch::resolve_config(nullptr, env.getenv(), &r),
                "CC_SHARE_GPU puts ranks on one GPU as separate hosts");

  env.vars["CC_SHARE_GPU"] = "yes";
  env.vars.erase("CC_FAST_ALLREDUCE");
  check_refused(cc::launch::resolve_config(nullptr, env.getenv(), &r), "CC_SHARE_GPU");
}

TEST_CASE("config: cc-run's node agent carries cc-run's job alone") {
  FakeEnv env{{{"CC_AGENT_SOCKET", "/run/agent.sock"}, {"CC_JOB_ID", "cc-run-job"}}};
  cc::launch::ResolvedConfig r;
  REQUIRE(cc::launch::resolve_config(nullptr, env.getenv(), &r).ok());
  CHECK(r.agent_socket == "/run/agent.sock");
  // A communicator of another job (its own rendezvous) goes there directly.
  cc_config_t config = CC_CONFIG_INIT;
  config.job_id = "second";
  REQUIRE(cc::launch::resolve_config(&config, env.getenv(), &r).ok());
  CHECK(r.agent_socket.empty());
  config.job_id = "cc-run-job";
  REQUIRE(cc::launch::resolve_config(&config, env.getenv(), &r).ok());
  CHECK(r.agent_socket == "/run/agent.sock");
  // No job named by cc-run: no agent to trust with it.
  env.vars.erase("CC_JOB_ID");
  REQUIRE(cc::launch::resolve_config(nullptr, env.getenv(), &r).ok());
  CHECK(r.agent_socket.empty());
}

TEST_CASE("config: the TLS files, the config's over CC_TLS_*") {
  FakeEnv env{{{"CC_TLS_CA", "env-ca.pem"},
               {"CC_TLS_SERVER_NAME", "env.example"},
               {"CC_TLS_CERT", "env-cert.pem"},
               {"CC_TLS_KEY", "env-key.pem"},
               {"CC_TLS_CLIENT_CA", "env-client-ca.pem"}}};
  cc::launch::ResolvedConfig r;

  // unset fields keep the environment's
  cc_config_t config = CC_CONFIG_INIT;
  REQUIRE(cc::launch::resolve_config(&config, env.getenv(), &r).ok());
  CHECK(r.tls.on());
  CHECK(r.tls.ca == "env-ca.pem");
  CHECK(r.tls.server_name == "env.example");
  CHECK(r.tls.cert == "env-cert.pem");
  CHECK(r.tls.key == "env-key.pem");
  CHECK(r.tls_server.on());
  CHECK(r.tls_server.cert == "env-cert.pem");
  CHECK(r.tls_server.key == "env-key.pem");
  CHECK(r.tls_server.client_ca == "env-client-ca.pem");

  // set fields win, each on its own
  config.tls_ca = "ca.pem";
  config.tls_cert = "cert.pem";
  config.tls_client_ca = "client-ca.pem";
  REQUIRE(cc::launch::resolve_config(&config, env.getenv(), &r).ok());
  CHECK(r.tls.ca == "ca.pem");
  CHECK(r.tls.server_name == "env.example");
  CHECK(r.tls.cert == "cert.pem");
  CHECK(r.tls.key == "env-key.pem");
  CHECK(r.tls_server.cert == "cert.pem");
  CHECK(r.tls_server.client_ca == "client-ca.pem");
  config.tls_server_name = "config.example";
  config.tls_key = "key.pem";
  REQUIRE(cc::launch::resolve_config(&config, env.getenv(), &r).ok());
  CHECK(r.tls.server_name == "config.example");
  CHECK(r.tls.key == "key.pem");
  CHECK(r.tls_server.key == "key.pem");

  // "" turns TLS off whatever the environment says
  config.tls_ca = "";
  config.tls_cert = "";
  REQUIRE(cc::launch::resolve_config(&config, env.getenv(), &r).ok());
  CHECK_FALSE(r.tls.on());
  CHECK_FALSE(r.tls_server.on());

  // no config and no environment: TLS off
  FakeEnv clear;
  REQUIRE(cc::launch::resolve_config(nullptr, clear.getenv(), &r).ok());
  CHECK_FALSE(r.tls.on());
  CHECK_FALSE(r.tls_server.on());
  CHECK(r.tls_server.client_ca.empty());
}

TEST_CASE("config: a struct from before the TLS fields reads TLS from the environment") {
  FakeEnv env{{{"CC_TLS_CA", "env-ca.pem"}, {"CC_TLS_CERT", "env-cert.pem"}}};
  cc_config_t config = CC_CONFIG_INIT;
  config.job_ttl_ms = 5000;
  config.tls_ca = "beyond.pem";  // beyond the old size: must not be read
  config.tls_cert = "beyond-cert.pem";
  config.size = offsetof(cc_config_t, tls_ca);
  cc::launch::ResolvedConfig r;
  const cc::Status s = cc::launch::resolve_config(&config, env.getenv(), &r);
  INFO(s.message);
  REQUIRE(s.ok());
  CHECK(r.job_ttl_ms == 5000);
  CHECK(r.tls.ca == "env-ca.pem");
  CHECK(r.tls_server.cert == "env-cert.pem");

  // a struct that ends inside the TLS fields reads those it has
  config.size = offsetof(cc_config_t, tls_cert);
  REQUIRE(cc::launch::resolve_config(&config, env.getenv(), &r).ok());
  CHECK(r.tls.ca == "beyond.pem");
  CHECK(r.tls.cert == "env-cert.pem");
}
