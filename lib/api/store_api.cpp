// cc_store_*: the application's key-value store on the job's rendezvous
// (cc's server or etcd: the factory picks the backend from the address).
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cc/cc.h"
#include "common/last_error.hpp"
#include "lib/launch/config.hpp"
#include "lib/launch/env.hpp"
#include "rendezvous/factory/connect.hpp"

struct cc_store {
  std::unique_ptr<cc::rv::Store> client;
  int default_timeout_ms = 0;
  std::string job_id;
  cc::rv::Limits limits;

  // "(job 'j', rendezvous at H:P)" for messages.
  std::string where() const {
    return "(job '" + job_id + "', rendezvous at " + client->endpoint() + ")";
  }
};

namespace {

using cc::fail;

cc_result_t invalid(const char* func, const std::string& what) {
  return fail(CC_ERR_INVALID_ARGUMENT, std::string(func) + ": " + what);
}

cc_result_t check_key(const char* func, const cc_store* store, const char* key, const char* name) {
  if (key == nullptr)
    return invalid(func, std::string(name) + " is NULL: pass a NUL-terminated key");
  const size_t n = std::strlen(key);
  if (n == 0)
    return invalid(func, std::string(name) + " is empty: a key needs at least one byte");
  if (n > store->limits.max_key) {
    return invalid(func, std::string(name) + " is " + std::to_string(n) +
                             " bytes long, over the limit of " +
                             std::to_string(store->limits.max_key) + " bytes: use a shorter key");
  }
  return CC_SUCCESS;
}

// timeout_ms < 0: the store's default deadline; 0: do not wait.
uint32_t effective_timeout(const cc_store* store, int timeout_ms) {
  return static_cast<uint32_t>(timeout_ms < 0 ? store->default_timeout_ms : timeout_ms);
}

// An error from the client, with the call, the key and where it went.
cc_result_t fail_request(const char* func, const cc_store* store, const std::string& what,
                         const cc::Status& s) {
  return fail(s.code, std::string(func) + " " + what + " " + store->where() + ": " + s.message);
}

}  // namespace

extern "C" CC_API cc_result_t cc_store_connect(cc_store_t* store, const char* addr, int port,
                                               const char* job_id, const cc_config_t* config) {
  CC_API_GUARD_BEGIN
  const char* func = "cc_store_connect";
  if (store == nullptr) return invalid(func, "store is NULL: pass the address of a cc_store_t");
  *store = nullptr;
  if (addr == nullptr || *addr == '\0') {
    return invalid(func, std::string("addr is ") + (addr == nullptr ? "NULL" : "empty") +
                             ": pass the rendezvous host name or IP address (e.g. MASTER_ADDR), "
                             "tcp://host:port, or etcd://host:port,...");
  }
  // An address that carries its port (tcp://, etcd://) leaves `port` unused.
  cc::rv::factory::Address address;
  if (cc::Status s = cc::rv::factory::parse_address(addr, &address); !s.ok())
    return invalid(func, s.message);
  if (address.needs_port() && (port < 1 || port > 65535)) {
    return invalid(func, "port " + std::to_string(port) + " is out of range 1..65535");
  }
  address.set_port(port);
  if (job_id != nullptr && *job_id == '\0') {
    return invalid(func, "job_id is empty: pass NULL for the default or a non-empty name");
  }
  if (job_id != nullptr) {
    if (cc::Status s = cc::rv::check_job_id(job_id, "job_id"); !s.ok())
      return invalid(func, s.message);
  }
  cc::launch::ResolvedConfig cfg;
  if (cc::Status s = cc::launch::resolve_config(config, cc::settings::process_env(), &cfg);
      !s.ok()) {
    return fail(s.code, std::string(func) + ": " + s.message);
  }

  auto handle = std::make_unique<cc_store>();
  handle->default_timeout_ms = cfg.timeout_ms;
  handle->job_id = job_id != nullptr ? job_id : cfg.job_id;

  cc::rv::factory::Options options;
  options.job_id = handle->job_id;
  options.token = cfg.token;
  options.client = std::string("cc ") + CC_VERSION_STRING + " store";
  options.connect_timeout = std::chrono::milliseconds(cfg.timeout_ms);
  options.request_timeout = std::chrono::milliseconds(cfg.timeout_ms);
  options.tls = cfg.tls;
  options.tls_server = cfg.tls_server;
  const cc::Status s = cc::rv::factory::connect_store(address, options, &handle->client);
  if (!s.ok()) {
    return fail(s.code, std::string(func) + " (job '" + handle->job_id + "'): " + s.message);
  }
  *store = handle.release();
  return cc::succeed();
  CC_API_GUARD_END
}

