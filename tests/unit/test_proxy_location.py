"""The proxy subresources' `[scheme:]name[:port]` (upstream's SplitSchemeNamePort)."""

from __future__ import annotations

import pytest

from apiserver.registry.core.proxy_location import split_scheme_name_port
from kubeling import errors


def test_names_with_schemes_and_ports() -> None:
    assert split_scheme_name_port("web") == ("", "web", "")
    assert split_scheme_name_port("web:8080") == ("", "web", "8080")
    assert split_scheme_name_port("https:web:443") == ("https", "web", "443")
    assert split_scheme_name_port("http:web:") == ("http", "web", "")
    for bad in ("a:b:c:d", "ftp:web:21", ":80", ""):
        with pytest.raises(errors.BadRequest):
            split_scheme_name_port(bad)
