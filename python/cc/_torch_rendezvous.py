"""Where a torch process group's cc communicator meets: no torch needed here.

torch's TCPStore already listens on MASTER_PORT in the process of global rank
0, so cc cannot host its rendezvous there. Instead, rank 0 of each process
group starts a cc rendezvous server in its own process on a free port (or on
CC_MASTER_PORT, for the default group, when that is set and differs from
MASTER_PORT), and publishes "address:port" under the key cc/rendezvous in the
group's torch store; the other ranks read it from there. Every rank then
joins that server as an external rendezvous. The address published is
MASTER_ADDR when group rank 0 is global rank 0 (the host MASTER_ADDR names),
else the local address this host uses to reach MASTER_ADDR (CC_TORCH_ADDR
overrides both). The server binds to loopback when the address is loopback.
"""

import ipaddress
import json
import socket

from ._errors import invalid_argument

KEY = "cc/rendezvous"


def _is_loopback(addr):
    if addr in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(addr.strip("[]")).is_loopback
    except ValueError:
        return False


def _is_ipv6(addr):
    try:
        return ipaddress.ip_address(addr.strip("[]")).version == 6
    except ValueError:
        return False


def _route_source(master):
    """The local address the kernel would use to reach master (a UDP
    socket's connect picks the route and sends nothing)."""
    try:
        infos = socket.getaddrinfo(master, 9, type=socket.SOCK_DGRAM)
    except OSError:
        return None
    for family, kind, proto, _, sockaddr in infos:
        try:
            with socket.socket(family, kind, proto) as s:
                s.connect(sockaddr)
                return s.getsockname()[0]
        except OSError:
            continue
    return None


def advertised_address(environ, group_master_is_global_master):
    """The address the other ranks of the group use to reach this process."""
    explicit = environ.get("CC_TORCH_ADDR")
    if explicit:
        return explicit
    master = environ.get("MASTER_ADDR")
    if master and _is_loopback(master):
        return "::1" if _is_ipv6(master) else "127.0.0.1"
    if master and group_master_is_global_master:
        return master
    if master:
        source = _route_source(master)
        if source:
            return source
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def bind_address(advertised):
    """What the server listens on: loopback stays loopback; otherwise every
    interface of the address's family (None = every IPv4 interface)."""
    if _is_loopback(advertised):
        return "::1" if _is_ipv6(advertised) else "127.0.0.1"
    return "::" if _is_ipv6(advertised) else None


def server_port(environ, is_default_group):
    """CC_MASTER_PORT for the default group when set apart from MASTER_PORT,
    else 0 (any free port)."""
    port = environ.get("CC_MASTER_PORT")
    if not is_default_group or not port or port == environ.get("MASTER_PORT"):
        return 0
    try:
        value = int(port)
    except ValueError:
        value = -1
    if not 0 < value < 65536:
        raise invalid_argument("CC_MASTER_PORT=%r is not a port (1..65535)" % port)
    return value


def _text(value):
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else value


def agree(store, group_rank, global_ranks, environ, start_server):
    """Rank 0 starts the server (start_server(bind_addr, port) -> (server,
    port)) and publishes where it is; every rank returns (addr, port,
    server), server being None except on group rank 0. store needs set(key,
    bytes) and get(key) -> bytes, get waiting until the key exists."""
    is_default = not global_ranks
    if group_rank == 0:
        group_master_is_global = is_default or int(global_ranks[0]) == 0
        addr = advertised_address(environ, group_master_is_global)
        server, port = start_server(bind_address(addr), server_port(environ, is_default))
        store.set(KEY, json.dumps({"addr": addr, "port": port}).encode("utf-8"))
        return addr, port, server
    where = json.loads(_text(store.get(KEY)))
    return where["addr"], int(where["port"]), None
