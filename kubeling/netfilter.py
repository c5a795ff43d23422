"""iptables and ipset of one network namespace: this process's, or a node's (entered with
nsenter). kube-proxy and the network policy controller program their own chains through
it, each with iptables-restore --noflush (only the chains named in the input change)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

__all__ = ["Netfilter"]


@dataclass(frozen=True)
class Netfilter:
    netns: str = ""  # a network namespace's path ("": this process's)

    def run(self, args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        enter = ["nsenter", f"--net={self.netns}"] if self.netns else []
        return subprocess.run([*enter, *args], input=stdin, capture_output=True, text=True, check=False)

    def restore(self, text: str) -> None:
        """iptables-restore --noflush: the chains declared in `text` are rewritten, no others."""
        done = self.run(["iptables-restore", "-w", "--noflush"], text)
        if done.returncode != 0:
            raise RuntimeError(f"iptables-restore: {done.stderr.strip()}")

    def ipset_restore(self, text: str) -> None:
        done = self.run(["ipset", "restore"], text)
        if done.returncode != 0:
            raise RuntimeError(f"ipset restore: {done.stderr.strip()}")

    def ipsets(self, prefix: str) -> set[str]:
        """The names of the sets starting with `prefix`."""
        done = self.run(["ipset", "list", "-n"])
        return {name for name in done.stdout.split() if name.startswith(prefix)} if done.returncode == 0 else set()

    def chains(self, table: str, prefix: str) -> set[str]:
        out = self.run(["iptables-save", "-t", table]).stdout
        return {line[1:].split()[0] for line in out.splitlines() if line.startswith(":" + prefix)}

    def ensure_first(self, table: str, chain: str, rule: tuple[str, ...]) -> None:
        """`rule` (a jump) is `chain`'s first: inserted there, or moved there when another
        jump (kube-proxy's, inserted first too) got in front of it."""
        if self._is_first(table, chain, rule):
            return
        self.remove_jump(table, chain, rule)
        done = self.run(["iptables", "-w", "-t", table, "-I", chain, "1", *rule])
        if done.returncode != 0:
            raise RuntimeError(f"iptables -t {table} -I {chain}: {done.stderr.strip()}")

    def _is_first(self, table: str, chain: str, rule: tuple[str, ...]) -> bool:
        """Whether the chain's first rule jumps where `rule` does."""
        first = self.run(["iptables", "-w", "-t", table, "-S", chain, "1"]).stdout.strip()
        target = rule[rule.index("-j") + 1] if "-j" in rule else ""
        return bool(target) and first.endswith(f"-j {target}")

    def remove_jump(self, table: str, chain: str, rule: tuple[str, ...]) -> None:
        while self.run(["iptables", "-w", "-t", table, "-D", chain, *rule]).returncode == 0:
            pass
