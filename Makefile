# pqshake: two commands on a fresh machine — `make demo` and `make test`. Everything else is
# what those two are made of. Builds of the pinned crypto stack are cached outside the clone
# ($PQS_CACHE, default ~/.cache/pqshake), keyed by component, version and options.
SHELL := /bin/bash
.DEFAULT_GOAL := help

TOP    := $(abspath .)
BUILD  := $(TOP)/build
VENV   := $(TOP)/.venv
PY     := $(VENV)/bin/python
PQS    := $(VENV)/bin/pqshake
EXP    ?= experiments/demo.yaml
export PQS_BUILD := $(BUILD)

.PHONY: help deps system system-test build venv test test-c test-py test-host test-netem netem-lane bench demo run figures analyze reproduce clean distclean asan check-profiles schema net-check

help:
	@echo "make demo    install what is missing, build, run the demo matrix, write figures"
	@echo "make run EXP=experiments/x.yaml    run an experiment matrix (results/<name>/<id>/)"
	@echo "make figures RUN=results/<name>/<id>    summary tables and figures of a run"
	@echo "make reproduce NAME=paquin2020 [QUICK=1]    rerun a published result, ours beside theirs (pqshake reproduce --list)"
	@echo "make test    install what is missing (the test lab too), build, run every lane to its end: one line per lane, totals last"
	@echo "make bench   benchmarks (configured vs achieved, ratios vs a reference)"
	@echo "make deps    system packages to build and run + the pinned OpenSSL/liboqs/oqs-provider, relic/bfe-bf (cached outside the clone)"
	@echo "make system-test    the test lab's packages too (clang, user-mode Linux, Slurm, podman, tshark): make test does it"
	@echo "make build   the C programs into build/bin"
	@echo "make clean   remove build/ (not the cache); 'pqshake clean' removes dead runs' leftovers"

# What building and running need (make demo); the test lab (make test) on top: see the script.
system:
	@bash scripts/install-system-packages.sh

system-test:
	@bash scripts/install-system-packages.sh --test

# The pinned stack: versions and sha256 in testbed/deps/versions.env.
deps: system
	@bash testbed/deps/build-stack.sh $(BUILD)/deps.mk

venv: system
	@bash scripts/setup-python.sh

build: deps
	@$(MAKE) --no-print-directory -C testbed BUILD=$(BUILD)
	@$(MAKE) --no-print-directory -C emulation/linkemu BUILD=$(BUILD)
	@$(MAKE) --no-print-directory -C emulation/capture BUILD=$(BUILD)
	@$(MAKE) --no-print-directory -C emulation/uml BUILD=$(BUILD)

asan: system-test deps
	@$(MAKE) --no-print-directory -C testbed BUILD=$(BUILD) asan
	@$(MAKE) --no-print-directory -C emulation/linkemu BUILD=$(BUILD) asan
	@$(MAKE) --no-print-directory -C emulation/capture BUILD=$(BUILD) asan

# Every lane runs to its end whatever the others did, then one line per lane and the totals
# (scripts/test-lanes.sh); make test fails if any lane failed. One lane after another: with the
# netem lane's user-mode Linux beside them (test-lanes.sh --beside), the host lanes' timing tests
# (pqs-linkemu at 100 Mbit/s, the validity verdicts, mutual TLS at 50 ms) failed on a 2-vCPU VM.
# The container image the host lane's test_container.py runs is built from the start at nice 19
# (--prepare), mostly on the CPU the netem lane's user-mode Linux leaves idle, hence that lane
# first: a cold make test no longer waits about 5 minutes for it in line. Not when PYTEST_ARGS
# picks tests: they may not need the image.
test: system-test build asan venv
	@bash scripts/test-lanes.sh $(if $(PYTEST_ARGS),,--prepare podman-build) test-c netem-lane test-host

# The C unit tests: the testbed's and pqs-linkemu's, both run whatever the first gave.
test-c:
	@rc=0; \
	$(MAKE) --no-print-directory -C testbed BUILD=$(BUILD) check || rc=1; \
	$(MAKE) --no-print-directory -C emulation/linkemu BUILD=$(BUILD) check || rc=1; \
	exit $$rc

# Two pytest lanes: everything but the netem backend here (test-host); the netem tests where a
# kernel has sch_netem (this one if it does, else a user-mode Linux kernel booted for them:
# docs/netem-in-uml.md). PYTEST_ARGS goes to both (e.g. PYTEST_ARGS="-x -k rtt").
export PYTEST_ARGS
test-host:
	@$(PY) -m pytest -m "not netem" $(PYTEST_ARGS)

