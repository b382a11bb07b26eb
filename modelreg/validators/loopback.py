"""Does a URL reach a server on this host? By what its name resolves to, not how it is spelt.

endpoint-smoke judges a server on this host by ``/proc`` (the process listening on its port),
never by its word, and asks it without the environment's proxies; these say which servers
those are, and where ``/proc`` lists their listener.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit


def is_loopback(url: str) -> bool:
    """Does ``url`` reach a server on this host? By what the host resolves to, not how it is
    spelt: ``localhost.``, ``127.1``, ``0.0.0.0``, ``[::ffff:127.0.0.1]`` and this machine's
    own name or addresses all do — so a server there is judged by /proc, never by its word."""
    hostname = (urlsplit(url).hostname or "").rstrip(".")
    if hostname in ("localhost", socket.gethostname()):
        return True
    try:
        infos = socket.getaddrinfo(hostname, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return False
    local = _local_addresses()
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        mapped = getattr(address, "ipv4_mapped", None)
        for candidate in (address, mapped) if mapped is not None else (address,):
            if candidate.is_loopback or candidate.is_unspecified or str(candidate) in local:
                return True
    return False


def _local_addresses() -> set[str]:
    """The addresses of this host's interfaces (best effort, from its own name)."""
    try:
        return {str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        return set()


def host_port(url: str) -> tuple[str, int] | None:
    """(host, port) of a loopback URL, None for any other."""
    if not is_loopback(url):
        return None
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    hostname = (parts.hostname or "").rstrip(".")
    if hostname == "localhost":
        return hostname, port  # /proc is searched for both of its addresses
    try:  # the address the connection goes to, as /proc lists listeners by address
        address = ipaddress.ip_address(
            str(socket.getaddrinfo(hostname, port, proto=socket.IPPROTO_TCP)[0][4][0])
        )
    except (OSError, UnicodeError, ValueError, IndexError):
        return hostname, port
    mapped = getattr(address, "ipv4_mapped", None)
    return str(mapped or address), port
