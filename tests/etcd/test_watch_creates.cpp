// The etcd client's watch against a stand-in for etcd's JSON gateway that
// confirms only some of a stream's create requests, as the real gateway does
// when it answers before it has read the whole request body: the client must
// open the stream again rather than wait for events of a watch never made.
#include <httplib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/etcd/client.hpp"

namespace {

using cc::rv::etcd::Client;
using cc::rv::etcd::ClientOptions;
using cc::rv::etcd::WatchEvent;
using cc::rv::etcd::WatchSpec;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string line_of(const std::string& result) { return "{\"result\":" + result + "}\n"; }

std::string created(int id) {
  return line_of("{\"header\":{\"revision\":\"5\"},\"watch_id\":\"" + std::to_string(id) +
                 "\",\"created\":true}");
}

// A delete of key "b" (base64 "Yg==") at revision 7, on watch `id`.
std::string deleted_b(int id) {
  return line_of("{\"header\":{\"revision\":\"7\"},\"watch_id\":\"" + std::to_string(id) +
                 "\",\"events\":[{\"type\":\"DELETE\",\"kv\":{\"key\":\"Yg==\",\"mod_revision\":"
                 "\"7\"}}]}");
}

// The stand-in: each stream confirms `confirm(n)` of its n creates, then
// (when `event_after` is set) sends the delete on the last watch, and stays
// open until the client goes or 10 s pass.
class Gateway {
 public:
  Gateway(std::function<int(int)> confirm, std::optional<milliseconds> event_after)
      : confirm_(std::move(confirm)), event_after_(event_after) {
    server_.Post("/v3/watch", [this](const httplib::Request& req, httplib::Response& res) {
      int creates = 0;
      for (size_t at = req.body.find("create_request"); at != std::string::npos;
           at = req.body.find("create_request", at + 1))
        ++creates;
      const int n = ++streams_;
      const int confirmed = confirm_(n);
      res.set_chunked_content_provider(
          "application/json", [this, creates, confirmed, start = Clock::now(), sent = false](
                                  size_t, httplib::DataSink& sink) mutable {
            if (!sent) {
              std::string out;
              for (int i = 0; i < confirmed; ++i) out += created(i);
              sink.write(out.data(), out.size());
              sent = true;
            }
            if (event_after_ && confirmed == creates && Clock::now() - start >= *event_after_) {
              const std::string e = deleted_b(creates - 1);
              sink.write(e.data(), e.size());
              event_after_.reset();
            }
            if (!sink.is_writable() || Clock::now() - start > std::chrono::seconds(10)) {
              sink.done();
              return true;
            }
            std::this_thread::sleep_for(milliseconds(10));
            return true;
          });
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(milliseconds(1));
  }
  ~Gateway() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  int streams() const { return streams_.load(); }

 private:
  std::function<int(int)> confirm_;
  std::optional<milliseconds> event_after_;
  httplib::Server server_;
  std::atomic<int> streams_{0};
  int port_ = 0;
  std::thread thread_;
};

std::unique_ptr<Client> client_of(const Gateway& g) {
  ClientOptions o;
  REQUIRE(cc::rv::etcd::parse_address("etcd://127.0.0.1:" + std::to_string(g.port()), &o.address)
              .ok());
  std::unique_ptr<Client> c;
  REQUIRE(Client::create(o, &c).ok());
  return c;
}

std::vector<WatchSpec> two_keys() {
  WatchSpec a, b;
  a.key = "a";
  b.key = "b";
  b.no_put = true;
  return {a, b};
}

}  // namespace

TEST_CASE("etcd watch: a stream that confirms only some of its keys is opened again") {
  // The first stream confirms one of two creates (the second was lost); the next, both.
  Gateway g([](int stream) { return stream == 1 ? 1 : 2; }, milliseconds(0));
  auto c = client_of(g);
  std::vector<WatchEvent> got;
  const auto t0 = Clock::now();
  const cc::Status s = c->watch(two_keys(), Clock::now() + std::chrono::seconds(8), nullptr,
                                [&](const std::vector<WatchEvent>& evs, int64_t) {
                                  got.insert(got.end(), evs.begin(), evs.end());
                                  return false;
                                });
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
  INFO(s.message << " after " << took << " ms");
  REQUIRE(s.ok());
  REQUIRE(got.size() == 1);
  CHECK(got[0].spec == 1);
  CHECK(got[0].type == WatchEvent::Type::del);
  CHECK(got[0].kv.key == "b");
  CHECK(got[0].kv.mod_revision == 7);
  CHECK(g.streams() == 2);
}

TEST_CASE("etcd watch: a stream that confirmed every key is kept while it is quiet") {
  // Every create confirmed at once; the event comes 1.5 s later, past the grace.
  Gateway g([](int) { return 2; }, milliseconds(1500));
  auto c = client_of(g);
  std::vector<WatchEvent> got;
  const cc::Status s = c->watch(two_keys(), Clock::now() + std::chrono::seconds(8), nullptr,
                                [&](const std::vector<WatchEvent>& evs, int64_t) {
                                  got.insert(got.end(), evs.begin(), evs.end());
                                  return false;
                                });
  INFO(s.message);
  REQUIRE(s.ok());
  REQUIRE(got.size() == 1);
  CHECK(got[0].spec == 1);
  CHECK(g.streams() == 1);
}

TEST_CASE("etcd watch: a stream that never confirms every key ends at its deadline") {
  // Every stream loses its second create: the watch tries again, and still
  // returns at its deadline with etcd's timeout, not later.
  Gateway g([](int) { return 1; }, std::nullopt);
  auto c = client_of(g);
  const auto t0 = Clock::now();
  const cc::Status s = c->watch(two_keys(), Clock::now() + std::chrono::seconds(3), nullptr,
                                [&](const std::vector<WatchEvent>&, int64_t) { return false; });
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
  INFO(s.message << " after " << took << " ms");
  CHECK(s.code == CC_ERR_TIMEOUT);
  CHECK(took < 4500);
  CHECK(g.streams() >= 2);
}
