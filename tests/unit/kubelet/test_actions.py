"""computePodActions as upstream decides it, from a pod and a runtime state."""

from __future__ import annotations

from kubelet.actions import compute_pod_actions
from kubelet.podconfig import container_hash
from kubelet.runtime import CREATED, EXITED, RUNNING, ContainerInfo, PodRuntimeStatus, SandboxInfo
from protos.kubeling.v1 import core_pb2, meta_pb2


def _pod(*names: str, init: tuple[str, ...] = (), policy: str = "Always") -> core_pb2.Pod:
    return core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name="p", namespace="ns", uid="u1"),
                        spec=core_pb2.PodSpec(containers=[core_pb2.Container(name=n, image="busybox") for n in names],
                                              initContainers=[core_pb2.Container(name=n, image="busybox")
                                                              for n in init],
                                              restartPolicy=policy))


def _runtime(*containers: ContainerInfo, ready: bool = True, attempt: int = 0) -> PodRuntimeStatus:
    return PodRuntimeStatus("u1", [SandboxInfo("s1", ready, attempt, 1, ip="10.0.0.2" if ready else "")],
                            sorted(containers, key=lambda c: c.created_at, reverse=True))


def _c(pod: core_pb2.Pod, name: str, state: int, created: int, exit_code: int = 0, init: bool = False,
       cid: str = "") -> ContainerInfo:
    spec = next(c for c in [*pod.spec.containers, *pod.spec.initContainers] if c.name == name)
    return ContainerInfo(cid or f"{name}-{created}", name, state, created, exit_code=exit_code, init=init,
                         hash=container_hash(spec))


def test_new_pod_creates_sandbox_and_starts_all_or_first_init() -> None:
    pod = _pod("a", "b")
    actions = compute_pod_actions(pod, PodRuntimeStatus("u1"))
    assert actions.create_sandbox and actions.kill_pod and actions.containers_to_start == ["a", "b"]
    with_init = _pod("a", init=("i1", "i2"))
    actions = compute_pod_actions(with_init, PodRuntimeStatus("u1"))
    assert actions.next_init_container == "i1" and actions.containers_to_start == []


def test_init_containers_in_order_then_app_containers() -> None:
    pod = _pod("a", init=("i1", "i2"))
    running = compute_pod_actions(pod, _runtime(_c(pod, "i1", RUNNING, 1, init=True)))
    assert running.nothing  # wait for it
    first_done = compute_pod_actions(pod, _runtime(_c(pod, "i1", EXITED, 1, init=True)))
    assert first_done.next_init_container == "i2"
    all_done = compute_pod_actions(pod, _runtime(_c(pod, "i1", EXITED, 1, init=True),
                                                 _c(pod, "i2", EXITED, 2, init=True)))
    assert all_done.containers_to_start == ["a"] and not all_done.next_init_container
    failed = _runtime(_c(pod, "i1", EXITED, 1, exit_code=1, init=True))
    assert compute_pod_actions(pod, failed).next_init_container == "i1"  # retried under Always
    never = _pod("a", init=("i1",), policy="Never")
    assert compute_pod_actions(never, _runtime(_c(never, "i1", EXITED, 1, exit_code=1, init=True))).kill_pod


def test_restart_policies_for_exited_containers() -> None:
    for policy, exit_code, restart in (("Always", 0, True), ("Always", 1, True), ("OnFailure", 0, False),
                                       ("OnFailure", 2, True), ("Never", 1, False), ("Never", 0, False)):
        pod = _pod("a", policy=policy)
        actions = compute_pod_actions(pod, _runtime(_c(pod, "a", EXITED, 1, exit_code=exit_code)))
        assert (actions.containers_to_start == ["a"]) is restart, (policy, exit_code)
        assert actions.kill_pod is not restart  # nothing to keep and nothing to start: the sandbox goes


