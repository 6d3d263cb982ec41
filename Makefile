# Thin wrappers so that people and CI run the same commands.
CARGO ?= cargo
LISTEN ?= 127.0.0.1:8080
PYTHON ?= python3
VENV ?= target/venv
PROMTOOL ?= target/tools/promtool
PROMETHEUS ?= target/tools/prometheus
DIFFERENTIAL_LISTEN ?= 127.0.0.1:8089
DIFFERENTIAL_COUNT ?= 2000

SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -ec

.PHONY: build run test soak deny e2e lint fmt demo bench bench-load bench-builds bench-instructions bench-server-instructions differential fuzz mutants manifests-check image-check dev-packages clean

build:
	$(CARGO) build --release

## Serve every hook on $(LISTEN) (HTTP) and 127.0.0.1:8443 (HTTPS, self-signed).
run:
	$(CARGO) run --release -- --log-format pretty serve --listen $(LISTEN) --tls-self-signed

## The end-to-end scenarios, which `test` and `e2e` also run with every hook at version v1.
E2E_SCENARIOS = --test e2e_delete_graph --test e2e_app_discovery --test e2e_cert_rotation

## Unit, fixture, HTTP and end-to-end tests of the whole workspace (the scenarios with v2 hooks,
## as the manifests have them, then with v1 hooks).
test: dev-packages
	@mkdir -p target
	$(CARGO) test --workspace --all-targets 2>&1 | tee target/test.log
	SIM_HOOK_VERSION=v1 $(CARGO) test $(E2E_SCENARIOS) 2>&1 | tee -a target/test.log
	@awk '/^test result:/ { p += $$4; f += $$6 } END { printf "tests: %d passed, %d failed\n", p, f }' target/test.log

## Bounded load and fault tests at full length (60 s, 256 connections).
soak: dev-packages
	SOAK_SECONDS=60 SOAK_CONNECTIONS=256 $(CARGO) test --release --test soak -- --nocapture --test-threads 1

## The simulator's own tests and the end-to-end scenarios (real server on a loopback port).
e2e: dev-packages
	$(CARGO) test --test simulator $(E2E_SCENARIOS)
	SIM_HOOK_VERSION=v1 $(CARGO) test $(E2E_SCENARIOS)

lint: dev-packages
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS='-D warnings' $(CARGO) doc --workspace --no-deps

fmt:
	$(CARGO) fmt --all

## Start the server and curl a fixture through it.
demo: build
	@./target/release/metahooks --log-format pretty serve --listen $(LISTEN) & pid=$$!; \
	trap "kill $$pid" EXIT; \
	for i in $$(seq 50); do curl -sf http://$(LISTEN)/readyz >/dev/null && break; sleep 0.1; done; \
	echo "POST /delete-graph/sync fixtures/delete-graph/sync-chain-database-running.request.json"; \
	curl -sS -H 'Content-Type: application/json' \
	  --data-binary @fixtures/delete-graph/sync-chain-database-running.request.json \
	  http://$(LISTEN)/delete-graph/sync; echo

## Criterion benches per hook beside their serde_json floor, then the hook/floor ratios.
bench: dev-packages
	$(CARGO) bench --workspace
	$(PYTHON) scripts/bench-report.py

## Dependency policy: licenses, sources and bans (cargo-deny from crates.io). The advisories
## check needs the RustSec database from GitHub: run `cargo deny check advisories` where the
## network reaches it. `cargo fetch` first: the offline check reads every package of the lock
## file, those of other platforms too, which a build on this one never downloads.
deny:
	command -v cargo-deny >/dev/null || $(CARGO) install cargo-deny --locked
	$(CARGO) fetch --locked
	$(CARGO) deny --offline check bans licenses sources

## Each controller's spec written again in Python (scripts/differential), beside the server:
## DIFFERENTIAL_COUNT random requests per comparison, the answers compared (cryptography from PyPI).
differential: $(VENV)/differential.txt
	$(CARGO) build --quiet
	@mkdir -p target
	@./target/debug/metahooks serve --listen $(DIFFERENTIAL_LISTEN) > target/differential-server.log 2>&1 & \
	pid=$$!; trap "kill $$pid" EXIT; \
	$(VENV)/bin/python scripts/differential/run.py http://$(DIFFERENTIAL_LISTEN) --count $(DIFFERENTIAL_COUNT)

$(VENV)/differential.txt: scripts/differential/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet -r $<
	cp $< $@

## Fuzz every hook entry point for FUZZ_SECONDS (default 60), seeded from fixtures/.
fuzz:
	scripts/fuzz.sh

