"""The developer's loop (not a test): `python -m bench.devloop [--rounds 2] [--mib 50]
[--json OUT.json]`, `kubeling up` run as a user runs it (its own $KUBELING_HOME and
$KUBECONFIG under a temporary directory).

- up: `kubeling up --detach` with three nodes from flags, and the same cluster from a
  config file (alternating, medians): the time until `up` returns, every node Ready; the
  ratio config/flags should be ~1 (the file makes the same plan);
- image: an image of `--mib` MiB (random, incompressible) built here as a `docker save`
  archive, into a running pod on each of 2 nodes: by `kubeling image load` (then a
  Deployment of two replicas, one per node), and by a push to the local registry (then
  the same Deployment pulling it); anchor: skopeo turning the archive into an OCI archive
  on this machine (the floor of reading and writing those bytes once).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.output import report
from cri.images.archive import write_docker_archive
from kubeling.kubeconfig import find_kubectl

_CONFIG = """\
apiVersion: kubeling.io/v1alpha1
kind: Cluster
nodes: [{}, {}, {}]
"""
_SPREAD = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: NAME}
spec:
  replicas: 2
  selector: {matchLabels: {app: NAME}}
  template:
    metadata: {labels: {app: NAME}}
    spec:
      terminationGracePeriodSeconds: 1
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - {labelSelector: {matchLabels: {app: NAME}}, topologyKey: kubernetes.io/hostname}
      containers:
      - {name: main, image: "IMAGE", imagePullPolicy: IfNotPresent, command: [/bin/busybox, sleep, "3600"]}
"""


class _Env:
    def __init__(self, work: Path) -> None:
        self.work = work
        # HOME too: kubectl's discovery cache (~/.kube/cache) stays in the run's directory
        self.env = {**os.environ, "KUBELING_HOME": str(work / "home"), "KUBECONFIG": str(work / "kubeconfig"),
                    "HOME": str(work)}
        kubectl = find_kubectl()
        if kubectl is None:
            raise SystemExit("kubectl is needed (make deps installs it)")
        self.kubectl_binary = kubectl

    def kubeling(self, *args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "cluster", *args], env=self.env, capture_output=True, text=True,
                              timeout=600, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise SystemExit(f"kubeling {' '.join(args)}: {done.stdout[-2000:]}{done.stderr[-2000:]}")
        return done.stdout

    def kubectl(self, state: Path, *args: str, stdin: str = "") -> str:
        done = subprocess.run([self.kubectl_binary, "--kubeconfig", str(state / "kubeconfig"), *args], env=self.env,
                              capture_output=True, text=True, timeout=600, input=stdin)
        if done.returncode != 0:
            raise SystemExit(f"kubectl {' '.join(args)}: {done.stderr[-2000:]}")
        return done.stdout


def _archive(path: Path, name: str, mib: int) -> None:
    """A `docker save` archive: the host's static busybox and `mib` MiB of random bytes."""
    write_docker_archive(path, name, {"payload": os.urandom(mib << 20)}, ("/bin/busybox",))


def _up_times(env: _Env, rounds: int) -> dict[str, Any]:
    config = env.work / "cluster.yaml"
    config.write_text(_CONFIG)
    times: dict[str, list[float]] = {"flags": [], "config": []}
    for i in range(rounds):
        for mode in (("flags", "config") if i % 2 == 0 else ("config", "flags")):
            state = env.work / f"up-{mode}-{i}"
            shape = ["--nodes", "3"] if mode == "flags" else ["--config", str(config)]
            started = time.monotonic()
            env.kubeling("up", "--detach", "--state-dir", str(state), *shape)
            times[mode].append(time.monotonic() - started)
            env.kubeling("down", "--state-dir", str(state))
    flags, from_file = statistics.median(times["flags"]), statistics.median(times["config"])
    return {"nodes": 3, "rounds": rounds, "flags_s": [round(t, 2) for t in times["flags"]],
            "config_s": [round(t, 2) for t in times["config"]], "flags_median_s": round(flags, 2),
            "config_median_s": round(from_file, 2), "ratio_config_to_flags": round(from_file / flags, 3)}


def _rolled_out(env: _Env, state: Path, name: str, image: str) -> None:
    env.kubectl(state, "apply", "-f", "-", stdin=_SPREAD.replace("NAME", name).replace("IMAGE", image))
    env.kubectl(state, "rollout", "status", f"deployment/{name}", "--timeout=300s")


def _image_times(env: _Env, mib: int) -> dict[str, Any]:
    archive = env.work / "big.tar"
    _archive(archive, "example.com/big:1", mib)
    started = time.monotonic()
    subprocess.run(["skopeo", "copy", "--quiet", f"docker-archive:{archive}", f"oci-archive:{env.work / 'floor.tar'}"],
                   check=True, capture_output=True, timeout=600)
    floor = time.monotonic() - started
    state = env.work / "images"
    env.kubeling("up", "--detach", "--state-dir", str(state), "--nodes", "2")
    try:
        plan = json.loads((state / "cluster.json").read_text())
        started = time.monotonic()
        env.kubeling("image", "load", str(archive), "--state-dir", str(state))
        loaded = time.monotonic() - started
        _rolled_out(env, state, "loaded", "example.com/big:1")
        by_load = time.monotonic() - started
        started = time.monotonic()
        subprocess.run(["skopeo", "copy", "--quiet", "--dest-tls-verify=false", f"docker-archive:{archive}",
                        f"docker://localhost:{plan['registry_port']}/big:2"], check=True, capture_output=True,
                       timeout=600)
        pushed = time.monotonic() - started
        _rolled_out(env, state, "pulled", f"localhost:{plan['registry_port']}/big:2")
        by_registry = time.monotonic() - started
    finally:
        env.kubeling("down", "--state-dir", str(state))
    return {"mib": mib, "archive_bytes": archive.stat().st_size, "nodes": 2,
            "floor_skopeo_to_oci_archive_s": round(floor, 2),
            "load_s": round(loaded, 2), "load_to_running_on_2_nodes_s": round(by_load, 2),
            "push_s": round(pushed, 2), "push_to_running_on_2_nodes_s": round(by_registry, 2),
            "load_to_running_vs_floor": round(by_load / floor, 2),
            "push_to_running_vs_floor": round(by_registry / floor, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.devloop", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="`up`s per way (flags, config file)")
    parser.add_argument("--mib", type=int, default=50, help="the image's size")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kubeling-devloop-") as tmp:
        env = _Env(Path(tmp))
        result = {"benchmark": "devloop", "up": _up_times(env, args.rounds), "image": _image_times(env, args.mib)}
    report(result, args.json)


if __name__ == "__main__":
    main()
