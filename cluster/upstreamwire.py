"""Extract upstream Kubernetes' protobuf wire layout into protos/upstream/wire.json.

    python -m cluster.upstreamwire --mirror /work/.mirror   # snapshots of kubernetes/api,
                                                       # apimachinery, apiextensions-apiserver,
                                                       # kube-aggregator and google/gnostic-models
                                                       # (git dirs)

Clients that speak Kubernetes' protobuf (client-go with ContentType protobuf, kubectl's
create commands) number fields as upstream's generated.proto files do, and those numbers
are not the ones of this project's messages for every kind. The apiserver transcodes
between the two through Kubernetes JSON, which both sides share; what it needs of upstream
is, per message: each field's number, wire type, whether it repeats or is a map, its JSON
name where the Go tag differs from the proto name (`$ref`, `x-kubernetes-*`), and the
fields Go embeds (`Volume.volumeSource`: flattened into the parent in JSON). That is what
this writes, for the messages the served kinds reach, from upstream's own .proto files
(compiled with protoc) and Go types (for the JSON tags). Nothing here runs at serving
time; the JSON it writes is committed.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2

OUT = Path(__file__).resolve().parents[1] / "protos" / "upstream" / "wire.json"

# repository snapshot -> (path prefix in it, Go import path the .proto files live under)
_SOURCES = {
    "kubernetes+api": ("", "k8s.io/api"),
    "kubernetes+apimachinery": ("", "k8s.io/apimachinery"),
    "kubernetes+apiextensions-apiserver": ("", "k8s.io/apiextensions-apiserver"),
    "kubernetes+kube-aggregator": ("", "k8s.io/kube-aggregator"),
    # gnostic's OpenAPI v2 model: /openapi/v2 in protobuf, as client-go asks for it
    "google+gnostic-models": ("", "github.com/google/gnostic-models"),
}

# group -> proto package of its v1-ish versions (the version is appended)
_PACKAGES = {"": "k8s.io.api.core", "apiextensions.k8s.io": "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions",
             "apiregistration.k8s.io": "k8s.io.kube_aggregator.pkg.apis.apiregistration",
             "meta.k8s.io": "k8s.io.apimachinery.pkg.apis.meta"}
_META = "k8s.io.apimachinery.pkg.apis.meta.v1"

# Kinds sent or answered that are no resource of the scheme.
_EXTRA_KINDS = [
    ("v1", "Binding"), ("policy/v1", "Eviction"), ("policy/v1beta1", "Eviction"),
    ("authentication.k8s.io/v1", "TokenRequest"), ("authentication.k8s.io/v1", "TokenReview"),
    ("authentication.k8s.io/v1", "SelfSubjectReview"), ("autoscaling/v1", "Scale"),
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"), ("authorization.k8s.io/v1", "SubjectAccessReview"),
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview"), ("authorization.k8s.io/v1", "SelfSubjectRulesReview"),
]
_META_KINDS = ["Status", "DeleteOptions", "WatchEvent"]


def package_of(api_version: str) -> str:
    group, _, version = api_version.rpartition("/")
    if group in _PACKAGES:
        return f"{_PACKAGES[group]}.{version}"
    return f"k8s.io.api.{group.split('.')[0]}.{version}"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={repo}", *args], check=True, capture_output=True, text=True).stdout


def _checkout(mirror: Path, tree: Path) -> dict[str, str]:
    """Every generated.proto and types*.go of the snapshots under tree/<Go import path>;
    returns the commit of each snapshot."""
    commits = {}
    for name, (prefix, import_path) in _SOURCES.items():
        repo = mirror / name / "repo"
        commits[import_path] = _git(repo, "rev-parse", "HEAD").strip()
        for path in _git(repo, "ls-tree", "-r", "--name-only", "HEAD").splitlines():
            if not path.startswith(prefix) or "/testdata/" in path or path.startswith("vendor/"):
                continue
            if path.endswith(("generated.proto", "OpenAPIv2.proto")) or (
                    re.search(r"/types[\w]*\.go$", path) and not path.endswith("_test.go")):
                dest = tree / import_path / path[len(prefix):]
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text(_git(repo, "show", f"HEAD:{path}"))
    return commits


def _descriptors(tree: Path) -> dict[str, descriptor_pb2.DescriptorProto]:
    import grpc_tools
    from grpc_tools import protoc

    # every version: a v1 message may hold an alpha one (a pod's scheduling group)
    files = sorted(str(p.relative_to(tree)) for p in [*tree.rglob("generated.proto"), *tree.rglob("OpenAPIv2.proto")])
    out = tree / "set.pb"
    include = Path(grpc_tools.__file__).parent / "_proto"
    args = [f"-I{tree}", f"-I{include}", f"--descriptor_set_out={out}", "--include_imports", *files]
    if protoc.main(["protoc", *args]) != 0:
        raise SystemExit("protoc failed")
    fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    messages: dict[str, descriptor_pb2.DescriptorProto] = {}

    def add(prefix: str, msg: descriptor_pb2.DescriptorProto) -> None:
        messages[f"{prefix}.{msg.name}"] = msg
        for nested in msg.nested_type:
            add(f"{prefix}.{msg.name}", nested)

    for f in fds.file:
        for msg in f.message_type:
            add(f.package, msg)
    return messages


_STRUCT = re.compile(r"^type (\w+) struct \{")
_FIELD = re.compile(r"^\t(?:(\w+)\s+)?(\*?[\w.\[\]*]+)\s+`([^`]*)`")
_TAG = re.compile(r'(\w+):"([^"]*)"')


def _go_tags(tree: Path) -> tuple[dict[str, dict[int, str]], dict[str, set[int]], set[str], dict[str, set[int]]]:
    """From the Go types: per message, the JSON name of each field number whose Go tag
    differs from the proto name; the embedded (inline) field numbers; the messages that are
    a Go slice of strings (`type ExtraValue []string`: a list in JSON); the field numbers
    whose zero counts — Go pointers (on the wire only when set: a zero there is a value,
    where a non-pointer's zero is Go writing every field) and fields without omitempty
    (Go's JSON writes them zero too)."""
    json_names: dict[str, dict[int, str]] = {}
    inline: dict[str, set[int]] = {}
    pointers: dict[str, set[int]] = {}
    slices: set[str] = set()
    for go in tree.rglob("*.go"):
        package = str(go.parent.relative_to(tree)).replace("/", ".").replace("-", "_")
        struct = None
        for line in go.read_text().splitlines():
            if m := re.match(r"^type (\w+) \[\]string$", line):
                slices.add(f"{package}.{m.group(1)}")
            if m := _STRUCT.match(line):
                struct = f"{package}.{m.group(1)}"
                continue
            if line.startswith("}"):
                struct = None
                continue
            if struct is None or not (m := _FIELD.match(line)):
                continue
            tags = dict(_TAG.findall(m.group(3)))
            if "protobuf" not in tags:
                continue
            number = int(tags["protobuf"].split(",")[1])
            json_name = tags.get("json", "").split(",")[0]
            # kept on the wire and in JSON alike: pointers (set or absent), and fields Go's
            # JSON writes even when zero (no omitempty)
            if m.group(2).startswith("*") or "omitempty" not in tags.get("json", "").split(",")[1:]:
                pointers.setdefault(struct, set()).add(number)
            if m.group(1) is None and json_name == "":
                inline.setdefault(struct, set()).add(number)
            elif json_name and json_name != "-":
                json_names.setdefault(struct, {})[number] = json_name
    return json_names, inline, slices, pointers


def _kinds() -> list[tuple[str, str]]:
    from kubeling.scheme import BUILTIN

    kinds: list[tuple[str, str]] = []
    for r in BUILTIN:
        kinds += [(r.api_version, r.kind), (r.api_version, f"{r.kind}List")]
    return kinds + _EXTRA_KINDS


def layout(mirror: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp)
        commits = _checkout(mirror, tree)
        messages = _descriptors(tree)
        json_names, inline, slices, pointers = _go_tags(tree)
    roots: dict[str, str] = {}
    for api_version, kind in _kinds():
        name = f"{package_of(api_version)}.{kind}"
        if name not in messages:
            raise SystemExit(f"upstream has no message {name} for {api_version} {kind}")
        roots[f"{api_version}/{kind}"] = name
    for kind in _META_KINDS:
        roots[f"v1/{kind}"] = roots[f"meta.k8s.io/v1/{kind}"] = f"{_META}.{kind}"
    roots["runtime/Unknown"] = "k8s.io.apimachinery.pkg.runtime.Unknown"
    roots["openapi/v2"] = "openapi.v2.Document"
    out: dict[str, Any] = {}
    todo = list(roots.values())
    while todo:
        name = todo.pop()
        if name in out:
            continue
        msg = messages[name]
        fields = []
        for f in msg.field:
            entry: list[Any] = [f.name, f.number, f.type, f.label == f.LABEL_REPEATED]
            type_name = f.type_name.lstrip(".")
            extra: dict[str, Any] = {}
            if type_name:
                extra["message"] = type_name
                todo.append(type_name)
            json_name = json_names.get(name, {}).get(f.number)
            if json_name and json_name != f.name:
                extra["json"] = json_name
            if f.number in inline.get(name, set()):
                extra["inline"] = True
            if f.number in pointers.get(name, set()):
                extra["zero"] = True  # a zero is a value: kept
            entry.append(extra)
            fields.append(entry)
        record: dict[str, Any] = {"fields": fields}
        if msg.options.map_entry:
            record["map"] = True
        if name in slices:
            record["slice"] = True
        out[name] = record
    return {"_source": {"generated_by": "python -m cluster.upstreamwire", "commits": commits},
            "kinds": dict(sorted(roots.items())), "messages": dict(sorted(out.items()))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", type=Path, required=True, help="the directory holding the snapshots")
    args = parser.parse_args(argv)
    data = layout(args.mirror)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(data, indent=None, separators=(",", ":"), sort_keys=False) + "\n")
    print(f"{OUT}: {len(data['messages'])} messages, {len(data['kinds'])} kinds", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