def test_running_containers_are_kept_unless_a_probe_or_the_spec_says_otherwise() -> None:
    pod = _pod("a", "b")
    state = _runtime(_c(pod, "a", RUNNING, 1, cid="ca"), _c(pod, "b", RUNNING, 2, cid="cb"))
    assert compute_pod_actions(pod, state).nothing
    liveness = compute_pod_actions(pod, state, liveness_failed={"ca"})
    assert list(liveness.containers_to_kill) == ["ca"] and liveness.containers_to_start == ["a"]
    assert "failed liveness probe, will be restarted" in liveness.containers_to_kill["ca"].message
    changed = _pod("a", "b")
    changed.spec.containers[1].image = "busybox:2"
    assert compute_pod_actions(changed, state).containers_to_start == ["b"]
    created = compute_pod_actions(pod, _runtime(_c(pod, "a", RUNNING, 1), _c(pod, "b", CREATED, 2)))
    assert created.containers_to_start == ["b"]


def test_dead_sandbox_is_recreated_with_the_next_attempt_except_under_never() -> None:
    pod = _pod("a")
    dead = _runtime(_c(pod, "a", EXITED, 1, exit_code=0), ready=False, attempt=2)
    actions = compute_pod_actions(pod, dead)
    assert actions.create_sandbox and actions.attempt == 3 and actions.containers_to_start == ["a"]
    never = _pod("a", policy="Never")
    actions = compute_pod_actions(never, _runtime(_c(never, "a", EXITED, 1), ready=False, attempt=1))
    assert not actions.create_sandbox and actions.kill_pod


def _with_sidecar(policy: str = "Never", startup_probe: bool = False) -> core_pb2.Pod:
    """init: `side` (a sidecar), then `i2` (a regular init container); app: `a`."""
    pod = _pod("a", init=("side", "i2"), policy=policy)
    pod.spec.initContainers[0].restartPolicy = "Always"
    if startup_probe:
        pod.spec.initContainers[0].startupProbe.exec.command.append("true")
    return pod


def test_a_sidecar_starts_first_and_the_next_init_container_follows_while_it_runs() -> None:
    pod = _with_sidecar()
    assert compute_pod_actions(pod, _runtime()).next_init_container == "side"
    side = _c(pod, "side", RUNNING, 1, init=True)
    assert compute_pod_actions(pod, _runtime(side)).next_init_container == "i2"
    both = compute_pod_actions(pod, _runtime(side, _c(pod, "i2", EXITED, 2, init=True)))
    assert both.containers_to_start == ["a"] and not both.next_init_container


def test_a_sidecar_with_a_startup_probe_holds_the_next_until_started() -> None:
    pod = _with_sidecar(startup_probe=True)
    side = _c(pod, "side", RUNNING, 1, init=True, cid="side-1")
    assert compute_pod_actions(pod, _runtime(side)).nothing
    assert compute_pod_actions(pod, _runtime(side), started={"side-1"}).next_init_container == "i2"


def test_an_exited_sidecar_is_restarted_whatever_the_pods_restart_policy() -> None:
    pod = _with_sidecar(policy="Never")
    state = _runtime(_c(pod, "side", EXITED, 1, exit_code=1, init=True), _c(pod, "i2", EXITED, 2, init=True),
                     _c(pod, "a", RUNNING, 3))
    actions = compute_pod_actions(pod, state)
    assert actions.sidecars_to_start == ["side"] and not actions.kill_pod and not actions.containers_to_start


def test_the_pod_ends_when_its_app_containers_do_sidecars_running() -> None:
    pod = _with_sidecar(policy="Never")
    state = _runtime(_c(pod, "side", RUNNING, 1, init=True), _c(pod, "i2", EXITED, 2, init=True),
                     _c(pod, "a", EXITED, 3))
    assert compute_pod_actions(pod, state).kill_pod


def test_a_sidecar_failing_its_liveness_probe_is_restarted() -> None:
    pod = _with_sidecar(policy="Never")
    side = _c(pod, "side", RUNNING, 1, init=True, cid="side-1")
    state = _runtime(side, _c(pod, "i2", EXITED, 2, init=True), _c(pod, "a", RUNNING, 3))
    actions = compute_pod_actions(pod, state, liveness_failed={"side-1"})
    assert actions.containers_to_kill["side-1"].init and actions.sidecars_to_start == ["side"]
