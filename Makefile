# Developer and CI entry points. `make test` is what .ci/run calls.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PYTEST := $(BIN)/pytest -q --timeout=900
# Workers for the groups whose tests share nothing (own databases, ports, homes): one per core.
JOBS ?= $(shell nproc)
# The e2e group's workers mostly wait on their own Airflow schedulers (one used 0.34 of a core over
# its file, measured), but each starts a whole deployment: four at once on 2 cores of a VM with CPU
# steal (load 7.5) left three API servers unanswered after 120 s and a CLI slower than a backfill
# in a clean-clone run, so one more worker than cores. Its longest file (the guarded month) bounds it.
E2E_JOBS ?= $(shell echo $$(( $(JOBS) + 1 )))

.PHONY: venv machine spark-jars test lint release-check docs demo clean reliability

venv: $(VENV)/.installed

# The Spark test cluster's extra jars (Delta Lake), pinned in tools/spark-jars/pom.xml and copied
# from Maven by Maven's own client into .cache/spark-jars, once (again when the POM changes).
SPARK_JARS := .cache/spark-jars
# The provider's Spark Connect command (airflow_idempotent/spark/command: a month's partition locations set in one
# catalog call), compiled against the installed pyspark's own jars: nothing downloaded.
SPARK_PLUGIN := $(SPARK_JARS)/airflow-idempotent-connect.jar
spark-jars: $(SPARK_JARS)/.copied $(SPARK_PLUGIN)

$(SPARK_JARS)/.copied: tools/spark-jars/pom.xml
	rm -rf $(SPARK_JARS)
	mvn -B -q -f tools/spark-jars/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
	  -DoutputDirectory=$(abspath $(SPARK_JARS))
	@touch $@

$(SPARK_PLUGIN): airflow_idempotent/spark/command/SetPartitionLocations.java $(SPARK_JARS)/.copied $(VENV)/.installed
	rm -rf $(SPARK_JARS)/.classes
	javac --release 17 -nowarn -d $(SPARK_JARS)/.classes \
	  -cp "$$($(BIN)/python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')/jars/*" $<
	jar cf $@ -C $(SPARK_JARS)/.classes .
	rm -rf $(SPARK_JARS)/.classes

# The Debian packages the suite drives (Chromium) and the local services it uses (PostgreSQL,
# MariaDB, Redis): installed or started when missing or down (as root; otherwise it stops and
# prints the exact command to run).
machine:
	@bash tools/machine.sh

# Re-install whenever pyproject.toml changes (new dependency, new extra). uv (from PyPI, through
# pip) resolves and installs the same requirements: 42 s from an empty cache against ~2.5 min for pip.
# The installed files are compiled to bytecode once (--compile-bytecode, ~20 s), because a machine
# that sets PYTHONDONTWRITEBYTECODE (this one does) otherwise compiles Airflow from source in every
# process: `import airflow.sdk` and the operators took 6.5 s without .pyc files and 1.8-2.1 s with
# them, in each scheduler, API server, task and CLI process the suite and the demo start.
# pyspark is published only as a source distribution, and on this machine's package mirror uv builds
# it again into a new cache revision at every install (1.1-1.9 GB each): 62 installs in two days
# filled uv's cache to 73 GB and the disk with it, and the next CI run died after 20 s on "No space
# left on device". `uv cache prune` then drops the revisions no install points at (69.8 GB in 16 s
# that time; it waits while another uv process holds the cache).
$(VENV)/.installed: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip uv
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[dev]'
	$(BIN)/uv cache prune --quiet
	@touch $@

