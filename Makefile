# Two commands on a fresh machine: `make demo` and `make test`.
# Both create .venv, install the pinned dependencies, check Java (Spark needs 17+), Node.js 18+, Go 1.26+ and
# chromium with chromedriver (the console's browser test), Prometheus (the observability test), valgrind
# (bench/costs.py's instruction counts, the cost guard) and Apache Kafka's broker (the stream-to-queue tests and
# drill), install the JavaScript SDK the compatibility tests
# drive (tests/compat/js, from its lockfile), build the Go one's binary (tests/compat/go, from go.sum) and, with
# Maven and a JDK, the Java one's jar (tests/compat/java: its pom.xml's dependencies into ~/.m2).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
JS := tests/compat/js
JS_STAMP := $(JS)/node_modules/.installed-stamp
GO := tests/compat/go
GO_BINARY := $(GO)/bin/compat
JAVA_SUITE := tests/compat/java
JAVA_STAMP := $(JAVA_SUITE)/target/.installed-stamp
# CI runs the slow suites too; a developer's default run skips them (`make test-all` runs everything).
PYTEST_MARK := $(if $(filter true,$(CI)),,-m "not slow")

.PHONY: setup demo test test-all lint console-screenshots bench clean java maven node golang chromium prometheus valgrind kafka

setup: $(STAMP) java chromium prometheus valgrind kafka $(JS_STAMP) $(GO_BINARY) $(JAVA_STAMP)

$(STAMP): pyproject.toml constraints.txt local_broker/wire/amqp/_speedups.c
	@bash scripts/ensure-cc.sh $(PYTHON)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

java:
	@bash scripts/ensure-java.sh

maven:
	@bash scripts/ensure-maven.sh

node:
	@bash scripts/ensure-node.sh

golang:
	@bash scripts/ensure-go.sh

chromium:
	@bash scripts/ensure-chromium.sh

prometheus:
	@bash scripts/ensure-prometheus.sh

valgrind:
	@bash scripts/ensure-valgrind.sh

# Apache Kafka's broker jars (scripts/kafka/pom.xml) into $SBFED_CACHE/kafka (~/.cache/sbfed), once per pom.xml.
kafka: | java maven
	@bash scripts/ensure-kafka.sh

$(JS_STAMP): $(JS)/package-lock.json | node
	npm ci --prefix $(JS) --no-audit --no-fund --loglevel=error
	touch $(JS_STAMP)

# Built again only when the module or a source changed; modules come from the module proxy into Go's cache.
$(GO_BINARY): $(GO)/go.mod $(GO)/go.sum $(wildcard $(GO)/*.go) | golang
	cd $(GO) && go build -buildvcs=false -o bin/compat .

# Once per pom.xml: the SDK and Maven's plugins into ~/.m2, then the jar (java_runner.py rebuilds it when a
# scenario's source is newer, at most once a test session).
$(JAVA_STAMP): $(JAVA_SUITE)/pom.xml | java maven
	cd $(JAVA_SUITE) && mvn -q -B -Dstyle.color=never dependency:go-offline && mvn -q -B -Dstyle.color=never package
	touch $(JAVA_STAMP)

demo: setup
	$(VENV)/bin/sbfed demo

test: setup
	$(VENV)/bin/ruff check .
	$(PY) -m pytest $(PYTEST_MARK)

test-all: setup
	$(PY) -m pytest

# The browser test, writing the README's console image (docs/images/console-entities.png) as well.
console-screenshots: setup
	SBFED_README_IMAGES=1 $(PY) -m pytest tests/integration/test_console_browser.py -q

lint: setup
	$(VENV)/bin/ruff check .

# Every script in bench/ at its default sizes, rules.py's engine mode and reconcile.py's follow mode, but not the benches' helpers (the
# client amqp_compare.py runs, replicate.py's tracer); RabbitMQ for the AMQP comparison comes from Debian (one
# line says how when it cannot), Artemis from Maven Central on that comparison's first run (ensure-artemis.sh).
BENCH_HELPERS := bench/amqp_client.py bench/lag_trace.py
BENCHES := $(filter-out $(BENCH_HELPERS),$(sort $(wildcard bench/*.py))) "bench/rules.py --engine" \
	"bench/reconcile.py --follow"
bench: setup
	@bash scripts/ensure-rabbitmq.sh || true
	@failed=""; for b in $(BENCHES); do echo "== $$b"; $(PY) $$b || failed="$$failed, $$b"; done; \
	if [ -n "$$failed" ]; then echo "failed: $${failed#, }"; exit 1; fi

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info $(JS)/node_modules $(GO)/bin $(JAVA_SUITE)/target
	rm -f local_broker/wire/amqp/_speedups.*.so
