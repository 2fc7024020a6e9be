#include "lib/launch/etcd.hpp"

#include "rendezvous/etcd/connect.hpp"
#include "rendezvous/etcd/endpoints.hpp"

namespace cc::launch {

using settings::Id;

bool is_etcd_address(const std::string& addr) { return rv::etcd::is_etcd_address(addr); }

std::string etcd_first_host(const std::string& addr) {
  rv::etcd::Address parsed;
  if (!rv::etcd::parse_address(addr, &parsed).ok() || parsed.endpoints.empty()) return {};
  return parsed.endpoints.front().host;
}

Status etcd_options(const std::string& addr, const std::string& job_id,
                    const settings::Getenv& getenv, rv::etcd::BackendOptions* out) {
  rv::etcd::Address parsed;
  if (Status s = rv::etcd::parse_address(addr, &parsed); !s.ok()) return s;
  rv::etcd::BackendOptions o;
  o.address = addr;
  o.job_id = job_id;
  const auto text = [&](Id id, std::string* field) {
    if (const settings::Found f = settings::find(id, getenv); f.var != nullptr) *field = f.value;
  };
  text(Id::etcd_auth_file, &o.auth_file);
  text(Id::etcd_ca_file, &o.ca_file);
  text(Id::etcd_cert_file, &o.cert_file);
  text(Id::etcd_key_file, &o.key_file);
  o.prefix = settings::get(Id::etcd_prefix).default_text;
  if (const settings::Found f = settings::find(Id::etcd_prefix, getenv); f.var != nullptr) {
    if (*f.value == '\0')
      return make_status(CC_ERR_INVALID_ARGUMENT,
                         std::string(f.var) +
                             "='' is empty: unset it for cc's default prefix 'cc', or name the "
                             "etcd key prefix cc keeps its jobs under");
    o.prefix = f.value;
  }
  if (!parsed.tls && (!o.ca_file.empty() || !o.cert_file.empty()))
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       "a CA or client certificate is set (CC_ETCD_CA_FILE, CC_ETCD_CERT_FILE) "
                       "but the rendezvous address " +
                           addr + " is plain HTTP: write etcds:// for TLS, or unset them");
  *out = std::move(o);
  return Status::success();
}

Status connect_etcd(const rv::etcd::BackendOptions& options, std::unique_ptr<rv::Client>* out) {
  return rv::etcd::connect_backend(options, out);
}

}  // namespace cc::launch
