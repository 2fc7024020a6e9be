// One store operation through the public C API, for the namespace tests.
//   netns_store_tool HOST PORT TIMEOUT_MS CMD ARGS...
//     set KEY VALUE | get KEY WAIT_MS | add KEY DELTA | wait WAIT_MS KEY... | connect
//     | hold MS (prints "connected", then keeps the connection MS ms)
// Prints the result on stdout; on failure "FAIL <code>: <cc_last_error()>" on
// stderr and exits with 1.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cc/cc.h"

namespace {
int failed(cc_result_t r) {
  std::fprintf(stderr, "FAIL %s: %s\n", cc_result_string(r), cc_last_error());
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: netns_store_tool HOST PORT TIMEOUT_MS CMD ARGS...\n");
    return 2;
  }
  cc_config_t config = CC_CONFIG_INIT;
  config.timeout_ms = std::atoi(argv[3]);
  cc_store_t store = nullptr;
  if (cc_result_t r = cc_store_connect(&store, argv[1], std::atoi(argv[2]), "netns", &config);
      r != CC_SUCCESS)
    return failed(r);
  const std::string cmd = argv[4];
  cc_result_t r = CC_SUCCESS;
  if (cmd == "connect") {
    std::printf("connected\n");
  } else if (cmd == "hold" && argc == 6) {
    std::printf("connected\n");
    std::fflush(stdout);
    size_t len = 0;
    char c = 0;
    r = cc_store_get(store, "netns-hold-never-set", &c, 1, &len, std::atoi(argv[5]));
    if (r == CC_ERR_TIMEOUT) r = CC_SUCCESS;
  } else if (cmd == "set" && argc == 7) {
    r = cc_store_set(store, argv[5], argv[6], std::strlen(argv[6]));
    if (r == CC_SUCCESS) std::printf("ok\n");
  } else if (cmd == "get" && argc == 7) {
    std::vector<char> buf(4096);
    size_t len = 0;
    r = cc_store_get(store, argv[5], buf.data(), buf.size(), &len, std::atoi(argv[6]));
    if (r == CC_SUCCESS) std::printf("%.*s\n", static_cast<int>(len), buf.data());
  } else if (cmd == "add" && argc == 7) {
    int64_t result = 0;
    r = cc_store_add(store, argv[5], std::atoll(argv[6]), &result);
    if (r == CC_SUCCESS) std::printf("%lld\n", static_cast<long long>(result));
  } else if (cmd == "wait" && argc >= 7) {
    std::vector<const char*> keys(argv + 6, argv + argc);
    r = cc_store_wait(store, keys.data(), static_cast<int>(keys.size()), std::atoi(argv[5]));
    if (r == CC_SUCCESS) std::printf("ready\n");
  } else {
    std::fprintf(stderr, "netns_store_tool: bad command '%s' or argument count\n", cmd.c_str());
    cc_store_close(store);
    return 2;
  }
  if (r != CC_SUCCESS) {
    int rc = failed(r);
    cc_store_close(store);
    return rc;
  }
  cc_store_close(store);
  return 0;
}
