"""Small helpers for local listeners."""

from __future__ import annotations

import argparse
import ipaddress
import socket

__all__ = ["free_port", "host_port_arg", "split_host_port", "cidr_arg", "ip_arg"]


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the kernel's choice for an ephemeral bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def split_host_port(text: str) -> tuple[str, int]:
    """("::1", 10010) from "[::1]:10010", ("127.0.0.1", 0) from "127.0.0.1:0"; ValueError naming the text."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host.removeprefix("[").removesuffix("]"), int(port)


def host_port_arg(text: str) -> str:
    """An argparse type for HOST:PORT flags (port 0: any free port, for listeners)."""
    try:
        split_host_port(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def optional_host_port_arg(text: str) -> str:
    """host_port_arg, or empty (a listener or a server that is off)."""
    return host_port_arg(text) if text else text


def cidr_arg(text: str) -> str:
    """An argparse type for a network in CIDR form (host bits zero), or empty."""
    if text:
        try:
            ipaddress.ip_network(text, strict=True)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    return text


def ip_arg(text: str) -> str:
    """An argparse type for an IP address, or empty."""
    if text:
        try:
            ipaddress.ip_address(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    return text
