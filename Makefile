# Every target creates .venv when it is missing, so `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo demo-rocketmq rocketmq rocketmq-jars test test-pythons bench bench-pipeline proto lint docs venv clean

$(STAMP): pyproject.toml constraints.txt hatch_build.py rocket_rebalance/runtime/transport/_pulled.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[spark,dev,metrics]'
	touch $(STAMP)

venv: $(STAMP)

# The demo's balance-against-movement chart is drawn as a picture too, into build/demo/tradeoffs.png.
demo: $(STAMP)
	$(PY) -m rocket_rebalance demo --chart build/demo/tradeoffs.png

# The live demo on a real Apache RocketMQ NameServer and broker, with a Java consumer in the group (needs Java 17
# and Maven; the jars are fetched once into .rocketmq/).
demo-rocketmq: $(STAMP)
	$(PY) -m rocket_rebalance demo --rocketmq

# A real RocketMQ NameServer and two brokers on loopback until Ctrl-C; prints their addresses as one JSON line.
rocketmq: $(STAMP)
	$(PY) -m rocket_rebalance.lab.rocketmq --brokers 2 --topic TopicTest:8

rocketmq-jars: $(STAMP)
	$(PY) -m rocket_rebalance.lab.rocketmq --fetch-only

# The tests of tests/rocketmq start a real RocketMQ (Java 17 and Maven needed; ROCKET_REBALANCE_SKIP_ROCKETMQ=1
# skips them). They, the Spark tests and the rest run as three pytest runs side by side (tests/run_parts.sh).
test: $(STAMP)
	@tests/run_parts.sh $(abspath $(PY))

# The suites that need neither a broker nor Spark on each further Python we support, each in its own .venv-X.Y
# built like .venv; the newest also runs the real-broker smoke tests (tests/run_pythons.sh). A Python this machine
# lacks is said in one line and skipped.
PYTHONS := 3.12 3.13
test-pythons:
	@tests/run_pythons.sh $(PYTHONS)

lint: $(STAMP)
	$(PY) -m ruff check rocket_rebalance nameserver_stub tests benchmarks examples docs hatch_build.py
	$(PY) -m ruff format --check rocket_rebalance nameserver_stub tests benchmarks examples docs README.md hatch_build.py
	$(PY) -m mypy
	$(PY) -m mypy --strict examples docs/conf.py docs/_ext hatch_build.py
	$(DOCS)

# The site (docs/*.md, README.md as its front page, the API reference from the docstrings) into build/docs/html.
# -W: every warning is an error (a broken link, anchor or Python reference); the build ends by type-checking every
# python block of the pages with mypy --strict (docs/_ext/snippets.py). -E: every page is read again, so no
# warning hides behind the cache of an earlier build.
DOCS = $(PY) -m sphinx -b html -E -W --keep-going -q docs build/docs/html
docs: $(STAMP)
	$(DOCS)

# Each script prints a table; dated figures are kept in benchmarks/RESULTS.md. rebalance.py runs real processes
# for about ten minutes; the pipeline at 100k groups takes longer, so it has its own target.
bench: $(STAMP)
	$(PY) benchmarks/allocation.py
	$(PY) benchmarks/preview.py
	$(PY) benchmarks/stub.py
	$(PY) benchmarks/strategies.py
	$(PY) benchmarks/rebalance.py

bench-pipeline: $(STAMP)
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) benchmarks/pipeline.py

proto: $(STAMP)
	$(PY) tools/gen_proto.py

clean:
	rm -rf $(VENV) $(PYTHONS:%=.venv-%) .pytest_cache .mypy_cache .hypothesis build/docs
