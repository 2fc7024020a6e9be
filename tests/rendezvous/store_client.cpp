// One short-lived store user, for tests that need many processes: connects
// to a rendezvous server on 127.0.0.1 (or STORE_ADDR) through the C API, does one thing,
// prints its answer on stdout and exits (closing its connection).
//
//   store_client PORT JOB set KEY VALUE
//   store_client PORT JOB get KEY          value, or exit 3 when the key is not set
//   store_client PORT JOB add KEY DELTA    the new value
//   store_client PORT JOB race ROUND KEY EXPECTED|- DESIRED
//        adds 1 to ready/ROUND, waits for go/ROUND, then compare-sets KEY
//        (- : only if absent); prints 1 when it swapped, 0 when not
//
// STORE_TLS_CA, STORE_TLS_SERVER_NAME, STORE_TLS_CERT and STORE_TLS_KEY set
// the config's tls_* fields (over CC_TLS_*).
//
// Any failure: exit 1 with cc_last_error() on stderr.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cc/cc.h"

namespace {

int fail(const char* what) {
  std::fprintf(stderr, "store_client: %s failed: %s\n", what, cc_last_error());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: store_client PORT JOB set|get|add|race ...\n");
    return 2;
  }
  const int port = std::atoi(argv[1]);
  const char* job = argv[2];
  const std::string op = argv[3];
  cc_config_t config = CC_CONFIG_INIT;
  config.timeout_ms = 60000;
  config.tls_ca = std::getenv("STORE_TLS_CA");
  config.tls_server_name = std::getenv("STORE_TLS_SERVER_NAME");
  config.tls_cert = std::getenv("STORE_TLS_CERT");
  config.tls_key = std::getenv("STORE_TLS_KEY");
  cc_store_t store = nullptr;
  // STORE_ADDR: another address than 127.0.0.1 (an etcd:// one).
  const char* addr = std::getenv("STORE_ADDR") != nullptr ? std::getenv("STORE_ADDR") : "127.0.0.1";
  if (cc_store_connect(&store, addr, port, job, &config) != CC_SUCCESS)
    return fail("cc_store_connect");

  int rc = 0;
  if (op == "set" && argc == 6) {
    if (cc_store_set(store, argv[4], argv[5], std::strlen(argv[5])) != CC_SUCCESS)
      rc = fail("cc_store_set");
  } else if (op == "get" && argc == 5) {
    char buf[4096];
    size_t len = 0;
    const cc_result_t r = cc_store_get(store, argv[4], buf, sizeof(buf), &len, 0);
    if (r == CC_SUCCESS)
      std::printf("%.*s\n", static_cast<int>(len), buf);
    else
      rc = r == CC_ERR_TIMEOUT ? 3 : fail("cc_store_get");
  } else if (op == "add" && argc == 6) {
    int64_t result = 0;
    if (cc_store_add(store, argv[4], std::atoll(argv[5]), &result) != CC_SUCCESS)
      rc = fail("cc_store_add");
    else
      std::printf("%lld\n", static_cast<long long>(result));
  } else if (op == "race" && argc == 8) {
    const std::string ready = std::string("ready/") + argv[4];
    const std::string go = std::string("go/") + argv[4];
    const char* key = argv[5];
    const bool absent = std::strcmp(argv[6], "-") == 0;
    const char* desired = argv[7];
    const char* keys[] = {go.c_str()};
    int swapped = -1;
    if (cc_store_add(store, ready.c_str(), 1, nullptr) != CC_SUCCESS) {
      rc = fail("cc_store_add");
    } else if (cc_store_wait(store, keys, 1, 60000) != CC_SUCCESS) {
      rc = fail("cc_store_wait");
    } else if (cc_store_compare_set(store, key, absent ? nullptr : argv[6],
                                    absent ? 0 : std::strlen(argv[6]), desired,
                                    std::strlen(desired), &swapped) != CC_SUCCESS) {
      rc = fail("cc_store_compare_set");
    } else {
      std::printf("%d\n", swapped);
    }
  } else {
    std::fprintf(stderr, "store_client: bad arguments for '%s'\n", op.c_str());
    rc = 2;
  }
  cc_store_close(store);
  return rc;
}