extern "C" CC_API cc_result_t cc_store_set(cc_store_t store, const char* key, const void* value,
                                           size_t len) {
  CC_API_GUARD_BEGIN
  const char* func = "cc_store_set";
  if (store == nullptr) return invalid(func, "store is NULL: connect with cc_store_connect first");
  if (cc_result_t r = check_key(func, store, key, "key"); r != CC_SUCCESS) return r;
  if (value == nullptr && len > 0) {
    return invalid(func, "value is NULL but len is " + std::to_string(len));
  }
  if (len > store->limits.max_value) {
    return invalid(func, "the value of key '" + std::string(key) + "' is " + std::to_string(len) +
                             " bytes, over the limit of " +
                             std::to_string(store->limits.max_value) +
                             " bytes: store large data elsewhere and put its location here");
  }
  const auto* bytes = static_cast<const uint8_t*>(value);
  if (cc::Status s = store->client->set(key, std::span<const uint8_t>(bytes, len)); !s.ok()) {
    return fail_request(func, store, "of key '" + std::string(key) + "'", s);
  }
  return cc::succeed();
  CC_API_GUARD_END
}

extern "C" CC_API cc_result_t cc_store_get(cc_store_t store, const char* key, void* buf, size_t cap,
                                           size_t* len, int timeout_ms) {
  CC_API_GUARD_BEGIN
  const char* func = "cc_store_get";
  if (store == nullptr) return invalid(func, "store is NULL: connect with cc_store_connect first");
  if (cc_result_t r = check_key(func, store, key, "key"); r != CC_SUCCESS) return r;
  if (buf == nullptr && cap > 0)
    return invalid(func, "buf is NULL but cap is " + std::to_string(cap));
  if (len == nullptr)
    return invalid(func, "len is NULL: pass a size_t* that receives the value's length");
  *len = 0;
  const uint32_t timeout = effective_timeout(store, timeout_ms);
  std::vector<uint8_t> value;
  // A timeout's message is the server's ("was not set within 1000 ms"), or
  // the client's when the server did not answer at all.
  if (cc::Status s = store->client->get(key, &value, timeout); !s.ok())
    return fail_request(func, store, "of key '" + std::string(key) + "'", s);
  *len = value.size();
  if (value.size() > cap) {
    return fail(CC_ERR_BUFFER_TOO_SMALL, std::string(func) + ": the value of key '" + key +
                                             "' is " + std::to_string(value.size()) +
                                             " bytes but the buffer holds " + std::to_string(cap) +
                                             ": call again with a buffer of at least " +
                                             std::to_string(value.size()) + " bytes");
  }
  if (!value.empty()) std::memcpy(buf, value.data(), value.size());
  return cc::succeed();
  CC_API_GUARD_END
}

extern "C" CC_API cc_result_t cc_store_add(cc_store_t store, const char* key, int64_t delta,
                                           int64_t* result) {
  CC_API_GUARD_BEGIN
  const char* func = "cc_store_add";
  if (store == nullptr) return invalid(func, "store is NULL: connect with cc_store_connect first");
  if (cc_result_t r = check_key(func, store, key, "key"); r != CC_SUCCESS) return r;
  int64_t value = 0;
  if (cc::Status s = store->client->add(key, delta, &value); !s.ok()) {
    return fail_request(func, store, "to key '" + std::string(key) + "'", s);
  }
  if (result != nullptr) *result = value;
  return cc::succeed();
  CC_API_GUARD_END
}

