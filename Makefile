# Developer and CI entry points. `make test` is what .ci/run calls.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PYTEST := $(BIN)/pytest -q --timeout=900

.PHONY: venv test lint demo clean reliability

venv: $(VENV)/.installed

# Re-install whenever pyproject.toml changes (new dependency, new extra).
$(VENV)/.installed: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

# Fast tests first, then the ones that run real DAGs, then end-to-end.
# pytest exits 5 when a marker selects no test: that is fine for the marked groups.
# The last line adds up the three groups (from their JUnit XML), so the log ends on the real count.
RESULTS := .pytest_cache/results

define SUMMARY
import sys, xml.etree.ElementTree as ET
n = f = s = 0
for path in sys.argv[1:]:
    for suite in ET.parse(path).getroot().iter("testsuite"):
        n += int(suite.get("tests", 0))
        f += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        s += int(suite.get("skipped", 0))
print(f"tests: {n - f - s} passed, {f} failed, {s} skipped")
endef
export SUMMARY

test: venv
	@rm -rf $(RESULTS)
	$(PYTEST) --junitxml=$(RESULTS)/fast.xml -m "not dagrun and not e2e" tests
	@for marker in dagrun e2e; do \
	  echo "$(PYTEST) --junitxml=$(RESULTS)/$$marker.xml -m $$marker tests"; \
	  rc=0; $(PYTEST) --junitxml=$(RESULTS)/$$marker.xml -m $$marker tests || rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "no $$marker tests collected: fine"; \
	  elif [ $$rc -ne 0 ]; then exit $$rc; fi; \
	done
	@$(BIN)/python -c "$$SUMMARY" $(RESULTS)/*.xml

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/airflow-idempotent lint dags

# The reliability suite and its report (RELIABILITY.md): crash matrix, faults, hostile input, load.
reliability: venv
	rc=0; IDEM_RELIABILITY=1 $(PYTEST) tests/reliability || rc=$$?; \
	$(BIN)/python tools/reliability_report.py; exit $$rc

demo: venv
	$(BIN)/python -m airflow_idempotent.demo

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
