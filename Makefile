# storage-consumer — one command builds (make), one command tests (make test).
# Dependencies are found with pkg-config; scripts/install-deps.sh installs them.

CC      ?= cc
CXX     ?= c++
PKGS    := rdkafka libpq jansson simdjson libmicrohttpd avro-c libcurl
CSTD    := -std=c11 -D_GNU_SOURCE
WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wformat=2 -Wvla -Wno-missing-field-initializers
OPT     ?= -O2 -g
SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
TSAN    := -fsanitize=thread -fno-omit-frame-pointer

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

CFLAGS  += $(CSTD) $(WARN) $(OPT) -Isrc $(PKG_CFLAGS)
LDLIBS  += $(PKG_LIBS) -lstdc++ -lpthread -lm
# Unit tests link the core with its JSON libraries only: a core module that
# reached for librdkafka or libpq would fail to link.
CORE_LIBS := $(shell pkg-config --libs jansson simdjson avro-c 2>/dev/null) -lstdc++ -lm

# The one C++ unit: the fast JSON reader over simdjson (src/core/json_fast.cpp;
# docs/DESIGN.md: Two parsers, one outcome). No exceptions: simdjson reports
# errors as codes, and an allocation failure aborts like everywhere else.
FAST_JSON  := src/core/json_fast.cpp
CXXFLAGS   += -std=c++17 -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wvla -fno-exceptions -fno-rtti \
              $(OPT) -Isrc $(shell pkg-config --cflags simdjson 2>/dev/null)

BUILD   ?= build

# The record formats (docs/DESIGN.md: Formats): the decoder's, no I/O.
FORMATS_SRC := src/formats/connect_json.c src/formats/logical.c src/formats/avro.c src/formats/schemas.c
# The core knows neither Kafka nor PostgreSQL: unit tests link only these.
CORE_SRC := src/log.c src/settings.c src/env_file.c src/core/timestamp.c src/core/decode.c src/core/number_text.c \
            src/core/pipeline.c src/core/pipeline_fields.c src/core/pipeline_bind.c src/core/retry.c src/core/batch.c src/core/app_cache.c src/core/utf8.c \
            src/core/clock.c src/worker.c src/metrics.c $(FORMATS_SRC)
CORE_SRC += src/status_page.c $(BUILD)/pipelines_builtin.c
APP_SRC  := $(CORE_SRC) src/pg/db.c src/pg/migrate.c src/pg/catalog.c src/pg/members.c src/pg/store.c src/pg/store_write.c src/pg/copy_text.c src/pg/probe.c src/pg/tombstones.c src/pg/dead_letters.c src/pg/offsets.c \
            src/kafka/conf.c src/kafka/group.c src/kafka/consumer.c src/kafka/consumer_start.c src/kafka/consumer_fetch.c \
            src/kafka/cluster.c src/kafka/member.c \
            src/supervisor.c src/metrics_http.c src/ops/dead_letters.c src/ops/dead_letters_change.c src/ops/dead_letters_args.c src/ops/redrive.c \
            src/ops/print.c src/ops/args.c src/ops/connect.c \
            src/ops/verify.c src/ops/verify_positions.c src/ops/verify_stage.c src/ops/replay.c $(BUILD)/migrations.c
