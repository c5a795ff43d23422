"""The pod status the kubelet reports: phases as getPhase, conditions, back-off states."""

from __future__ import annotations

from pathlib import Path

from kubelet.runtime import EXITED, RUNNING, ContainerInfo, PodRuntimeStatus, SandboxInfo
from kubelet.status import StatusInputs, generate_pod_status, qos_class
from protos.kubeling.v1 import core_pb2, meta_pb2


def _pod(policy: str = "Always", init: bool = False, **resources: dict[str, str]) -> core_pb2.Pod:
    container = core_pb2.Container(name="a", image="busybox",
                                   resources=core_pb2.ResourceRequirements(**resources))
    return core_pb2.Pod(metadata=meta_pb2.ObjectMeta(name="p", namespace="ns", uid="u1"),
                        spec=core_pb2.PodSpec(containers=[container], restartPolicy=policy,
                                              initContainers=[core_pb2.Container(name="i", image="busybox")]
                                              if init else []))


def _state(*containers: ContainerInfo, ready: bool = True) -> PodRuntimeStatus:
    return PodRuntimeStatus("u1", [SandboxInfo("s1", ready, 0, 1, ip="10.1.0.5", ips=["10.1.0.5"])],
                            list(containers))


def _inputs(**kw: object) -> StatusInputs:
    return StatusInputs(node_ip="127.0.0.1", **kw)  # type: ignore[arg-type]


def test_running_pod_is_ready_with_ip_and_conditions() -> None:
    status = generate_pod_status(_pod(), _state(ContainerInfo("c1", "a", RUNNING, 1, started_at=2_000_000_000)),
                                 _inputs())
    assert status.phase == "Running" and status.podIP == "10.1.0.5" and status.hostIP == "127.0.0.1"
    assert {c.type: c.status for c in status.conditions} == {
        "PodReadyToStartContainers": "True", "Initialized": "True", "ContainersReady": "True", "Ready": "True"}
    cs = status.containerStatuses[0]
    assert cs.ready and cs.started and cs.containerID == "kubeling://c1" and cs.state.running.startedAt.seconds == 2


def test_phases_by_restart_policy() -> None:
    exited = {code: ContainerInfo("c1", "a", EXITED, 1, exit_code=code) for code in (0, 1)}
    assert generate_pod_status(_pod("Never"), _state(exited[1]), _inputs()).phase == "Failed"
    assert generate_pod_status(_pod("Never"), _state(exited[0]), _inputs()).phase == "Succeeded"
    assert generate_pod_status(_pod("OnFailure"), _state(exited[0]), _inputs()).phase == "Succeeded"
    assert generate_pod_status(_pod("OnFailure"), _state(exited[1]), _inputs()).phase == "Running"
    assert generate_pod_status(_pod("Always"), _state(exited[0]), _inputs()).phase == "Running"
    assert generate_pod_status(_pod(), _state(), _inputs()).phase == "Pending"
    terminal = generate_pod_status(_pod(), _state(exited[0]), _inputs(terminal=True))
    assert terminal.phase == "Succeeded"


def test_waiting_reason_keeps_the_last_run_as_last_state() -> None:
    state = _state(ContainerInfo("c2", "a", EXITED, 2, exit_code=3, restart_count=2))
    status = generate_pod_status(_pod(), state, _inputs(waiting={"a": ("CrashLoopBackOff", "back-off 20s")}))
    cs = status.containerStatuses[0]
    assert cs.state.waiting.reason == "CrashLoopBackOff" and cs.lastState.terminated.exitCode == 3
    assert cs.restartCount == 2 and status.phase == "Running"


def test_init_containers_pending_then_initialized() -> None:
    pod = _pod(init=True)
    pending = generate_pod_status(pod, _state(ContainerInfo("i1", "i", RUNNING, 1, init=True)), _inputs())
    assert pending.phase == "Pending"
    assert pending.containerStatuses[0].state.waiting.reason == "PodInitializing"
    assert {c.type: c.reason for c in pending.conditions}["Initialized"] == "ContainersNotInitialized"
    failed = generate_pod_status(_pod("Never", init=True), _state(ContainerInfo("i1", "i", EXITED, 1, exit_code=1,
                                                                                init=True)), _inputs())
    assert failed.phase == "Failed"


def test_readiness_verdict_and_transition_times_kept() -> None:
    state = _state(ContainerInfo("c1", "a", RUNNING, 1))
    pod = _pod()
    pod.spec.containers[0].readinessProbe.exec.command.append("true")
    unready = generate_pod_status(pod, state, _inputs(ready={"c1": False}))
    assert {c.type: c.status for c in unready.conditions}["Ready"] == "False"
    pod.status.CopyFrom(unready)
    again = generate_pod_status(pod, state, _inputs(ready={"c1": False}))
    assert again.SerializeToString(deterministic=True) == unready.SerializeToString(deterministic=True)
    ready = generate_pod_status(pod, state, _inputs(ready={"c1": True}))
    assert {c.type: c.status for c in ready.conditions}["Ready"] == "True"


def test_qos_classes() -> None:
    assert qos_class(_pod()) == "BestEffort"
    assert qos_class(_pod(requests={"cpu": "100m"})) == "Burstable"
    assert qos_class(_pod(requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1Gi"})) == \
        "Guaranteed"



def test_oom_score_adjustment_by_qos() -> None:
    from kubelet.qos import oom_score_adj
    gi = 1024 ** 3
    guaranteed = _pod(requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1Gi"})
    assert oom_score_adj(guaranteed, guaranteed.spec.containers[0], 8 * gi) == -997
    best_effort = _pod()
    assert oom_score_adj(best_effort, best_effort.spec.containers[0], 8 * gi) == 1000
    burstable = _pod(requests={"memory": "2Gi"})
    assert oom_score_adj(burstable, burstable.spec.containers[0], 8 * gi) == 750
    huge = _pod(requests={"memory": "16Gi"})
    assert oom_score_adj(huge, huge.spec.containers[0], 8 * gi) == 2


def test_oom_score_floor_without_cap_sys_resource(tmp_path: Path) -> None:
    from kubelet.qos import oom_score_adj, oom_score_floor
    status, own = tmp_path / "status", tmp_path / "oom_score_adj"
    own.write_text("0\n")
    status.write_text("CapEff:\t000001fffeffffff\n")  # no CAP_SYS_RESOURCE (bit 24)
    assert oom_score_floor(status, own) == 0
    status.write_text("CapEff:\t000001ffffffffff\n")
    assert oom_score_floor(status, own) == -1000
    guaranteed = _pod(requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1Gi"})
    assert oom_score_adj(guaranteed, guaranteed.spec.containers[0], 8 * 1024 ** 3, floor=0) == 0
