#include "rendezvous/etcd/keys.hpp"

#include <cstdint>

namespace cc::rv::etcd::keys {
namespace {

constexpr const char* kHex = "0123456789abcdef";

std::string escape(const std::string& job) {
  std::string out;
  for (char ch : job) {
    if (ch == '%') out += "%25";
    else if (ch == '/') out += "%2F";
    else out += ch;
  }
  return out;
}

std::optional<std::string> unescape(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    const std::string code = text.substr(i + 1, 2);
    if (code == "25") out += '%';
    else if (code == "2F") out += '/';
    else return std::nullopt;
    i += 2;
  }
  return out;
}

std::string hex(const std::string& bytes) {
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::optional<std::string> unhex(const std::string& text) {
  if (text.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < text.size(); i += 2) {
    int v = 0;
    for (size_t j = i; j < i + 2; ++j) {
      const char ch = text[j];
      const int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
      if (d < 0) return std::nullopt;
      v = v * 16 + d;
    }
    out += static_cast<char>(v);
  }
  return out;
}

}  // namespace

std::string daemons(const std::string& prefix) { return prefix + "/daemons"; }

std::string leader(const std::string& prefix, const std::string& scope) {
  return scope.empty() ? prefix + "/leader" : job(prefix, scope) + "leader";
}

std::string fence(const std::string& prefix, const std::string& scope) {
  return scope.empty() ? prefix + "/fence" : job(prefix, scope) + "fence";
}

std::string jobs(const std::string& prefix, const std::string& scope) {
  return scope.empty() ? prefix + "/job/" : job(prefix, scope);
}

std::string job(const std::string& prefix, const std::string& job) {
  return prefix + "/job/" + escape(job) + "/";
}

std::string kv(const std::string& prefix, const std::string& j, const std::string& key) {
  return job(prefix, j) + "kv/" + key;
}

std::string session(const std::string& prefix, const std::string& j, const std::string& s) {
  return job(prefix, j) + "session/" + hex(s);
}

std::optional<Parsed> parse(const std::string& prefix, const std::string& key) {
  const std::string root = prefix + "/job/";
  if (key.compare(0, root.size(), root) != 0) return std::nullopt;
  const size_t slash = key.find('/', root.size());
  if (slash == std::string::npos) return std::nullopt;
  std::optional<std::string> job = unescape(key.substr(root.size(), slash - root.size()));
  if (!job) return std::nullopt;
  const std::string rest = key.substr(slash + 1);
  Parsed p;
  p.job = *job;
  if (rest.compare(0, 3, "kv/") == 0) {
    p.kind = Parsed::Kind::kv;
    p.name = rest.substr(3);
    return p;
  }
  if (rest.compare(0, 8, "session/") == 0) {
    std::optional<std::string> s = unhex(rest.substr(8));
    if (!s) return std::nullopt;
    p.kind = Parsed::Kind::session;
    p.name = *s;
    return p;
  }
  return std::nullopt;
}

}  // namespace cc::rv::etcd::keys