extern "C" CC_API cc_result_t cc_store_wait(cc_store_t store, const char* const* keys, int nkeys,
                                            int timeout_ms) {
  CC_API_GUARD_BEGIN
  const char* func = "cc_store_wait";
  if (store == nullptr) return invalid(func, "store is NULL: connect with cc_store_connect first");
  if (nkeys < 0)
    return invalid(func, "nkeys is " + std::to_string(nkeys) + ": it must be 0 or more");
  if (keys == nullptr && nkeys > 0)
    return invalid(func, "keys is NULL but nkeys is " + std::to_string(nkeys));
  if (static_cast<uint32_t>(nkeys) > store->limits.max_wait_keys) {
    return invalid(func, "nkeys is " + std::to_string(nkeys) + ", over the limit of " +
                             std::to_string(store->limits.max_wait_keys) +
                             " keys in one wait: split it");
  }
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(nkeys));
  for (int i = 0; i < nkeys; ++i) {
    const std::string name = "keys[" + std::to_string(i) + "]";
    if (cc_result_t r = check_key(func, store, keys[i], name.c_str()); r != CC_SUCCESS) return r;
    names.emplace_back(keys[i]);
  }
  if (names.empty()) return cc::succeed();
  const uint32_t timeout = effective_timeout(store, timeout_ms);
  // The server's message names the keys still missing at the deadline.
  if (cc::Status s = store->client->wait(names, timeout); !s.ok()) {
    return fail_request(func, store, "for " + std::to_string(nkeys) + " key(s)", s);
  }
  return cc::succeed();
  CC_API_GUARD_END
}

extern "C" CC_API cc_result_t cc_store_delete(cc_store_t store, const char* key) {
  CC_API_GUARD_BEGIN
  const char* func = "cc_store_delete";
  if (store == nullptr) return invalid(func, "store is NULL: connect with cc_store_connect first");
  if (cc_result_t r = check_key(func, store, key, "key"); r != CC_SUCCESS) return r;
  if (cc::Status s = store->client->del(key); !s.ok()) {
    return fail_request(func, store, "of key '" + std::string(key) + "'", s);
  }
  return cc::succeed();
  CC_API_GUARD_END
}

extern "C" CC_API cc_result_t cc_store_compare_set(cc_store_t store, const char* key,
                                                   const void* expected, size_t expected_len,
                                                   const void* desired, size_t desired_len,
                                                   int* swapped) {
  CC_API_GUARD_BEGIN
  const char* func = "cc_store_compare_set";
  if (swapped != nullptr) *swapped = 0;
  if (store == nullptr) return invalid(func, "store is NULL: connect with cc_store_connect first");
  if (cc_result_t r = check_key(func, store, key, "key"); r != CC_SUCCESS) return r;
  if (expected == nullptr && expected_len > 0) {
    return invalid(func, "expected is NULL but expected_len is " + std::to_string(expected_len) +
                             ": pass NULL and 0 to set the key only if it is absent, or the "
                             "expected value");
  }
  if (desired == nullptr && desired_len > 0) {
    return invalid(func, "desired is NULL but desired_len is " + std::to_string(desired_len));
  }
  if (std::max(expected_len, desired_len) > store->limits.max_value) {
    const bool expected_long = expected_len > store->limits.max_value;
    return invalid(
        func, std::string("the ") + (expected_long ? "expected" : "desired") + " value of key '" +
                  key + "' is " + std::to_string(expected_long ? expected_len : desired_len) +
                  " bytes, over the limit of " + std::to_string(store->limits.max_value) +
                  " bytes: store large data elsewhere and put its location here");
  }
  std::vector<uint8_t> want;
  if (expected != nullptr) {
    const auto* b = static_cast<const uint8_t*>(expected);
    want.assign(b, b + expected_len);
  }
  const auto* bytes = static_cast<const uint8_t*>(desired);
  bool done = false;
  if (cc::Status s =
          store->client->compare_set(key, expected != nullptr ? &want : nullptr,
                                     std::span<const uint8_t>(bytes, desired_len), &done);
      !s.ok()) {
    return fail_request(func, store, "of key '" + std::string(key) + "'", s);
  }
  if (swapped != nullptr) *swapped = done ? 1 : 0;
  return cc::succeed();
  CC_API_GUARD_END
}

extern "C" CC_API cc_result_t cc_store_close(cc_store_t store) {
  CC_API_GUARD_BEGIN
  delete store;
  return cc::succeed();
  CC_API_GUARD_END
}
