# One entry point. Every target bootstraps what it needs: a .venv, the build
# tools and test packages from PyPI, and the Rust extension built by maturin.
SHELL := /bin/bash
# A failing command fails its target even when its output is filtered.
.SHELLFLAGS := -o pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
PY := $(BIN)/python
DEPS := $(VENV)/.deps-installed
EXTRAS ?= test lint
PYTEST_ARGS ?=
BENCH_ARGS ?=

export VIRTUAL_ENV := $(CURDIR)/$(VENV)
export PATH := $(BIN):$(PATH)

.PHONY: run test test-rust test-python test-crash test-cluster test-java java spark-kafka maven cluster zookeeper lint bench bench-kcat bench-spark bench-kafka bench-fetch bench-security bench-rust develop wheel clean

$(PY):
	@echo "==> creating $(VENV)"
	$(PYTHON) -m venv $(VENV)

# Installs the build tool and the extras named in pyproject.toml (one list of
# dependencies, kept there), again whenever pyproject.toml changes.
$(DEPS): pyproject.toml | $(PY)
	@echo "==> installing build tools and the '$(EXTRAS)' extras from PyPI"
	$(PY) -m pip install --quiet --upgrade pip 'maturin>=1.9.4,<2'
	$(PY) -c "import tomllib; d = tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']; \
	  print('\n'.join(r for e in '$(EXTRAS)'.split() for r in d[e]))" > $(VENV)/requirements.txt
	$(PY) -m pip install --quiet -r $(VENV)/requirements.txt
	touch $@

# Release profile throughout: tests drive real volumes through the extension.
# pip names every optional dependency whose extra is not asked for ("Ignoring
# ...: markers 'extra == ...' don't match"): noise, filtered out.
develop: $(DEPS)
	@echo "==> building the Rust extension (maturin develop --release)"
	$(BIN)/maturin develop --release --quiet 2>&1 | { grep -v "^Ignoring .*markers 'extra ==" || true; }

# The main job: a Spark Structured Streaming pipeline on an embedded store
# (pyspark comes with the test extra that develop installs).
# RUN_ARGS="--via kafka" runs it through a broker with Spark's own Kafka connector.
RUN_ARGS ?=
run: develop spark-kafka
	$(PY) examples/pipeline.py $(RUN_ARGS)

test: test-rust test-python

test-rust:
	@echo "==> cargo test (the core, alone)"
	cargo test --quiet --workspace

test-python: develop zookeeper java
	@echo "==> pytest"
	SEGLOG_TESTING_REQUIRE_ZOOKEEPER=1 $(PY) -m pytest $(PYTEST_ARGS)

# The kill -9 crash loops alone.
test-crash: develop
	$(PY) -m pytest -m crash $(PYTEST_ARGS)

# The replication tests alone: ZooKeeper and broker processes, killed and paused.
test-cluster: develop zookeeper
	SEGLOG_TESTING_REQUIRE_ZOOKEEPER=1 $(PY) -m pytest -m cluster $(PYTEST_ARGS)

# Kafka's Java clients and command-line tools against seglog alone.
test-java: develop java
	$(PY) -m pytest -m java $(PYTEST_ARGS)

# The Java side of those tests (java/): built by Maven once per kafka-clients
# version in java/versions, with the artifacts from Maven Central (cached in
# ~/.m2), each into java/target/kafka-<version>/.
JAVA_VERSIONS := $(shell cat java/versions)
# Maven 3.8 prints colour resets even when quiet and not on a terminal.
NO_ANSI := sed -e 's/\x1b\[[0-9;]*m//g'