# Groups, in order; their times in the clean-clone `bash .ci/run` of 9dbba3c (42 min 11 s in all;
# 70aa168's took 38 min 50 s, its Spark group 17.4 min; a546842's 51 min 43 s on a slow day, each
# group 1.2-1.4x: 8.5, 2.9, 23.7, 10.2 and 4.5 min; a4ead80's 56 min 18 s on a slow day, a helper's
# linter evaluation running beside the fast group: 14.5, 3.4, 19.4 (124 Spark tests), 11.2 and 5.0 min;
# b21ef06's 44 min 17 s, quiet: 7.8, the DAG runs beside Spark 5.6 and 19.1 together, 10.4 and 4.9 min;
# e054f32's 44 min 12 s (every group 1.1x): 8.5, then the DAG runs 7.9 and the Celery and load files
# 7.1 beside Spark, 22.9 for the three, and 10.7 min; 3acafeb's 44 min 5 s: 10.1 (a helper's linter
# evaluation beside it), then the DAG runs 7.7, the Celery and load files 7.2 and end to end 14.4
# one after another beside Spark, 31.5 for the four; ed3cdbd's 41 min 16 s, make test 39.4: 9.1, then
# the DAG runs 7.7, the Celery and load files 5.2 (the load test at 60 windows) and end to end 13.6
# beside Spark, 30.2 for the four; fc25628's 41 min 2 s, make test 39.1: 9.7, then the DAG runs
# 6.0, the Celery and load files 4.2 and end to end 14.4 beside Spark (C1-only executors), 29.2 for the four;
# cae2113's 33 min 19 s, make test 31.5: 8.2, then the DAG runs 5.5, the Celery and load files 4.1 and
# end to end 12.8 beside Spark (crash tests sleep instead of hashing; e2e copies a migrated database), 23.1 for the four;
# 1be065c's 31 min 21 s, make test 29.9: 10.0 (a linter evaluation beside it), then the DAG runs 6.1, the Celery and
# load files 3.8 and end to end 10.0 beside Spark 19.6 (the e2e line now the longer by 0.3 min);
# 8164624's 24 min 48 s, make test 23.6 (quiet): 6.4, then the DAG runs 4.8, the Celery and load files 3.0
# and end to end 8.4 beside Spark 17.1 (the Spark group the longer line again, by 0.9 min);
# 5f942ae's 26 min 7 s, make test 24.7 (quiet): 6.6, then the DAG runs 4.4, the Celery and load files 3.0
# and end to end 9.7 beside Spark 18.0 (the Spark group the longer line, by 0.9 min);
# f85a6e2's 28 min 31 s, make test 27.3 (two niced linter scorings beside it): 6.3, then the DAG runs 5.4, the
# Celery and load files 4.9 and end to end 10.3 beside Spark 20.8 (the Spark group the longer line, by 0.4 min);
# 146d2aa's 25 min 23 s, make test 24.3 (quiet): 6.3, then the DAG runs 4.8, the Celery and load files 3.0
# and end to end 9.0 beside Spark 17.9 (135 tests; the Spark group the longer line, by 1.2 min);
# e051aaa's 27 min 57 s, make test 26.5 (quiet, a slower hour: every group 5-20% longer): 7.0, then the DAG
# runs 4.9, the Celery and load files 3.6 and end to end 10.7 beside Spark 19.5 (135 tests; by 0.4 min);
# venv, lint, release check and docs included, on a quiet machine):
# 1. fast tests on every core, the reliability suite's crash matrix, faults and hostile input
#    included (2,997 tests, 6.3-7.0 min on 2 cores);
# 2. the ones that run real DAGs, on one worker beside group 3 (2.1 min alone on every core; the
#    Spark group leaves a fifth of the CPU idle while it waits on the Connect server), then, still
#    beside it, the Celery deployment (a Celery worker beside the scheduler; beside three other
#    deployments on a VM with CPU steal a worker's attempt record once missed its check, before the
#    check delivered the worker's spool) and the reliability suite's load test on a cluster of its
#    own (its report says it ran beside the Spark group; `make reliability` runs it alone);
# 3. Spark, on a standalone cluster the session starts: a master, two workers and a Spark Connect
#    server, Delta and Iceberg tables, their guard, approvals, preview, lookback, concurrency and crash
#    cases, and a guarded month through a real scheduler on parquet and on Delta (135 tests, 17.9-19.5 min);
# 4. end to end on one worker more than cores (E2E_JOBS), a file per worker, each worker its own Airflow deployment,
#    the reliability suite's scheduler-kill and hostile-server files among them (8.1 min for 47
#    tests on three workers, bounded by the guarded-month file), started beside group 3's last
#    minutes once group 2 has ended (the Spark group alone leaves a fifth of the CPU idle).
# tools/test_groups.sh runs them: each bounded in time (a hung group is stopped with its traceback
# and the others still run), timed with the machine's CPU share, and swept of processes it left.
# The report of this run goes to .pytest_cache/results/RELIABILITY.md (`make reliability` writes
# the committed one). The last line adds up the groups (from their JUnit XML).
RESULTS := .pytest_cache/results
RELIABILITY_RESULTS := .pytest_cache/reliability/results.jsonl
# One seed for every pytest invocation of a run, so the report names one seed that repeats it all.
ifndef IDEM_RELIABILITY_SEED
IDEM_RELIABILITY_SEED := $(shell od -An -N4 -tu4 /dev/urandom | tr -d ' \n')
endif
export IDEM_RELIABILITY_SEED

