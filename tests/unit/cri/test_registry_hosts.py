"""Registry hosts in containerd's hosts.toml layout: lookup order, mirrors, defaults,
capabilities, TLS settings, Docker-style certificates and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from cri.images.hosts import HostsConfigError, RegistryHost, RegistryHosts


def _write(root: Path, namespace: str, text: str) -> Path:
    directory = root / namespace
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "hosts.toml").write_text(text)
    return directory


def test_defaults_without_configuration(tmp_path: Path) -> None:
    hosts = RegistryHosts(None, insecure_registries=("reg.lan:5000",))
    assert [h.url for h in hosts.hosts_for("docker.io")] == ["https://registry-1.docker.io"]
    assert [h.url for h in hosts.hosts_for("quay.io")] == ["https://quay.io"]
    assert [h.url for h in hosts.hosts_for("127.0.0.1:5000")] == ["http://127.0.0.1:5000"]
    assert [h.url for h in hosts.hosts_for("reg.lan:5000")] == ["http://reg.lan:5000"]
    assert RegistryHosts(tmp_path).hosts_for("quay.io") == [RegistryHost("https://quay.io")]


def test_mirrors_in_order_then_the_server(tmp_path: Path) -> None:
    directory = _write(tmp_path, "gcr.io", '''
server = "https://gcr.io"

[host."http://10.0.0.5:5000/v2/gcr.io"]
  capabilities = ["pull", "resolve"]
  override_path = true
  [host."http://10.0.0.5:5000/v2/gcr.io".header]
    x-custom = ["a", "b"]

[host."mirror.internal"]
  capabilities = ["pull"]
  ca = "mirror.crt"
  client = [["client.cert", "/abs/client.key"]]
  skip_verify = true
''')
    first, second, server = RegistryHosts(tmp_path).hosts_for("gcr.io")
    assert first.api("team/app/manifests/v1") == "http://10.0.0.5:5000/v2/gcr.io/team/app/manifests/v1?ns=gcr.io"
    assert first.headers == (("x-custom", "a"), ("x-custom", "b")) and first.plain_http
    assert second.url == "https://mirror.internal" and second.capabilities == {"pull"}
    assert second.ca_files == (str(directory / "mirror.crt"),)
    assert second.client_certs == ((str(directory / "client.cert"), "/abs/client.key"),)
    assert second.ssl_context() is False  # skip_verify
    assert server.url == "https://gcr.io" and server.api("x/manifests/y") == "https://gcr.io/v2/x/manifests/y"
    assert server.capabilities == {"pull", "resolve", "push"} and not server.mirror_of


def test_lookup_order_port_forms_and_default(tmp_path: Path) -> None:
    _write(tmp_path, "_default", '[host."http://cache.lan"]\n')
    _write(tmp_path, "reg.io_5000_", 'server = "https://first-form"\n')
    _write(tmp_path, "reg.io:5000", 'server = "https://second-form"\n')
    assert RegistryHosts(tmp_path).hosts_for("reg.io:5000")[-1].url == "https://first-form"
    (tmp_path / "reg.io_5000_" / "hosts.toml").unlink()
    assert RegistryHosts(tmp_path).hosts_for("reg.io:5000")[-1].url == "https://second-form"
    # _default serves the rest, with each registry as its own server and the ns parameter.
    mirror, server = RegistryHosts(tmp_path).hosts_for("quay.io")
    assert mirror.api("a/blobs/d") == "http://cache.lan/v2/a/blobs/d?ns=quay.io"
    assert server.url == "https://quay.io"


def test_docker_style_certificates(tmp_path: Path) -> None:
    directory = tmp_path / "secure.lan"
    directory.mkdir()
    (directory / "ca.crt").write_text("")
    (directory / "me.cert").write_text("")
    (directory / "me.key").write_text("")
    [host] = RegistryHosts(tmp_path).hosts_for("secure.lan")
    assert host.url == "https://secure.lan"
    assert host.ca_files == (str(directory / "ca.crt"),)
    assert host.client_certs == ((str(directory / "me.cert"), str(directory / "me.key")),)


def test_changes_are_read_without_a_restart(tmp_path: Path) -> None:
    hosts = RegistryHosts(tmp_path)
    assert hosts.hosts_for("gcr.io")[-1].url == "https://gcr.io"
    _write(tmp_path, "gcr.io", 'server = "http://127.0.0.1:5000"\n')
    assert hosts.hosts_for("gcr.io")[-1].url == "http://127.0.0.1:5000"


@pytest.mark.parametrize(("text", "words"), [
    ("server = [", "not TOML"),
    ('[host."http://m"]\ncapabilities = ["pull", "fly"]\n', "capabilities: must be a list"),
    ('[host."http://m"]\nskip_verify = "yes"\n', "skip_verify: must be true or false"),
    ('[host."http://m"]\nmirror = true\n', "unknown field"),
    ('[host."http://m"]\nca = 5\n', "ca: must be a path"),
    ('[host."http://m"]\nclient = [["a", "b", "c"]]\n', "neither a path nor a"),
    ("server = 5\n", "server: must be a URL"),
])
def test_bad_files_name_the_file_and_field(tmp_path: Path, text: str, words: str) -> None:
    _write(tmp_path, "bad.io", text)
    with pytest.raises(HostsConfigError, match=words) as err:
        RegistryHosts(tmp_path).hosts_for("bad.io")
    assert str(tmp_path / "bad.io" / "hosts.toml") in str(err.value)


def test_deliberate_registries_are_loopback_or_configured_ones(tmp_path: Path) -> None:
    """Those asked again for a tag already in the store: never a public registry this
    machine cannot reach, nor one that only `_default` covers."""
    _write(tmp_path, "kubeling-registry:5000", 'server = "http://172.31.16.1:5000"\n')
    _write(tmp_path, "_default", 'server = "http://127.0.0.1:5000"\n')
    hosts = RegistryHosts(tmp_path)
    assert hosts.deliberate("localhost:5000") and hosts.deliberate("127.0.0.1:41234") and hosts.deliberate("[::1]:5")
    assert hosts.deliberate("kubeling-registry:5000")
    assert not hosts.deliberate("docker.io") and not hosts.deliberate("example.com")
    assert not RegistryHosts(None).deliberate("kubeling-registry:5000")
