# The two commands of the README. Both install what they need first (idempotent).
VENV ?= .venv
PYTEST_ARGS ?=
# xdist workers for `make test`, one per core: three kept both cores busy (load 20-70) and the fast
# profile's timings broke under it (bench/README.md); a module's tests stay on one worker (tests/conftest.py)
TEST_WORKERS ?= 2
RUN_ARGS ?=     # e.g. `make run RUN_ARGS=--fresh`
# Every Python process kmon and its tests start (collectors, stream apps, Spark's workers, pytest's) keeps its
# modules' bytecode: with PYTHONDONTWRITEBYTECODE set (some shells and CI images set it), each one compiled
# pyspark, pandas and pyarrow again from source, 2.6 CPU-s to import them against 0.9 (bench/NOTES.md)
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install install-test run watch test test-quick bench clean

install:
	bash deploy/install.sh

# what the tests need besides: Helm, for the chart's (built once, ~4 min)
install-test:
	bash deploy/install.sh --with-helm

# The embedded default: a local real cluster, the monitor on it, metrics and Prometheus up.
run: install
	$(VENV)/bin/kmon run --fast $(RUN_ARGS)

# Your own cluster (README: Watch your own cluster), kmon's own parts beside it.
BOOTSTRAP_SERVERS ?=
watch: install
	@test -n "$(BOOTSTRAP_SERVERS)$(CONFIG)" || { echo "make watch needs BOOTSTRAP_SERVERS=HOST:PORT[,...] (your cluster's brokers) or CONFIG=FILE (kmon's config file naming your clusters)" >&2; exit 2; }
	$(VENV)/bin/kmon run $(if $(CONFIG),--config $(CONFIG),--bootstrap-servers $(BOOTSTRAP_SERVERS)) $(RUN_ARGS)

test: install-test
	$(VENV)/bin/python -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

# the development loop: the unit tests and the short fuzz run, nothing started
test-quick: install
	$(VENV)/bin/python -m pytest -n 2 tests/unit tests/fuzz $(PYTEST_ARGS)

# one benchmark per run, e.g. `make bench BENCH="zk --partitions 1000,10000"` (see bench/README.md)
BENCH ?= scrape
bench: install
	$(VENV)/bin/pip install -q --disable-pip-version-check -c constraints.txt -e '.[bench]'
	$(VENV)/bin/python -m bench $(BENCH)

clean:
	-$(VENV)/bin/kmon stack down --purge
	rm -rf $(VENV) .pytest_cache
