// Writes the seed corpus from real encoded frames:
//   make_seeds DIR   -> DIR/frame/*, DIR/server_core/*, DIR/hello/*, DIR/client_push/*,
//                       DIR/agent/*, DIR/tls_server/*
// The seeds are committed under tests/fuzz/corpus; rerun this when the
// protocol changes.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <openssl/ssl.h>

#include "rendezvous/protocol.hpp"

namespace rv = cc::rv;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& file, const std::vector<uint8_t>& bytes) {
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

rv::Join join(int rank, int world) {
  rv::Join j;
  j.info.rank = rank;
  j.info.world_size = world;
  j.info.host = "host-" + std::to_string(rank);
  j.info.pid = 100u + static_cast<uint32_t>(rank);
  j.info.nccl_version = 22809;
  j.info.gpu_uuid = "GPU-" + std::to_string(rank);
  j.info.nccl_addr = "10.0.0." + std::to_string(rank);
  if (rank == 0) j.unique_id = std::vector<uint8_t>(128, 7);
  j.timeout_ms = 100;
  return j;
}

// Rank `rank`'s survivor asking to go on (host and pid as in its join()).
rv::Recover recover(int rank, int world, rv::RecoverKind kind) {
  rv::Recover r;
  r.info = join(rank, world).info;
  r.info.comm_number = 0;
  r.kind = kind;
  r.nranks = kind == rv::RecoverKind::regrow ? world : 0;
  r.timeout_ms = 100;
  return r;
}

rv::Joined joined_seed() {
  rv::Joined j;
  j.unique_id = {1, 2};
  j.members = {{0, "a", 1}, {1, "b", 2}};
  j.notice = "note";
  return j;
}

// One "bytes to connection c" operation of the server_core target.
void to_conn(std::vector<uint8_t>& out, int c, const std::vector<uint8_t>& bytes) {
  for (size_t at = 0; at < bytes.size(); at += 255) {
    const size_t n = std::min<size_t>(255, bytes.size() - at);
    out.push_back(static_cast<uint8_t>(1 | (c << 2)));
    out.push_back(static_cast<uint8_t>(n));
    out.insert(out.end(), bytes.begin() + static_cast<long>(at),
               bytes.begin() + static_cast<long>(at + n));
  }
}
void connect(std::vector<uint8_t>& out, int c) { out.push_back(static_cast<uint8_t>(c << 2)); }
void tick(std::vector<uint8_t>& out, uint8_t two_ms) {
  out.push_back(3);
  out.push_back(two_ms);
}

// The first flight of an OpenSSL client (its ClientHello) naming the
// server "fuzz.invalid", offering TLS up to max_version.
std::vector<uint8_t> client_hello(int max_version) {
  std::vector<uint8_t> out;
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_max_proto_version(ctx, max_version);
  SSL* ssl = SSL_new(ctx);
  BIO* rbio = BIO_new(BIO_s_mem());
  BIO* wbio = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, rbio, wbio);
  SSL_set_tlsext_host_name(ssl, const_cast<char*>("fuzz.invalid"));
  SSL_set_connect_state(ssl);
  (void)SSL_do_handshake(ssl);  // wants the server's answer
  char* bytes = nullptr;
  const long n = BIO_get_mem_data(wbio, &bytes);
  if (n > 0) out.assign(bytes, bytes + n);
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return out;
}

