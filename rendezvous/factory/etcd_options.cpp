#include "rendezvous/factory/etcd_options.hpp"

#include <string>

#include "rendezvous/etcd/endpoints.hpp"

namespace cc::rv::factory {

using settings::Id;

Status etcd_options(const Address& address, const Options& options, etcd::ElectionOptions* out) {
  etcd::Address parsed;
  if (Status s = etcd::parse_address(address.text(), &parsed); !s.ok()) return s;
  const settings::Getenv getenv = options.getenv ? options.getenv : settings::process_env();
  etcd::ElectionOptions o;
  o.client.address = parsed;
  o.request_timeout = options.request_timeout;
  o.lease = options.lease;
  const auto text = [&](Id id, std::string* field) {
    if (const settings::Found f = settings::find(id, getenv); f.var != nullptr) *field = f.value;
  };
  text(Id::etcd_auth_file, &o.client.auth_file);
  text(Id::etcd_ca_file, &o.client.ca_file);
  text(Id::etcd_cert_file, &o.client.cert_file);
  text(Id::etcd_key_file, &o.client.key_file);
  o.prefix = settings::get(Id::etcd_prefix).default_text;
  if (const settings::Found f = settings::find(Id::etcd_prefix, getenv); f.var != nullptr) {
    if (*f.value == '\0')
      return make_status(CC_ERR_INVALID_ARGUMENT,
                         std::string(f.var) +
                             "='' is empty: unset it for cc's default prefix 'cc', or name the "
                             "etcd key prefix cc keeps its jobs under");
    o.prefix = f.value;
  }
  if (!parsed.tls && (!o.client.ca_file.empty() || !o.client.cert_file.empty()))
    return make_status(CC_ERR_INVALID_ARGUMENT,
                       "a CA or client certificate is set (CC_ETCD_CA_FILE, CC_ETCD_CERT_FILE) "
                       "but the rendezvous address " +
                           address.text() +
                           " is plain HTTP: write etcds:// for TLS, or unset them");
  *out = std::move(o);
  return Status::success();
}

}  // namespace cc::rv::factory
