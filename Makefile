# The two commands of the README. Both install what they need first (idempotent).
VENV ?= .venv
PYTEST_ARGS ?=
RUN_ARGS ?=     # e.g. `make run RUN_ARGS=--fresh`

.PHONY: install run test bench clean

install:
	bash deploy/install.sh

# The embedded default: a local real cluster, the monitor on it, metrics and Prometheus up.
run: install
	$(VENV)/bin/kmon run --fast $(RUN_ARGS)

test: install
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

# one benchmark per run, e.g. `make bench BENCH="zk --partitions 1000,10000"` (see bench/README.md)
BENCH ?= scrape
bench: install
	$(VENV)/bin/pip install -q --disable-pip-version-check -c constraints.txt -e '.[bench]'
	$(VENV)/bin/python -m bench $(BENCH)

clean:
	-$(VENV)/bin/kmon stack down --purge
	rm -rf $(VENV) .pytest_cache
