"""CNI results across spec versions, and config parsing rules."""

from __future__ import annotations

import pytest

from cni import ConfError, ResultError, parse_conflist, parse_result

V030 = {"cniVersion": "0.3.1", "interfaces": [{"name": "eth0", "mac": "aa:bb:cc:dd:ee:ff", "sandbox": "/run/netns/x"}],
        "ips": [{"version": "4", "address": "10.1.2.3/24", "gateway": "10.1.2.1", "interface": 0},
                {"version": "6", "address": "fd00::3/64", "interface": 0}],
        "routes": [{"dst": "0.0.0.0/0", "gw": "10.1.2.1"}], "dns": {"nameservers": ["10.1.2.1"], "search": ["svc"]}}


def test_parse_and_convert_between_versions() -> None:
    r = parse_result(V030)
    assert r.cni_version == "0.3.1" and r.ips[0].ip == "10.1.2.3" and r.ips[1].version == "6"
    assert r.interfaces[0].sandbox == "/run/netns/x" and r.routes[0].gw == "10.1.2.1"
    v1 = r.convert_to("1.0.0").to_json()
    assert v1["cniVersion"] == "1.0.0" and "version" not in v1["ips"][0]
    assert v1["ips"][0] == {"address": "10.1.2.3/24", "gateway": "10.1.2.1", "interface": 0}
    back = parse_result(v1).convert_to("0.4.0").to_json()
    assert back["ips"][1]["version"] == "6" and back["dns"] == {"nameservers": ["10.1.2.1"], "search": ["svc"]}
    assert parse_result(back).convert_to("0.3.1").to_json() == {**V030, "cniVersion": "0.3.1"}


@pytest.mark.parametrize("bad", [{"cniVersion": "0.2.0"}, {"cniVersion": "1.0.0", "ips": [{"address": "nope"}]},
                                 {"cniVersion": "1.0.0", "ips": [{}]}, ["not", "an", "object"]])
def test_bad_results(bad: object) -> None:
    with pytest.raises(ResultError):
        parse_result(bad)


def test_conf_rules() -> None:
    single = parse_conflist({"cniVersion": "0.4.0", "name": "n", "type": "bridge", "bridge": "b0"})
    assert single.name == "n" and [p.type for p in single.plugins] == ["bridge"]
    assert single.raw["plugins"][0]["bridge"] == "b0"
    lst = parse_conflist({"cniVersion": "1.0.0", "name": "l", "disableCheck": True,
                          "plugins": [{"type": "bridge"}, {"type": "portmap", "capabilities": {"portMappings": True}}]})
    assert lst.disable_check and lst.plugins[1].capabilities == {"portMappings": True}
    for bad, why in (({"name": "x"}, "no 'type'"), ({"name": "x", "plugins": []}, "no plugins"),
                     ({"plugins": [{"type": "a"}]}, "no 'name'"), ({"name": "x", "plugins": [{}]}, "plugins\\[0\\]")):
        with pytest.raises(ConfError, match=why):
            parse_conflist(bad)
