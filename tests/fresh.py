"""The README's quick start on a fresh Debian 12, for real: `make test-fresh`
(`python -m tests.fresh [--keep]`).

A minbase Debian 12 (mmdebstrap, as a fresh machine has it: Python 3.11.2 only once apt
installs it, no make, no curl, no kubectl) runs in a container with this repository's
committed files (`git archive HEAD`) in its working directory. The quick start's
commands run there exactly as the README writes them, in order: the first block (`make
up` in the background, as a shell that keeps it in the foreground would; `make test`
left out: it is the suite this runs beside), then the second block up to `kubectl run`,
after which the pod must reach Running. Ctrl-C (SIGINT to `make up`'s process group)
then stops the cluster, which must take everything its pods made with it.

The container is no VM: it is unprivileged (`privileged` fails on these machines) with
the capabilities a node needs, shares the host's network (the quick start reaches apt
and PyPI; the cluster binds free loopback ports and its bridges appear here, and must
be gone at the end), and keeps its state on bind mounts (overlay on overlay fails). The
machine's CA bundle reaches pip through PIP_CERT, as a proxy-intercepted machine needs.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.dockerengine import DockerEngine, docker_engine

ROOT = Path(__file__).resolve().parents[1]
IMAGE = "kubeling-fresh:bookworm"
CA = Path("/etc/ssl/certs/ca-certificates.crt")
WORKDIR = "/root/kubeling"


def quick_start(readme: str) -> tuple[list[str], list[str]]:
    """The quick start's two shell blocks, as lists of command lines."""
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    if len(blocks) < 2:
        raise SystemExit("README: the quick start has fewer than two ```sh blocks")
    first, second = ([line for line in b.splitlines() if line.strip()] for b in blocks[:2])
    return first, second


def _fresh_image(engine: DockerEngine, work: Path) -> None:
    if engine.run("image", "inspect", IMAGE, check=False).returncode == 0:
        return
    if shutil.which("mmdebstrap") is None:
        subprocess.run(["apt-get", "install", "-y", "-qq", "mmdebstrap"], check=True,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    tar = work / "bookworm.tar"
    # merged /usr as a new installation has it (set up by mmdebstrap's hook, not the usrmerge package)
    subprocess.run(["mmdebstrap", "--variant=minbase", "--quiet", "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
                    "bookworm", str(tar)], check=True, timeout=1200)
    engine.run("import", str(tar), IMAGE)
    tar.unlink()


def _sh(engine: DockerEngine, name: str, script: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return engine.run("exec", "-w", WORKDIR, name, "bash", "-c", script, timeout=timeout, check=False)


def _host_leftovers(before: set[str]) -> list[str]:
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    names = {line.split(":")[1].strip().split("@")[0] for line in links.splitlines()}
    return sorted(names - before)


def run(keep: bool) -> int:
    work = Path(tempfile.mkdtemp(prefix="kubeling-fresh-"))
    engine = docker_engine(work)
    name = f"kubeling-fresh-{os.getpid()}"
    links_before = set(_host_leftovers(set()))
    try:
        _fresh_image(engine, work)
        (work / "root").mkdir()
        (work / "var-lib").mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--prefix=kubeling/", "HEAD"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(work / "root")], input=archive, check=True)
        engine.run("run", "-d", "--init", "--name", name, "--network", "host",
                   "--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE",
                   "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
                   "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw", "--tmpfs", "/run", "--tmpfs", "/tmp",
                   "-v", f"{work / 'root'}:/root", "-v", f"{work / 'var-lib'}:/var/lib/kubeling",
                   "-v", f"{CA}:/run/host-ca.crt:ro", "-e", "PIP_CERT=/run/host-ca.crt",
                   IMAGE, "sleep", "infinity")
        first, second = quick_start((ROOT / "README.md").read_text())
        print(f"fresh Debian: {_sh(engine, name, 'cat /etc/debian_version').stdout.strip()}", flush=True)
        up = None
        for line in first:
            if line.startswith("make test"):
                continue
            if line.startswith("make up"):
                up = line
                # In the background, in its own process group (as a terminal's job): Ctrl-C is
                # a SIGINT to that group.
                _sh(engine, name, f"setsid bash -c 'echo $$ > /tmp/up.pid; exec {line.split('#')[0].strip()}' "
                                  ">/tmp/up.log 2>&1 &")
                continue
            done = _sh(engine, name, line)
            print(f"$ {line}\n{done.stdout[-2000:]}{done.stderr[-2000:]}", flush=True)
            if done.returncode != 0:
                raise SystemExit(f"fresh: `{line}` failed ({done.returncode})")
        if up is None:
            raise SystemExit("README: the quick start's first block has no `make up`")
        # The second block, up to `kubectl run`, once `make up` says where the cluster is.
        deadline = time.monotonic() + 1500
        ready = "test -s ~/.kubeling/kubeconfig && grep -q 'kubeling is up' /tmp/up.log"
        while _sh(engine, name, ready).returncode != 0:
            log = _sh(engine, name, "cat /tmp/up.log").stdout
            if time.monotonic() > deadline or _sh(engine, name, "kill -0 $(cat /tmp/up.pid)").returncode != 0:
                raise SystemExit(f"fresh: `make up` did not bring the cluster up:\n{log[-4000:]}")
            time.sleep(2)
        print(_sh(engine, name, "tail -n 15 /tmp/up.log; .venv/bin/python --version").stdout, flush=True)
        script = []
        for line in second:
            script.append(line)
            if line.startswith("kubectl run"):
                break
        done = _sh(engine, name, "set -e\n" + "\n".join(script), timeout=300)
        print(f"$ {' ; '.join(script)}\n{done.stdout}{done.stderr}", flush=True)
        if done.returncode != 0:
            raise SystemExit("fresh: the second block failed")
        wait = _sh(engine, name, "\n".join(line for line in script if line.startswith("export")) +
                   "\nkubectl wait --for=jsonpath='{.status.phase}'=Running pod/web --timeout=300s"
                   " && kubectl get pods -o wide", timeout=360)
        print(wait.stdout + wait.stderr, flush=True)
        if wait.returncode != 0:
            raise SystemExit("fresh: the pod did not reach Running")
        print("fresh: the quick start ran a pod", flush=True)
        if keep:
            print(f"kept: container {name}, state {work}")
            return 0
        _sh(engine, name, "kill -INT -- -$(cat /tmp/up.pid)")
        deadline = time.monotonic() + 120
        while _sh(engine, name, "kill -0 $(cat /tmp/up.pid)").returncode == 0:
            if time.monotonic() > deadline:
                raise SystemExit("fresh: `make up` did not stop on Ctrl-C")
            time.sleep(1)
        print(_sh(engine, name, "tail -n 5 /tmp/up.log").stdout, flush=True)
        left = _host_leftovers(links_before)
        if left:
            raise SystemExit(f"fresh: the stopped cluster left links on the host: {left}")
        return 0
    finally:
        if not keep:
            engine.run("rm", "-f", name, check=False)
            shutil.rmtree(work, ignore_errors=True)
            engine.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true", help="leave the container and its cluster running")
    args = parser.parse_args(argv)
    return run(args.keep)


if __name__ == "__main__":
    sys.exit(main())