## Mutation testing of both crates, each mutant against its own crate's tests: every mutant
## they leave alive is listed in target/mutants.out/missed.txt (cargo-mutants from crates.io;
## about two hours on 2 cores, so not in CI). SINCE=<revision> mutates only the lines of
## hooks/src and src changed since that revision (git diff; minutes for a few rounds' changes).
## Test binaries without debug info link faster.
mutants: dev-packages
	command -v cargo-mutants >/dev/null || $(CARGO) install cargo-mutants --locked
	@mkdir -p target
	$(if $(SINCE),git diff $(SINCE) -- hooks/src src > target/mutants.diff)
	CARGO_PROFILE_DEV_DEBUG=0 $(CARGO) mutants -p metahooks-hooks -p metahooks \
		--copy-target=false --output target $(if $(SINCE),--in-diff target/mutants.diff)

## Loopback load run of the sync routes, delete-graph's finalize and the admission routes against
## the release server and three floor servers (installs wrk, and h2load for H2=1).
bench-load: dev-packages
	command -v wrk >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk bc)
	command -v bc >/dev/null || apt-get install -y -qq bc
	[ "$${H2:-0}" != 1 ] || command -v h2load >/dev/null || (apt-get update -qq && apt-get install -y -qq nghttp2-client)
	scripts/bench-load.sh

## Builds of the server side by side over loopback, each against the echo and naive floors:
## BUILDS="path/to/metahooks ..." (the first is the baseline; TLS=1 over HTTPS; installs wrk).
bench-builds: dev-packages
	command -v wrk >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk)
	scripts/bench-builds.sh $(BUILDS)

## Instruction counts of every sync hook and delete-graph's finalize against their floors, under
## callgrind (installs valgrind).
bench-instructions: dev-packages
	command -v valgrind >/dev/null || (apt-get update -qq && apt-get install -y -qq valgrind bc)
	command -v bc >/dev/null || apt-get install -y -qq bc
	scripts/bench-instructions.sh

## The release server's instructions a request on every route beside the echo floor's, under
## callgrind with wrk (installs both).
bench-server-instructions: dev-packages
	command -v valgrind >/dev/null || (apt-get update -qq && apt-get install -y -qq valgrind bc)
	command -v wrk >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk bc)
	command -v bc >/dev/null || apt-get install -y -qq bc
	scripts/bench-server-instructions.sh

## Render manifests/ and validate every object offline (Kubernetes schemas, our CRD schemas,
## routes and hook kinds against `metahooks list`, webhook matchConditions against the fixtures,
## the alerts and dashboard of manifests/monitoring with promtool and prometheus). Needs kubectl
## (for kustomize), python3, and apt-get the first time (promtool and prometheus).
manifests-check: $(VENV)/installed.txt $(PROMTOOL) $(PROMETHEUS)
	$(CARGO) build --quiet
	$(VENV)/bin/python scripts/check-manifests.py manifests target/debug/metahooks $(PROMTOOL) $(PROMETHEUS)

$(VENV)/installed.txt: scripts/manifests-check-requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet -r $<
	cp $< $@

## promtool, for the alerts and the dashboard of manifests/monitoring, and prometheus, which runs
## the dashboard's queries on a scraped server: taken out of Debian's prometheus package (19 MB)
## rather than installed with it, which would bring a service, a web UI and a system user.
$(PROMTOOL) $(PROMETHEUS) &:
	mkdir -p $(@D)/prometheus-deb
	apt-get update -qq
	cd $(@D)/prometheus-deb && apt-get download prometheus
	dpkg-deb -x $(@D)/prometheus-deb/prometheus_*.deb $(@D)/prometheus-deb/root
	cp $(@D)/prometheus-deb/root/usr/bin/promtool $(PROMTOOL)
	cp $(@D)/prometheus-deb/root/usr/bin/prometheus $(PROMETHEUS)
	rm -rf $(@D)/prometheus-deb
	$(PROMTOOL) --version | head -1

## The Debian packages that the tests, examples and benches of the root package build against:
## OpenSSL's headers (libssl-dev, found by pkg-config), for the second TLS stack of the mesh in
## the cert-rotation scenarios (tests/common/mesh_tls.rs). Installed when pkg-config lacks them.
dev-packages:
	pkg-config --exists openssl 2>/dev/null \
		|| (command -v apt-get >/dev/null && apt-get update -qq && apt-get install -y -qq libssl-dev pkg-config) \
		|| { echo "make: pkg-config finds no OpenSSL: install pkg-config and OpenSSL's headers (Debian libssl-dev, Fedora openssl-devel, Homebrew openssl@3 with PKG_CONFIG_PATH=\"\$$(brew --prefix openssl@3)/lib/pkgconfig\")" >&2; exit 1; }

## Build the container image's binary (static, glibc: scripts/image-binary.sh, as the Dockerfile
## does) and run it alone in an empty root directory as the image runs it (needs root: chroot).
image-check:
	scripts/image-binary.sh target/image/metahooks
	scripts/check-image-binary.sh target/image/metahooks

clean:
	$(CARGO) clean
