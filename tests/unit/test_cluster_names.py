"""Named clusters' records and their contexts in the user's kubeconfig."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import yaml

from cluster import names
from cluster.hosts import netns_name
from kubeling.kubeconfig import merge_context, remove_context, user_kubeconfig


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KUBELING_HOME", str(tmp_path / "kl"))
    return tmp_path / "kl"


def _cluster(state: Path) -> Path:
    state.mkdir(parents=True)
    (state / "cluster.json").write_text(json.dumps({}))
    return state


@pytest.mark.parametrize("name", ["kubeling", "a", "dev-2", "x" * 32])
def test_valid_names(name: str) -> None:
    assert names.check_name(name) == name


@pytest.mark.parametrize("name", ["", "A", "dev_2", "-a", "a-", "x" * 33, "a.b"])
def test_invalid_names_say_why(name: str) -> None:
    with pytest.raises(names.ClusterNameError, match="must be a DNS label"):
        names.check_name(name)


def test_state_dirs_by_name(home: Path, tmp_path: Path) -> None:
    args = argparse.Namespace(name="", state_dir="")
    assert names.state_dir_of(args) == home  # kubeling's, where it was before names
    assert names.state_dir_of(argparse.Namespace(name="dev", state_dir="")) == home / "clusters" / "dev"
    elsewhere = _cluster(tmp_path / "elsewhere")
    names.register("dev", elsewhere)
    assert names.state_dir_of(argparse.Namespace(name="dev", state_dir="")) == elsewhere  # where it was brought up
    assert names.state_dir_of(argparse.Namespace(name="dev", state_dir=str(tmp_path / "x"))) == tmp_path / "x"
    with pytest.raises(names.ClusterNameError):
        names.state_dir_of(argparse.Namespace(name="Dev", state_dir=""))


def test_registered_skips_deleted_state(home: Path, tmp_path: Path) -> None:
    names.register("a", _cluster(tmp_path / "a"))
    names.register("b", tmp_path / "b-never-made")
    names.register("a", _cluster(tmp_path / "a2"))  # brought up again elsewhere: the record follows
    assert names.registered() == [names.Registered("a", tmp_path / "a2")]
    assert names.resolve("b") is None


def test_netns_names_keep_kubelings_and_separate_others() -> None:
    assert netns_name("node-1") == "kbh-node-1"
    assert netns_name("node-1", "dev") == "kbh-dev-node-1" != netns_name("node-1", "test")


def _standalone(path: Path, server: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "kubeling",
        "clusters": [{"name": "kubeling", "cluster": {"server": server}}],
        "contexts": [{"name": "kubeling", "context": {"cluster": "kubeling", "user": "kubeling"}}],
        "users": [{"name": "kubeling", "user": {"token": "t"}}]}))
    return path


def test_contexts_merge_beside_the_users_own_and_go_away(tmp_path: Path) -> None:
    target = tmp_path / ".kube" / "config"
    target.parent.mkdir()
    target.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "work", "preferences": {"colors": True},
        "clusters": [{"name": "work", "cluster": {"server": "https://work:6443"}}],
        "contexts": [{"name": "work", "context": {"cluster": "work", "user": "me"}}],
        "users": [{"name": "me", "user": {"token": "secret"}}]}))
    merge_context(target, "kubeling-a", _standalone(tmp_path / "a.conf", "https://10.0.0.1:1"))
    merge_context(target, "kubeling-b", _standalone(tmp_path / "b.conf", "https://10.0.0.2:2"))
    merge_context(target, "kubeling-a", _standalone(tmp_path / "a.conf", "https://10.0.0.1:3"))  # up again
    config = yaml.safe_load(target.read_text())
    assert [c["name"] for c in config["contexts"]] == ["work", "kubeling-b", "kubeling-a"]
    assert {c["name"]: c["cluster"]["server"] for c in config["clusters"]}["kubeling-a"] == "https://10.0.0.1:3"
    assert config["current-context"] == "kubeling-a" and config["preferences"] == {"colors": True}
    assert target.stat().st_mode & 0o777 == 0o600  # it holds keys

    assert remove_context(target, "kubeling-a") and not remove_context(target, "kubeling-a")
    config = yaml.safe_load(target.read_text())
    assert [c["name"] for c in config["clusters"]] == ["work", "kubeling-b"]
    assert [u["name"] for u in config["users"]] == ["me", "kubeling-b"]
    assert config["current-context"] == ""  # it was the one removed


def test_merge_refuses_a_file_that_is_not_a_kubeconfig(tmp_path: Path) -> None:
    target = tmp_path / "config"
    target.write_text("- just\n- a list\n")
    with pytest.raises(ValueError, match="not a kubeconfig"):
        merge_context(target, "kubeling-a", _standalone(tmp_path / "a.conf", "https://x:1"))
    assert target.read_text() == "- just\n- a list\n"


def test_user_kubeconfig_is_kubeconfigs_first(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path}/one:{tmp_path}/two")
    assert user_kubeconfig() == tmp_path / "one"
    monkeypatch.setenv("KUBECONFIG", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert user_kubeconfig() == tmp_path / ".kube" / "config"