APP_SRC  += src/ops/progress.c src/crash.c src/registry/registry.c
MIGRATIONS := $(sort $(wildcard migrations/*.sql))
MAIN_SRC := src/main.c

UNIT_TESTS := $(patsubst tests/unit/%.c,%,$(wildcard tests/unit/test_*.c))

.PHONY: all clean test deps sanitize tsan demo fuzz bench bench-scale bench-bins reliability install image-test

all: $(BUILD)/storage-consumer $(BUILD)/kafka-mock-broker $(BUILD)/delay-relay

# The schema is compiled in: a deployed binary needs no migrations directory.
$(BUILD)/migrations.c: $(MIGRATIONS) scripts/embed-migrations.sh
	@mkdir -p $(@D)
	scripts/embed-migrations.sh $@ $(MIGRATIONS)

# So are the built-in pipeline definitions (docs/DESIGN.md: Pipelines are declared).
$(BUILD)/pipelines_builtin.c: pipelines/default.json scripts/embed-pipelines.sh
	@mkdir -p $(@D)
	scripts/embed-pipelines.sh $@ pipelines/default.json

$(BUILD)/obj/json_fast.o: $(FAST_JSON) src/core/json_value.h
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) -c -o $@ $<

$(BUILD)/storage-consumer: $(APP_SRC) $(MAIN_SRC) $(BUILD)/obj/json_fast.o $(wildcard src/*.h src/*/*.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $(APP_SRC) $(MAIN_SRC) $(BUILD)/obj/json_fast.o $(LDFLAGS) $(LDLIBS)

# The Kafka-protocol broker used by tests and the demo (librdkafka's mock cluster).
$(BUILD)/kafka-mock-broker: tests/support/kafka_mock_broker.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(LDFLAGS) $(LDLIBS)

# The reliability suite's slow link to PostgreSQL (no tc netem in every kernel).
$(BUILD)/delay-relay: tests/support/delay_relay.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $<

# Sanitizer builds live in their own directory so they never mix with release objects.
SAN_BUILD := $(BUILD)/san

$(SAN_BUILD)/obj/json_fast.o: $(FAST_JSON) src/core/json_value.h
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) $(SAN) -c -o $@ $<

$(SAN_BUILD)/storage-consumer: $(APP_SRC) $(MAIN_SRC) $(SAN_BUILD)/obj/json_fast.o $(wildcard src/*.h src/*/*.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SAN) -o $@ $(APP_SRC) $(MAIN_SRC) $(SAN_BUILD)/obj/json_fast.o $(LDFLAGS) $(LDLIBS)

$(SAN_BUILD)/unit/%: tests/unit/%.c $(CORE_SRC) tests/support/shipped_schema.c tests/support/shipped_schema.h $(SAN_BUILD)/obj/json_fast.o $(wildcard src/*.h src/*/*.h tests/unit/*.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SAN) -Itests/unit -Itests/support -o $@ $< $(CORE_SRC) tests/support/shipped_schema.c $(SAN_BUILD)/obj/json_fast.o $(LDFLAGS) $(CORE_LIBS) -lcmocka

# ThreadSanitizer cannot share a binary with AddressSanitizer: a build of its
# own. Only our code is instrumented (librdkafka, libpq and libmicrohttpd are
# the system's); tests/tsan.supp says which of their reports are theirs.
# tests/support/tsan_c11_threads.c shows it librdkafka's threads and locks.
TSAN_BUILD := $(BUILD)/tsan
TSAN_SUPPORT := tests/support/tsan_c11_threads.c

$(TSAN_BUILD)/obj/json_fast.o: $(FAST_JSON) src/core/json_value.h
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) $(TSAN) -c -o $@ $<

$(TSAN_BUILD)/storage-consumer: $(APP_SRC) $(MAIN_SRC) $(TSAN_SUPPORT) $(TSAN_BUILD)/obj/json_fast.o $(wildcard src/*.h src/*/*.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(TSAN) -o $@ $(APP_SRC) $(MAIN_SRC) $(TSAN_SUPPORT) $(TSAN_BUILD)/obj/json_fast.o $(LDFLAGS) $(LDLIBS)

sanitize: $(SAN_BUILD)/storage-consumer $(addprefix $(SAN_BUILD)/unit/,$(UNIT_TESTS)) \
          $(BUILD)/fuzz/fuzz_decode $(BUILD)/fuzz/fuzz_avro $(SAN_BUILD)/tests/decoder_vs_postgres

# The decoder against PostgreSQL, value for value: the decoder's core, the
# catalog's reading of a table, libpq (tests/integration/decoder_vs_postgres.sh).
$(SAN_BUILD)/tests/decoder_vs_postgres: tests/support/decoder_vs_postgres.c $(CORE_SRC) src/pg/db.c src/pg/catalog.c $(SAN_BUILD)/obj/json_fast.o $(wildcard src/*.h src/*/*.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SAN) -o $@ $< $(CORE_SRC) src/pg/db.c src/pg/catalog.c $(SAN_BUILD)/obj/json_fast.o $(LDFLAGS) $(LDLIBS)

# Coverage-guided fuzzing of the decoders (libFuzzer, clang), under ASan+UBSan.
FUZZ_SRC := src/core/decode.c src/core/number_text.c src/core/timestamp.c src/core/pipeline.c src/core/pipeline_fields.c src/core/pipeline_bind.c src/core/utf8.c $(FORMATS_SRC) $(BUILD)/pipelines_builtin.c \
            tests/support/shipped_schema.c
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all
$(BUILD)/fuzz/json_fast.o: $(FAST_JSON) src/core/json_value.h
	@mkdir -p $(@D)
	clang++ $(filter-out $(OPT),$(CXXFLAGS)) -g -O1 -fsanitize=fuzzer-no-link $(FUZZ_SAN) -c -o $@ $<

$(BUILD)/fuzz/fuzz_decode: tests/fuzz/fuzz_decode.c $(FUZZ_SRC) $(BUILD)/fuzz/json_fast.o $(wildcard src/core/*.h)
	@mkdir -p $(@D)
	clang $(CSTD) $(WARN) -g -O1 -Isrc -Itests/support -fsanitize=fuzzer $(FUZZ_SAN) \
	    -o $@ $< $(FUZZ_SRC) $(BUILD)/fuzz/json_fast.o $(CORE_LIBS)

# The Avro reader alone: avro-c, and our JSON text of its values.
$(BUILD)/fuzz/fuzz_avro: tests/fuzz/fuzz_avro.c src/formats/avro.c src/formats/logical.c src/core/utf8.c $(wildcard src/formats/*.h)
	@mkdir -p $(@D)
	clang $(CSTD) $(WARN) -g -O1 -Isrc -fsanitize=fuzzer $(FUZZ_SAN) \
	    -o $@ $< src/formats/avro.c src/formats/logical.c src/core/utf8.c $(CORE_LIBS)

FUZZ_SECONDS ?= 60
fuzz: $(BUILD)/fuzz/fuzz_decode $(BUILD)/fuzz/fuzz_avro
	tests/fuzz/run.sh "$(BUILD)/fuzz/fuzz_decode $(BUILD)/fuzz/fuzz_avro" $(FUZZ_SECONDS)

deps:
	scripts/install-deps.sh

# make test: installs what a fresh machine lacks, checks that librdkafka and
# libpq stay inside src/kafka/ and src/pg/ (scripts/check-boundaries.sh) and
# that the benchmarks still build, then runs every test: unit
# and integration suites and the fuzz target against the sanitizer build (the
# resource suite measures the release build's memory, so that is built too),
# then the reliability suite against the release build. TEST_JOBS suites
# run side by side (tests/run.sh): most of a suite's time is waiting.
TEST_JOBS ?= 2
test: deps
	$(MAKE) all sanitize bench-bins
	scripts/check-boundaries.sh $(CC) $(CSTD) -Isrc $(PKG_CFLAGS)
	FUZZ_BIN="$(BUILD)/fuzz/fuzz_decode $(BUILD)/fuzz/fuzz_avro" FUZZ_SECONDS=$(FUZZ_SECONDS) TEST_JOBS=$(TEST_JOBS) tests/run.sh $(SAN_BUILD)
	tests/reliability/run.sh $(BUILD)

# make tsan: the integration suites against the ThreadSanitizer build; any
# report fails the run (tests/run.sh). Not the resources suite: it measures
# memory, under LeakSanitizer and in the release build; nor the bench suite:
# it runs the release binaries; nor the unit tests and the fuzzing, which
# this build does not make. About 15 minutes on
# two cores, too long for make test, which does not run it.
tsan: deps
	$(MAKE) all $(TSAN_BUILD)/storage-consumer
	SKIP_SUITES="resources bench unit fuzz" tests/run.sh $(TSAN_BUILD)

# make reliability: the service against kill -9, PostgreSQL and broker faults,
# rebalances and graceful stops, each scenario judged by a model of what was
# published (tests/reliability/); prints a table, fails if anything was lost,
# duplicated or wrongly updated. Runs the release build, for speed.
reliability: deps
	$(MAKE) all
	tests/reliability/run.sh $(BUILD)

# make demo: the README's main command.
demo: deps
	$(MAKE) all
	demo/run.sh

# make bench: one command, one run: bare PostgreSQL vs storage-consumer end to
# end, replay, network-metrics latency under load, CPU and memory cost, two
# members against two connections, and the charts (bench/run.sh,
# bench/charts.sh). Everything is built with the release flags above.
BENCH_CORE := src/core/decode.c src/core/number_text.c src/core/timestamp.c src/core/pipeline.c src/core/pipeline_fields.c src/core/pipeline_bind.c src/core/utf8.c $(FORMATS_SRC) $(BUILD)/pipelines_builtin.c \
              tests/support/shipped_schema.c

$(BUILD)/bench/bare_pg: bench/bare_pg.c $(BENCH_CORE) $(BUILD)/obj/json_fast.o $(wildcard src/core/*.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests/support -o $@ bench/bare_pg.c $(BENCH_CORE) $(BUILD)/obj/json_fast.o $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench/latency: bench/latency.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench/decode_speed: bench/decode_speed.c bench/speed_common.c bench/speed_common.h $(BENCH_CORE) $(BUILD)/obj/json_fast.o $(wildcard src/core/*.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests/support -o $@ bench/decode_speed.c bench/speed_common.c $(BENCH_CORE) $(BUILD)/obj/json_fast.o $(LDFLAGS) $(CORE_LIBS)

$(BUILD)/bench/consumer_floor: bench/consumer_floor.c src/alloc_settings.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench/avro_speed: bench/avro_speed.c bench/speed_common.c bench/speed_common.h $(BENCH_CORE) $(BUILD)/obj/json_fast.o $(wildcard src/core/*.h src/formats/*.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests/support -o $@ bench/avro_speed.c bench/speed_common.c $(BENCH_CORE) $(BUILD)/obj/json_fast.o $(LDFLAGS) $(CORE_LIBS)

bench-bins: all $(BUILD)/bench/bare_pg $(BUILD)/bench/latency $(BUILD)/bench/decode_speed $(BUILD)/bench/avro_speed $(BUILD)/bench/consumer_floor

bench: deps
	$(MAKE) bench-bins
	BUILD=$(BUILD) bench/run.sh

# make bench-scale: the production mix on tables that already hold millions
# of rows, against PostgreSQL's limits on the same tables, the cost curve
# over the table's size, and the service's CPU against a bare Kafka consumer
# (bench/scale.sh; DESIGN.md: Benchmark). About 40 minutes; make bench stays
# the quick one.
bench-scale: deps
	$(MAKE) bench-bins
	BUILD=$(BUILD) bench/scale.sh

# make install [PREFIX=/usr/local] [DESTDIR=]: the binary, its man page,
# the systemd unit, whose ExecStart names the installed binary, and the
# built-in pipeline definitions (compiled in; installed as the file to start
# a STORAGE_PIPELINES_FILE from) (docs/DESIGN.md: Deployment).
PREFIX  ?= /usr/local
BINDIR  := $(PREFIX)/bin
MANDIR  := $(PREFIX)/share/man
UNITDIR := $(PREFIX)/lib/systemd/system
DATADIR := $(PREFIX)/share/storage-consumer

# INSTALL_BIN: the binary to install (the release build by default).
INSTALL_BIN ?= $(BUILD)/storage-consumer

install: $(INSTALL_BIN)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(UNITDIR) $(DESTDIR)$(DATADIR)
	install -m 0755 $(INSTALL_BIN) $(DESTDIR)$(BINDIR)/storage-consumer
	install -m 0644 docs/storage-consumer.1 $(DESTDIR)$(MANDIR)/man1/storage-consumer.1
	install -m 0644 pipelines/default.json $(DESTDIR)$(DATADIR)/pipelines.json
	sed 's|^ExecStart=/usr/local/bin/|ExecStart=$(BINDIR)/|' deploy/storage-consumer.service \
	    >$(DESTDIR)$(UNITDIR)/storage-consumer.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/storage-consumer.service

# make image-test: builds deploy/Containerfile FROM a debootstrapped Debian 12
# (cached in $(BUILD)/image) and runs the image's binary against the test
# PostgreSQL and broker (tests/image/run.sh). Minutes, so not in make test.
image-test:
	scripts/install-deps.sh image
	$(MAKE) all
	tests/image/run.sh $(BUILD)

clean:
	rm -rf $(BUILD)