define SUMMARY
import sys, xml.etree.ElementTree as ET
n = f = s = 0
for path in sys.argv[1:]:
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        print(f"{path}: not a whole JUnit report ({exc}): its group was stopped")
        continue
    for suite in root.iter("testsuite"):
        n += int(suite.get("tests", 0))
        f += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        s += int(suite.get("skipped", 0))
print(f"tests: {n - f - s} passed, {f} failed, {s} skipped")
endef
export SUMMARY

test: venv machine spark-jars
	@rm -rf $(RESULTS) $(RELIABILITY_RESULTS)
	@rc=0; PYTEST="$(PYTEST)" JOBS=$(JOBS) E2E_JOBS=$(E2E_JOBS) RESULTS=$(RESULTS) \
	  bash tools/test_groups.sh || rc=$$?; \
	$(BIN)/python tools/reliability_report.py --out $(RESULTS)/RELIABILITY.md; \
	$(BIN)/python -c "$$SUMMARY" $(RESULTS)/*.xml; exit $$rc

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/airflow-idempotent lint dags

# The release as users get it: an sdist and a wheel built in an isolated environment (as an index
# would receive them), then `twine check --strict` on both (metadata, README rendering, license).
RELEASE_DIST := .pytest_cache/release-dist
release-check: venv
	@rm -rf $(RELEASE_DIST)
	$(BIN)/python -m build --installer uv --outdir $(RELEASE_DIST) .
	$(BIN)/twine check --strict $(RELEASE_DIST)/*

# The documentation site (mkdocs.yml), in strict mode: a broken link, a page missing from the nav
# or an include that points nowhere fails the build. The site goes to .pytest_cache/site.
docs: venv
	$(BIN)/mkdocs build --strict

# The reliability suite and its report (RELIABILITY.md): crash matrix, faults, hostile input, load;
# then the issue's 10 rounds of "approve day 1, reject day 2 within a second" on a real scheduler
# (`make test` runs 4; each round prints its totals against the scenario's formula and its time).
# Then 20 trials of two windows of one Delta and one Iceberg table written at once (`make test`: 1).
# Then the Spark matrices' further points (marker `exhaustive`): the partition switch killed at the
# 5 steps that leave nothing to recover and a first write killed after its plan, the guarded month
# through the scheduler on parquet (`make test` runs 3 kill steps, 1 first write, the month on Delta),
# on a cluster with Spark's generated code on (`make test`'s runs without: tests/spark/conftest.py).
reliability: venv machine
	@rm -f $(RELIABILITY_RESULTS)
	rc=0; IDEM_SCHEMATHESIS_EXAMPLES=40 IDEM_SCHEMATHESIS_SECONDS=1200 $(PYTEST) -m "not e2e and not spark" tests/reliability || rc=$$?; \
	$(PYTEST) -m e2e tests/reliability || rc=$$?; \
	IDEM_APPROVAL_ROUNDS=10 $(PYTEST) --timeout=1800 -m e2e -s tests/e2e/test_approval.py \
		-k approve_one_day_and_reject_the_other || rc=$$?; \
	IDEM_SPARK_CONCURRENT_TRIALS=20 $(PYTEST) -m spark tests/spark/test_spark_concurrency.py || rc=$$?; \
	IDEM_SPARK_CODEGEN=1 $(PYTEST) -v -m "spark and exhaustive" tests/spark || rc=$$?; \
	$(BIN)/python tools/reliability_report.py; exit $$rc

demo: venv
	$(BIN)/python -m airflow_idempotent.demo

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