// A tls_server seed: flags (1 mTLS, 2 the client closes), piece size - 1,
// then the client's bytes.
std::vector<uint8_t> tls_seed(uint8_t flags, uint8_t piece, const std::vector<uint8_t>& bytes) {
  std::vector<uint8_t> s{flags, piece};
  s.insert(s.end(), bytes.begin(), bytes.end());
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds DIR\n");
    return 2;
  }
  const fs::path dir = argv[1];
  fs::create_directories(dir / "frame");
  fs::create_directories(dir / "server_core");
  fs::create_directories(dir / "hello");
  fs::create_directories(dir / "client_push");
  fs::create_directories(dir / "agent");
  fs::create_directories(dir / "tls_server");

  const std::vector<std::pair<std::string, rv::Message>> messages = {
      {"hello", rv::Hello{"job", "host-a", 42, "cc 0.1.0 store"}},
      {"auth", rv::Auth{std::vector<uint8_t>(32, 1)}},
      {"set", rv::Set{"key", {1, 2, 3}}},
      {"get", rv::Get{"key", 50}},
      {"add", rv::Add{"counter", -5}},
      {"wait", rv::Wait{{"a", "b", "c"}, 50}},
      {"del", rv::Del{"key"}},
      {"compare_set", rv::CompareSet{"key", true, {1, 2, 3}, {4}}},
      {"compare_set_absent", rv::CompareSet{"lock", false, {}, {1}}},
      {"compare_set_result", rv::CompareSetResult{true}},
      {"join", join(0, 2)},
      {"leave", rv::Leave{}},
      {"heartbeat", rv::Heartbeat{7}},
      {"abort", rv::Abort{"stop"}},
      {"challenge", rv::Challenge{true, std::vector<uint8_t>(32, 9), "cc-rendezvous 0.1.0"}},
      {"ok", rv::Ok{}},
      {"error", rv::Error{3, "words"}},
      {"value", rv::Value{{4, 5}}},
      {"integer", rv::Integer{-9}},
      {"joined", joined_seed()},
      {"peer_event", rv::PeerEvent{rv::PeerEventKind::failed, 1, "b", 2, "gone"}},
      {"heartbeat_ack", rv::HeartbeatAck{}},
      {"recover", recover(0, 2, rv::RecoverKind::regrow)},
      {"recover_id", rv::RecoverId{1, std::vector<uint8_t>(128, 3), 100}},
      {"recover_id_wanted", rv::RecoverIdWanted{1}},
  };
  // agent: piece-size byte, then what one rank sends its node agent.
  {
    std::vector<uint8_t> s{16};
    rv::append_frame(s, 1, rv::Hello{"fuzz", "node", 10, "cc 0.1.0 comm"});
    rv::append_frame(s, 2, rv::Set{"k", {1, 2}});
    rv::append_frame(s, 3, rv::Get{"k", 0});
    rv::append_frame(s, 4, rv::Heartbeat{5});
    rv::append_frame(s, 5, join(0, 2));
    rv::append_frame(s, 6, rv::Leave{});
    write(dir / "agent" / "rank.bin", s);
    std::vector<uint8_t> big{64};
    rv::append_frame(big, 1, rv::Hello{"fuzz", "node", 10, "cc 0.1.0 comm"});
    rv::append_frame(big, 2, rv::Set{"v", std::vector<uint8_t>(70000, 3)});
    write(dir / "agent" / "large_set.bin", big);
    std::vector<uint8_t> early{5};
    rv::append_frame(early, 1, rv::Set{"k", {1}});
    write(dir / "agent" / "no_hello.bin", early);
  }

  // frame: piece-size byte, then frames.
  std::vector<uint8_t> all{7};
  for (const auto& [name, m] : messages) {
    std::vector<uint8_t> seed{static_cast<uint8_t>(name.size())};
    rv::append_frame(seed, 1, m);
    write(dir / "frame" / (name + ".bin"), seed);
    rv::append_frame(all, 2, m);
  }
  write(dir / "frame" / "all.bin", all);

  // server_core: flags byte (1 token, 2 idle deadline, 4 heartbeats), then operations.
  auto frame = [](const rv::Message& m, uint32_t rid = 1) { return rv::encode_frame(rid, m); };
  {
    std::vector<uint8_t> s{0};
    connect(s, 0);
    to_conn(s, 0, frame(rv::Hello{"job", "a", 1, "c"}));
    to_conn(s, 0, frame(rv::Set{"k", {1}}, 2));
    to_conn(s, 0, frame(rv::Get{"k", 0}, 3));
    to_conn(s, 0, frame(rv::Add{"n", 1}, 4));
    to_conn(s, 0, frame(rv::Wait{{"k", "m"}, 40}, 5));
    tick(s, 30);
    write(dir / "server_core" / "store.bin", s);
  }
  {
    // Keys kept after the last connection: set, leave, come back, compare-set,
    // delete, leave again and let the job TTL pass.
    std::vector<uint8_t> s{0};
    connect(s, 0);
    to_conn(s, 0, frame(rv::Hello{"job", "a", 1, "c"}));
    to_conn(s, 0, frame(rv::Set{"k", {1}}, 2));
    s.push_back(static_cast<uint8_t>(2));  // disconnect
    connect(s, 1);
    to_conn(s, 1, frame(rv::Hello{"job", "b", 2, "c"}));
    to_conn(s, 1, frame(rv::CompareSet{"k", true, {1}, {2}}, 2));
    to_conn(s, 1, frame(rv::CompareSet{"lock", false, {}, {1}}, 3));
    to_conn(s, 1, frame(rv::Del{"k"}, 4));
    s.push_back(static_cast<uint8_t>(2 | (1 << 2)));
    tick(s, 200);
    write(dir / "server_core" / "retention.bin", s);
  }
  {
    std::vector<uint8_t> s{4};
    for (int c = 0; c < 2; ++c) {
      connect(s, c);
      to_conn(s, c, frame(rv::Hello{"job", "h" + std::to_string(c), 1, "c"}));
      to_conn(s, c, frame(join(c, 2), 2));
    }
    to_conn(s, 1, frame(rv::Heartbeat{3}, 3));
    tick(s, 100);
    to_conn(s, 0, frame(rv::Leave{}, 4));
    s.push_back(static_cast<uint8_t>(2 | (1 << 2)));  // rank 1 vanishes
    write(dir / "server_core" / "join.bin", s);
  }
  {
    std::vector<uint8_t> s{1};
    connect(s, 0);
    to_conn(s, 0, frame(rv::Hello{"job", "a", 1, "c"}));
    to_conn(s, 0, frame(rv::Auth{std::vector<uint8_t>(32, 0)}, 2));
    connect(s, 1);
    to_conn(s, 1, frame(rv::Hello{"job", "b", 2, "c"}));
    tick(s, 80);
    write(dir / "server_core" / "auth.bin", s);
  }
  {
    std::vector<uint8_t> s{2};
    connect(s, 2);
    std::vector<uint8_t> half = frame(rv::Set{"key", std::vector<uint8_t>(100, 1)});
    half.resize(half.size() / 2);
    to_conn(s, 2, frame(rv::Hello{"j2", "c", 3, "c"}));
    to_conn(s, 2, half);
    tick(s, 40);
    connect(s, 3);
    tick(s, 120);
    write(dir / "server_core" / "deadlines.bin", s);
  }
  for (const auto kind : {rv::RecoverKind::shrink, rv::RecoverKind::regrow}) {
    // Ranks 0 and 1 join; rank 1 vanishes; rank 0 recovers on a new
    // connection (a regrow also gets a replacement for rank 1, whose Join
    // brings no id, so rank 0 is asked for one).
    std::vector<uint8_t> s{0};
    for (int c = 0; c < 2; ++c) {
      connect(s, c);
      to_conn(s, c, frame(rv::Hello{"job", "h" + std::to_string(c), 1, "c"}));
      to_conn(s, c, frame(join(c, 2), 2));
    }
    s.push_back(static_cast<uint8_t>(2 | (1 << 2)));  // rank 1 vanishes
    connect(s, 2);
    to_conn(s, 2, frame(rv::Hello{"job", "h2", 1, "c"}));
    to_conn(s, 2, frame(recover(0, 2, kind), 3));
    if (kind == rv::RecoverKind::regrow) {
      connect(s, 1);
      to_conn(s, 1, frame(rv::Hello{"job", "h1", 1, "c"}));
      rv::Join again = join(1, 2);
      again.info.pid = 999;
      to_conn(s, 1, frame(again, 4));
      to_conn(s, 2, frame(rv::RecoverId{1, std::vector<uint8_t>(128, 5), 100}, 5));
    }
    tick(s, 30);
    write(dir / "server_core" / (kind == rv::RecoverKind::shrink ? "shrink.bin" : "regrow.bin"), s);
  }
  // hello: flags (1 raw, 2 the right MAC), piece size, then a built Hello's
  // fields (length-prefixed job id, host, client; a pid byte) and what
  // follows the handshake, or raw bytes.
  auto hello_fields = [](const std::string& job, const std::string& host,
                         const std::string& client) {
    std::vector<uint8_t> out;
    for (const std::string* f : {&job, &host, &client}) {
      out.push_back(static_cast<uint8_t>(f->size()));
      out.insert(out.end(), f->begin(), f->end());
    }
    out.push_back(42);
    return out;
  };
  {
    std::vector<uint8_t> s{2, 7};
    const auto f = hello_fields("job", "host-a", "cc 0.1.0 store");
    s.insert(s.end(), f.begin(), f.end());
    rv::append_frame(s, 3, rv::Set{"k", {1}});
    rv::append_frame(s, 4, rv::Get{"k", 0});
    write(dir / "hello" / "right_mac.bin", s);
  }
  {
    std::vector<uint8_t> s{0, 64};
    const auto f = hello_fields("job", "host-b\x1b]0;x\x07", "c");
    s.insert(s.end(), f.begin(), f.end());
    rv::append_frame(s, 3, rv::Set{"k", {1}});
    write(dir / "hello" / "wrong_mac.bin", s);
  }
  {
    std::vector<uint8_t> s{1, 13};
    rv::append_frame(s, 1, rv::Hello{"job", "h", 1, "c"});
    rv::append_frame(s, 2, rv::Set{"k", {1}});
    write(dir / "hello" / "raw_skip_auth.bin", s);
    std::vector<uint8_t> big{1, 64};
    rv::append_frame(big, 1, rv::Hello{std::string(1024, 'j'), std::string(4096, 'h'), 1,
                                       std::string(4096, 'c')});
    write(dir / "hello" / "raw_largest.bin", big);
  }

  // client_push: piece size, requests awaited (ids 1..n), how often an event
  // is taken, then what the server sends.
  {
    std::vector<uint8_t> s{11, 3, 2};
    rv::append_frame(s, 0, rv::PeerEvent{rv::PeerEventKind::failed, 1, "b", 2, "gone"});
    rv::append_frame(s, 1, rv::Ok{});
    rv::append_frame(s, 0, rv::PeerEvent{rv::PeerEventKind::aborted, 2, "c\x1b[2J", 3, "x"});
    rv::append_frame(s, 2, rv::Value{{4, 5}});
    rv::append_frame(s, 3, joined_seed());
    rv::append_frame(s, 9, rv::Integer{1});
    rv::append_frame(s, 0, rv::Error{3, "the rendezvous server is stopping"});
    rv::append_frame(s, 0, rv::PeerEvent{rv::PeerEventKind::failed, 4, "d", 5, "late"});
    write(dir / "client_push" / "mixed.bin", s);
  }
  {
    std::vector<uint8_t> s{64, 0, 16};
    for (int i = 0; i < 1100; ++i)
      rv::append_frame(s, 0, rv::PeerEvent{rv::PeerEventKind::failed, i, "h", 1, "r"});
    write(dir / "client_push" / "flood.bin", s);
  }
  // tls_server: a TLS 1.3 client's hello (whole, in pieces, to an mTLS
  // server, followed by an application record the server cannot decrypt),
  // one that stops at TLS 1.2, a record too long, and cc's Hello in clear.
  {
    const std::vector<uint8_t> hello = client_hello(TLS1_3_VERSION);
    write(dir / "tls_server" / "client_hello.bin", tls_seed(0, 255, hello));
    write(dir / "tls_server" / "client_hello_pieces_closes.bin", tls_seed(2, 6, hello));
    write(dir / "tls_server" / "client_hello_mtls_closes.bin", tls_seed(3, 255, hello));
    std::vector<uint8_t> then = hello;
    for (const uint8_t b : {0x14, 0x03, 0x03, 0x00, 0x01, 0x01, 0x17, 0x03, 0x03, 0x00, 0x05})
      then.push_back(b);
    then.insert(then.end(), 5, 0xa5);
    write(dir / "tls_server" / "client_hello_then_record.bin", tls_seed(2, 255, then));
    write(dir / "tls_server" / "tls12_hello.bin", tls_seed(2, 255, client_hello(TLS1_2_VERSION)));
    write(dir / "tls_server" / "record_too_long.bin",
          tls_seed(2, 255, {0x16, 0x03, 0x01, 0xff, 0xff, 0x01}));
    std::vector<uint8_t> clear;
    rv::append_frame(clear, 1, rv::Hello{"job", "host-a", 42, "cc 0.1.0 store"});
    write(dir / "tls_server" / "clear_hello.bin", tls_seed(2, 15, clear));
  }
  std::printf("seeds written under %s\n", dir.c_str());
  return 0;
}
