"""What Linux ``/proc`` says about the process behind a TCP port on this host.

Used to tell who really serves a loopback endpoint, instead of believing what the server says
about itself:

- ``listening_sockets``: the LISTEN sockets (state ``0A``) on a port, from ``/proc/net/tcp``
  and ``/proc/net/tcp6`` (this network namespace only), and which of them a connection to a
  given host reaches (``reaches``: its own address, or the wildcard);
- ``socket_holders``: the processes whose ``/proc/PID/fd/*`` link to ``socket:[INODE]``;
- ``descendants``: the processes a process started (a server whose model lives in a worker);
- ``open_files``: the regular files a process has open (``/proc/PID/fd``) or mapped
  (``/proc/PID/maps``), each with the (st_dev, st_ino) pairs that name it — so that a file is
  compared by device and inode, never by the path a server reports.

Nothing here trusts the server: every fact is the kernel's. Anything that cannot be read (no
``/proc``, another user's process) is a ``ProcUnreadable`` with the reason, never a guess.
"""

from __future__ import annotations

import ipaddress
import os
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

PROC = Path("/proc")
LISTEN_STATE = "0A"
MAX_MAPS_BYTES = 16 << 20  # a process with a huge address space: the first 16 MiB of lines

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class ProcUnreadable(Exception):
    """A ``/proc`` file verify needs cannot be read; the message says which and why."""


@dataclass(frozen=True)
class Listener:
    """One LISTEN socket: its local address, port and socket inode."""

    address: Address
    port: int
    inode: int


@dataclass(frozen=True)
class OpenFile:
    """A regular file a process has open or mapped, as the kernel names it."""

    pid: int
    how: Literal["open", "mapped"]
    path: str  # as /proc shows it (the kernel's path, " (deleted)" and all)
    identities: frozenset[tuple[int, int]]  # (st_dev, st_ino) pairs that name the file
    size: int | None
    read_via: str | None  # a path that opens the very file the process has, if there is one


@dataclass
class ProcessFiles:
    """The files of some processes, and the processes whose files could not be read."""

    files: list[OpenFile] = field(default_factory=list)
    unreadable: dict[int, str] = field(default_factory=dict)  # pid -> why


def _address(hex_address: str) -> Address:
    """A /proc/net address: IPv4 is one 32-bit word, IPv6 four, each in host byte order."""
    raw = bytes.fromhex(hex_address)
    words = [raw[i : i + 4] for i in range(0, len(raw), 4)]
    packed = b"".join(int.from_bytes(w, "big").to_bytes(4, sys.byteorder) for w in words)
    if len(packed) == 4:
        return ipaddress.IPv4Address(packed)
    return ipaddress.IPv6Address(packed)


