"""CNI results, typed, for spec versions 0.3.0, 0.3.1, 0.4.0 and 1.0.0, and conversion between them.

The shapes differ only in that 0.3.x/0.4.0 ips carry "version" ("4"/"6") and 1.0.0 does not.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Interface", "IPConfig", "Route", "DNS", "Result", "ResultError", "SUPPORTED_VERSIONS",
           "parse_result", "version_tuple"]

SUPPORTED_VERSIONS = ("0.3.0", "0.3.1", "0.4.0", "1.0.0")


class ResultError(ValueError):
    pass


def version_tuple(v: str) -> tuple[int, int, int]:
    try:
        parts = [int(x) for x in v.split(".")]
    except ValueError:
        raise ResultError(f"invalid CNI version {v!r}") from None
    while len(parts) < 3:
        parts.append(0)
    return parts[0], parts[1], parts[2]


@dataclass(frozen=True)
class Interface:
    name: str
    mac: str = ""
    mtu: int = 0
    sandbox: str = ""


@dataclass(frozen=True)
class IPConfig:
    address: str               # CIDR, e.g. 10.88.0.5/24
    gateway: str = ""
    interface: int | None = None  # index into Result.interfaces

    @property
    def ip(self) -> str:
        return str(ipaddress.ip_interface(self.address).ip)

    @property
    def version(self) -> str:
        return str(ipaddress.ip_interface(self.address).version)


@dataclass(frozen=True)
class Route:
    dst: str
    gw: str = ""


@dataclass(frozen=True)
class DNS:
    nameservers: tuple[str, ...] = ()
    domain: str = ""
    search: tuple[str, ...] = ()
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class Result:
    cni_version: str
    interfaces: tuple[Interface, ...] = ()
    ips: tuple[IPConfig, ...] = ()
    routes: tuple[Route, ...] = ()
    dns: DNS = field(default_factory=DNS)

    def convert_to(self, version: str) -> Result:
        if version not in SUPPORTED_VERSIONS:
            raise ResultError(f"cannot convert a result to unsupported version {version!r}")
        return Result(version, self.interfaces, self.ips, self.routes, self.dns)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cniVersion": self.cni_version}
        if self.interfaces:
            out["interfaces"] = [
                {k: v for k, v in (("name", i.name), ("mac", i.mac), ("mtu", i.mtu), ("sandbox", i.sandbox)) if v}
                for i in self.interfaces]
        if self.ips:
            legacy = version_tuple(self.cni_version) < (1, 0, 0)
            ips = []
            for ip in self.ips:
                entry: dict[str, Any] = {"address": ip.address}
                if legacy:
                    entry["version"] = ip.version
                if ip.gateway:
                    entry["gateway"] = ip.gateway
                if ip.interface is not None:
                    entry["interface"] = ip.interface
                ips.append(entry)
            out["ips"] = ips
        if self.routes:
            out["routes"] = [{"dst": r.dst, **({"gw": r.gw} if r.gw else {})} for r in self.routes]
        dns = {k: (list(v) if isinstance(v, tuple) else v) for k, v in
               (("nameservers", self.dns.nameservers), ("domain", self.dns.domain),
                ("search", self.dns.search), ("options", self.dns.options)) if v}
        if dns:
            out["dns"] = dns
        return out


def parse_result(data: Any, default_version: str = "") -> Result:
    """A result as a plugin printed it (any supported version)."""
    if not isinstance(data, dict):
        raise ResultError("a CNI result must be a JSON object")
    version = str(data.get("cniVersion") or default_version)
    if version not in SUPPORTED_VERSIONS:
        raise ResultError(f"unsupported CNI result version {version!r} (supported: {', '.join(SUPPORTED_VERSIONS)})")
    try:
        interfaces = tuple(Interface(str(i.get("name", "")), str(i.get("mac", "")), int(i.get("mtu", 0) or 0),
                                     str(i.get("sandbox", ""))) for i in data.get("interfaces") or [])
        ips = []
        for ip in data.get("ips") or []:
            ipaddress.ip_interface(ip["address"])  # validates
            idx = ip.get("interface")
            ips.append(IPConfig(str(ip["address"]), str(ip.get("gateway", "")), int(idx) if idx is not None else None))
        routes = tuple(Route(str(r["dst"]), str(r.get("gw", ""))) for r in data.get("routes") or [])
        d = data.get("dns") or {}
        dns = DNS(tuple(d.get("nameservers") or ()), str(d.get("domain", "")), tuple(d.get("search") or ()),
                  tuple(d.get("options") or ()))
    except (KeyError, TypeError, ValueError) as err:
        raise ResultError(f"malformed CNI result: {err}") from None
    return Result(version, interfaces, tuple(ips), routes, dns)
