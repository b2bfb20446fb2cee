# The two commands of the README. Both install what they need first (idempotent).
VENV ?= .venv
PYTEST_ARGS ?=

.PHONY: install run test bench clean

install:
	bash deploy/install.sh

# The embedded default: a local real cluster, the monitor on it, metrics and Prometheus up.
run: install
	$(VENV)/bin/kmon run --fast

test: install
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

bench: install
	$(VENV)/bin/python -m bench

clean:
	-$(VENV)/bin/kmon stack down --purge
	rm -rf $(VENV) .pytest_cache