JAVA_SOURCES := java/pom.xml java/versions $(wildcard java/src/main/java/seglog/interop/*.java)
java: $(foreach v,$(JAVA_VERSIONS),java/target/kafka-$(v)/classpath.txt java/target/tools-$(v)/classpath.txt) spark-kafka

java/target/kafka-%/classpath.txt: $(JAVA_SOURCES) | maven
	@echo "==> building the Java clients' checks against kafka-clients $*"
	mvn -q -B -Dstyle.color=never -f java/pom.xml -Dkafka.version=$* package 2>&1 | $(NO_ANSI)
	touch $@

# Kafka's command-line tools of each version: a classpath of Maven Central's jars.
java/target/tools-%/classpath.txt: java/tools/pom.xml java/versions | maven
	@echo "==> resolving Kafka $*'s command-line tools"
	mvn -q -B -Dstyle.color=never -f java/tools/pom.xml -Dkafka.version=$* package 2>&1 | $(NO_ANSI)
	touch $@

# Spark's own Kafka connector (format("kafka")) at the version of PySpark that
# pyproject.toml pins: the jars PySpark lacks, for spark.jars.
SPARK_VERSION := $(shell sed -n 's/^ *"pyspark==\([0-9.]*\)".*/\1/p' pyproject.toml)
spark-kafka: java/target/spark-kafka-$(SPARK_VERSION)/classpath.txt

java/target/spark-kafka-%/classpath.txt: java/spark/pom.xml pyproject.toml | maven
	@echo "==> resolving Spark $*'s Kafka connector"
	mvn -q -B -Dstyle.color=never -f java/spark/pom.xml -Dspark.version=$* package 2>&1 | $(NO_ANSI)
	touch $@

# Maven and a JDK from Debian's packages when missing (needs root).
MAVEN_LOG := $(or $(TMPDIR),/tmp)/seglog-maven-install.log
maven:
	@{ command -v mvn && command -v javac; } >/dev/null || { \
	  echo "==> installing Debian's maven and default-jdk-headless (log: $(MAVEN_LOG))"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -q maven default-jdk-headless > $(MAVEN_LOG) 2>&1 \
	  || { apt-get update -q >> $(MAVEN_LOG) 2>&1 && apt-get install -y -q maven default-jdk-headless >> $(MAVEN_LOG) 2>&1; } \
	  || { echo "apt-get install maven failed; see $(MAVEN_LOG)"; exit 1; }; }

# Debian's zookeeper package (which brings java), installed with apt-get when its
# server jar is missing; 'apt-get update' first only when the plain install fails
# (a machine with no package lists yet). Needs root; the library itself never
# installs anything.
ZOOKEEPER_JAR := /usr/share/java/zookeeper.jar
APT_LOG := $(or $(TMPDIR),/tmp)/seglog-apt.log
zookeeper:
	@test -f $(ZOOKEEPER_JAR) || { \
	  echo "==> installing Debian's zookeeper package (log: $(APT_LOG))"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -q zookeeper > $(APT_LOG) 2>&1 \
	  || { apt-get update -q >> $(APT_LOG) 2>&1 && apt-get install -y -q zookeeper >> $(APT_LOG) 2>&1; } \
	  || { echo "apt-get install zookeeper failed; see $(APT_LOG)"; exit 1; }; }

# ZooKeeper and three brokers in racks r1, r2, r3 on 127.0.0.1 until Ctrl-C
# (README "Replication (a cluster)"). CLUSTER_ARGS="--config k=v" for more.
CLUSTER_DIR ?= $(or $(TMPDIR),/tmp)/seglog-cluster
CLUSTER_ARGS ?=
cluster: develop zookeeper
	$(PY) -m seglog cluster --dir $(CLUSTER_DIR) $(CLUSTER_ARGS)

lint: develop
	cargo fmt --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(BIN)/ruff check python tests benches examples
	$(BIN)/ruff format --check python tests benches examples
	$(PY) -m mypy python/seglog
	$(PY) -m mypy.stubtest seglog._native

bench: develop $(VENV)/.bench-installed bench-kcat zookeeper
	OPENBLAS_NUM_THREADS=1 $(PY) benches/run.py $(BENCH_ARGS)
	$(MAKE) --no-print-directory bench-spark
	$(MAKE) --no-print-directory bench-kafka
	$(MAKE) --no-print-directory bench-fetch
	$(MAKE) --no-print-directory bench-security

# Spark reading seglog through path and through a broker, next to Parquet, and
# writing through both (docs/spark.md). SPARK_BENCH_ARGS="--records 200000" for less.
bench-spark: develop java zookeeper
	$(PY) benches/bench_spark.py $(SPARK_BENCH_ARGS)

# kcat (librdkafka's command-line client, a native program) for the broker rows
# BK1-BK6: Debian's package, installed when missing (needs root). If it cannot be
# installed the bench goes on without those rows and says so.
KCAT_LOG := $(or $(TMPDIR),/tmp)/seglog-kcat-install.log
bench-kcat:
	@command -v kcat >/dev/null || { \
	  echo "==> installing kcat (Debian package) for the broker rows"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat; } \
	    > $(KCAT_LOG) 2>&1 \
	  || echo "==> kcat not installed (see $(KCAT_LOG)): the bench runs without the BK rows"; }

# seglog serve beside Kafka 3.9's own broker, with Kafka's perf tools (produce,
# consume, end-to-end latency, the broker's CPU and memory). KAFKA_BENCH_ARGS="--runs 1".
KAFKA_BENCH_ARGS ?=
bench-kafka: develop java zookeeper
	$(PY) benches/bench_kafka.py --chart docs/kafka.png $(KAFKA_BENCH_ARGS)

# Fetch sessions on a 1,000-partition consumer (seglog and Kafka 3.9, with and without
# a session) and follower fetching for a consumer in another rack than the leader.
FETCH_BENCH_ARGS ?=
bench-fetch: develop java zookeeper
	$(PY) benches/bench_fetch.py $(FETCH_BENCH_ARGS)

# TLS and SASL against PLAINTEXT, seglog and Kafka 3.9 each with the four listeners
# (docs/security.md). SECURITY_BENCH_ARGS="--runs 1 --no-kafka" for less.
bench-security: develop java zookeeper
	$(PY) benches/bench_security.py $(SECURITY_BENCH_ARGS)

# Criterion benchmarks of the core alone (append, read, index lookup).
bench-rust:
	cargo bench -p seglog-core --bench log

$(VENV)/.bench-installed: pyproject.toml | $(PY)
	$(PY) -c "import tomllib; d = tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']; \
	  print('\n'.join(d['bench']))" > $(VENV)/bench-requirements.txt
	$(PY) -m pip install --quiet -r $(VENV)/bench-requirements.txt
	touch $@

wheel: $(DEPS)
	$(BIN)/maturin build --release --strip --out dist

clean:
	rm -rf $(VENV) target dist java/target
