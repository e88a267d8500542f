"""Downloads that cannot hang: a quick reachability check first, and a socket timeout while downloading.

torchvision downloads with ``urllib`` and no timeout, and name resolution ignores socket timeouts altogether, so on
a machine whose DNS or outbound traffic is firewalled a download can wait for minutes before failing. rsbench
first checks, within :data:`CHECK_SECONDS`, that the dataset's server answers, and downloads under a
:data:`DOWNLOAD_TIMEOUT_SECONDS` socket timeout (per network operation, not for the whole file).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlparse

CHECK_SECONDS = 5.0
DOWNLOAD_TIMEOUT_SECONDS = 60.0


def unreachable(url: str, timeout: float = CHECK_SECONDS) -> str | None:
    """Why ``url``'s server cannot be reached within ``timeout`` seconds, or ``None`` when it answers."""
    parts = urlparse(url)
    host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    if not host:
        return f"no host in {url!r}"
    found: list[object] = []

    def resolve() -> None:
        try:
            found.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as error:
            found.append(error)

    resolver = threading.Thread(target=resolve, daemon=True)  # getaddrinfo has no timeout of its own
    resolver.start()
    resolver.join(timeout)
    if not found:
        return f"could not resolve {host} within {timeout:g} s"
    if isinstance(found[0], OSError):
        return f"could not resolve {host}: {found[0]}"
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as error:
        return f"could not connect to {host}:{port}: {error}"
    return None


@contextmanager
def socket_timeout(seconds: float = DOWNLOAD_TIMEOUT_SECONDS) -> Iterator[None]:
    """Give every new socket a ``seconds`` timeout while the block runs (urllib's default is to wait forever)."""
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(previous)


def download_url(dataset_class: type) -> str | None:
    """The first URL a torchvision dataset class downloads from (its ``url``, ``mirrors``, ``split_list``, ...)."""
    for name in ("url", "mirrors", "split_list", "resources"):
        value = getattr(dataset_class, name, None)
        for candidate in _strings(value):
            if candidate.startswith(("http://", "https://")):
                return candidate
    return None


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)