netem-lane:
	@$(PQS) uml run --unless-netem -- $(PY) -m pytest -m netem $(PYTEST_ARGS)

test-py:
	@bash scripts/test-lanes.sh test-host netem-lane

test-netem: system-test build venv
	@$(MAKE) --no-print-directory netem-lane

bench: build venv
	@$(PY) bench/run_all.py

# The demo: everything from a fresh machine to figures. The run directory is printed; the
# figures land in RUN/figures/.
demo: build venv
	@$(PQS) doctor
	@$(PQS) run $(EXP) --yes
	@$(MAKE) --no-print-directory figures RUN="$$($(PQS) ls --latest $$($(PY) -c 'import sys,yaml;print(yaml.safe_load(open(sys.argv[1]))["name"])' $(EXP)))"

run: build venv
	@$(PQS) run $(EXP) $(if $(YES),--yes)

figures: venv
	@test -n "$(RUN)" || { echo "make figures: give RUN=results/<name>/<id> (see: $(PQS) ls)"; exit 2; }
	@$(PQS) figures $(RUN)

# A published result rerun: run, analyse, RUN/analysis/reproduction.md (docs/reproductions.md).
reproduce: build venv
	@test -n "$(NAME)" || { echo "make reproduce: give NAME=<reproduction> (see: $(PQS) reproduce --list)"; exit 2; }
	@$(PQS) reproduce $(NAME) $(if $(QUICK),--quick) $(if $(YES),--yes)

analyze: venv
	@test -n "$(RUN)" || { echo "make analyze: give RUN=results/<name>/<id> (see: $(PQS) ls)"; exit 2; }
	@$(PQS) analyze $(RUN)

check-profiles: venv
	@$(PY) -m pytest -q tests/emulation -m "not netns"

schema: venv
	@$(PQS) net schema --write

net-check: build venv
	@test -n "$(PROFILE)" || { echo "make net-check: give PROFILE=<name or file>"; exit 2; }
	@$(PQS) net check $(PROFILE)

clean:
	rm -rf $(BUILD)

distclean: clean
	rm -rf $(VENV)

# ---------------------------------------------------------------------------------- Docker --
# make docker-build; make docker-run EXP=experiments/demo.yaml (results land in ./results, owned
# by you). Privileges: NET_ADMIN (veths, qdiscs, addresses) + SYS_ADMIN (ip netns add / mnexec:
# unshare + bind mounts) + SYS_NICE (SCHED_FIFO for pqs-linkemu's timing);
# systempaths=unconfined because Docker mounts /proc/sys read-only and every namespace gets its
# own sysctls (tcp_no_metrics_save, buffers, IPv6 off); apparmor=unconfined because Docker's
# AppArmor profile denies the mounts 'ip netns add' makes (no effect on hosts without AppArmor).
# Not --privileged: no host devices, no other capabilities. DOCKER_PRIVS=--privileged overrides.
IMAGE        ?= pqshake:local
DOCKER       ?= docker
DOCKER_PRIVS ?= --cap-add NET_ADMIN --cap-add SYS_ADMIN --cap-add SYS_NICE \
                --security-opt systempaths=unconfined --security-opt apparmor=unconfined

.PHONY: docker-build docker-run
docker-build:
	DOCKER_BUILDKIT=1 $(DOCKER) build -f docker/Dockerfile -t $(IMAGE) .

docker-run:
	@test -f "$(EXP)" || { echo "make docker-run: EXP=$(EXP): no such file"; exit 2; }
	@mkdir -p results
	$(DOCKER) run --rm --init $$(test -t 0 && echo -it) $(DOCKER_PRIVS) \
	  -e PQS_UID=$$(id -u) -e PQS_GID=$$(id -g) \
	  -v "$(TOP)/results:/results" -v "$(abspath $(dir $(EXP))):/exp:ro" \
	  $(IMAGE) run /exp/$(notdir $(EXP)) --yes

# The same image with podman and no registry (a debootstrap base, podman storage under
# $PQS_CACHE/podman): docker/README.md. make podman-run EXP=... as make docker-run.
.PHONY: podman-build podman-run
podman-build:
	@bash docker/podman-build.sh

podman-run:
	@test -f "$(EXP)" || { echo "make podman-run: EXP=$(EXP): no such file"; exit 2; }
	@mkdir -p results
	bash docker/podman-run.sh localhost/pqshake:local -- -e PQS_UID=$$(id -u) -e PQS_GID=$$(id -g) \
	  -v "$(TOP)/results:/results" -v "$(abspath $(dir $(EXP))):/exp:ro" -- run /exp/$(notdir $(EXP)) --yes