def _table(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()[1:]
    except FileNotFoundError:
        return []  # no IPv6 in this kernel: no tcp6 table
    except OSError as exc:
        raise ProcUnreadable(f"cannot read {path}: {exc.strerror}") from None


def listening_sockets(port: int, proc: Path = PROC) -> list[Listener]:
    """The LISTEN sockets on ``port`` in this network namespace (``/proc/net/tcp``,
    ``/proc/net/tcp6``)."""
    if not (proc / "net" / "tcp").exists():
        raise ProcUnreadable(f"{proc}/net/tcp does not exist (no Linux /proc here)")
    found = []
    for name in ("tcp", "tcp6"):
        for line in _table(proc / "net" / name):
            fields = line.split()
            if len(fields) < 10 or fields[3] != LISTEN_STATE:
                continue
            host, _, hex_port = fields[1].partition(":")
            try:
                if int(hex_port, 16) != port:
                    continue
                found.append(Listener(_address(host), port, int(fields[9])))
            except ValueError:
                continue
    return found


def reaches(listener: Address, host: str) -> bool:
    """Whether a connection to ``host`` (an address, or ``localhost``) can land on a socket
    listening on ``listener``: the same address, or the wildcard of its family (an IPv6
    wildcard also takes IPv4 connections unless it is v6-only)."""
    if listener.is_unspecified:
        return True
    mapped = getattr(listener, "ipv4_mapped", None)
    if mapped is not None:
        listener = mapped
    if host == "localhost":
        return listener.is_loopback
    try:
        wanted = ipaddress.ip_address(host)
    except ValueError:
        return False
    return listener == wanted


def _pids(proc: Path) -> list[int]:
    try:
        return [int(e.name) for e in proc.iterdir() if e.name.isdigit()]
    except OSError as exc:
        raise ProcUnreadable(f"cannot list {proc}: {exc.strerror}") from None


def socket_holders(
    inodes: Iterable[int], proc: Path = PROC
) -> tuple[dict[int, set[int]], dict[int, str]]:
    """(pid -> the socket inodes among ``inodes`` it holds, pid -> why its fds could not be
    read). A process that exited while being read is left out."""
    links = {f"socket:[{inode}]": inode for inode in inodes}
    holders: dict[int, set[int]] = {}
    unreadable: dict[int, str] = {}
    for pid in _pids(proc):
        fd_dir = proc / str(pid) / "fd"
        try:
            names = os.listdir(fd_dir)
        except FileNotFoundError:
            continue
        except OSError as exc:
            unreadable[pid] = f"cannot read {fd_dir}: {exc.strerror}"
            continue
        for name in names:
            try:
                target = os.readlink(fd_dir / name)
            except OSError:
                continue
            if target in links:
                holders.setdefault(pid, set()).add(links[target])
    return holders, unreadable


def _parent(pid: int, proc: Path) -> int | None:
    try:
        text = (proc / str(pid) / "stat").read_text()
        # pid (comm) state ppid …; comm may hold spaces and parentheses.
        return int(text[text.rindex(")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def descendants(pid: int, proc: Path = PROC) -> list[int]:
    """Every process ``pid`` started, directly or not (by parent pid), in no set order."""
    children: dict[int, list[int]] = {}
    for other in _pids(proc):
        parent = _parent(other, proc)
        if parent is not None:
            children.setdefault(parent, []).append(other)
    found: list[int] = []
    todo = list(children.get(pid, []))
    while todo:
        child = todo.pop()
        if child not in found:
            found.append(child)
            todo.extend(children.get(child, []))
    return found


def command_line(pid: int, proc: Path = PROC) -> list[str]:
    """``pid``'s argv (empty when it cannot be read)."""
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode("utf-8", errors="replace") for a in raw.split(b"\0") if a]


def _stat(path: str | Path) -> os.stat_result | None:
    try:
        result = os.stat(path)
    except OSError:
        return None
    return result if stat.S_ISREG(result.st_mode) else None


def _fd_files(pid: int, proc: Path) -> list[OpenFile]:
    """Regular files ``pid`` has open: ``os.stat`` through ``/proc/PID/fd/N`` reaches the
    file itself (even one deleted or renamed since)."""
    fd_dir = proc / str(pid) / "fd"
    try:
        names = os.listdir(fd_dir)
    except OSError as exc:
        raise ProcUnreadable(f"cannot read {fd_dir}: {exc.strerror}") from None
    found = []
    for name in names:
        link = fd_dir / name
        result = _stat(link)
        if result is None:
            continue
        try:
            shown = os.readlink(link)
        except OSError:
            shown = str(link)
        found.append(
            OpenFile(
                pid,
                "open",
                shown,
                frozenset({(result.st_dev, result.st_ino)}),
                result.st_size,
                str(link),
            )
        )
    return found


def _mapping(pid: int, line: str, proc: Path) -> OpenFile | None:
    """One ``/proc/PID/maps`` line as the file it maps (None for anonymous memory).

    The line's own ``major:minor inode`` names the file; ``map_files/START-END`` (readable
    with CAP_SYS_ADMIN) and the shown path — only if it still has that inode — add the
    (st_dev, st_ino) that ``os.stat`` reports, which differs from the line's device on some
    file systems (btrfs subvolumes, overlayfs).
    """
    fields = line.split(maxsplit=5)
    if len(fields) < 6 or not fields[5].startswith("/"):
        return None
    span, device, inode_text, path = fields[0], fields[3], fields[4], fields[5]
    try:
        major, minor = (int(part, 16) for part in device.split(":"))
        inode = int(inode_text)
    except ValueError:
        return None
    if inode == 0:
        return None
    identities = {(os.makedev(major, minor), inode)}
    size = None
    read_via = None
    by_map = proc / str(pid) / "map_files" / span
    for candidate in (by_map, Path(path)):
        result = _stat(candidate)
        if result is None or result.st_ino != inode:
            continue
        identities.add((result.st_dev, result.st_ino))
        size = result.st_size
        read_via = read_via or str(candidate)
    return OpenFile(pid, "mapped", path, frozenset(identities), size, read_via)


def _mapped_files(pid: int, proc: Path) -> list[OpenFile]:
    maps = proc / str(pid) / "maps"
    try:
        with maps.open("rb") as handle:
            text = handle.read(MAX_MAPS_BYTES).decode("utf-8", errors="replace")
    except OSError as exc:
        raise ProcUnreadable(f"cannot read {maps}: {exc.strerror}") from None
    seen: dict[str, OpenFile] = {}
    for line in text.splitlines():
        fields = line.split(maxsplit=5)
        key = " ".join(fields[3:]) if len(fields) == 6 else ""
        if key and key not in seen:
            mapped = _mapping(pid, line, proc)
            if mapped is not None:
                seen[key] = mapped
    return list(seen.values())


def open_files(pids: Iterable[int], proc: Path = PROC) -> ProcessFiles:
    """The regular files ``pids`` have mapped, then those they have open (a file can be
    both); a process whose ``/proc`` entries cannot be read is named in ``unreadable`` with
    the reason."""
    result = ProcessFiles()
    for pid in pids:
        try:
            result.files += _mapped_files(pid, proc) + _fd_files(pid, proc)
        except ProcUnreadable as exc:
            result.unreadable[pid] = str(exc)
    return result
