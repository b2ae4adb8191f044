# tidemark: a sidecar proxy that enforces fencing tokens.
#
# Targets:
#   all           ./tidemark and libtidemark.a (default): the archive
#                 exports only the tm_* calls of proxy/tidemark.h
#   demo          the build's and the demo's packages only, build, run
#                 tidemark in front of a demo backend
#   deps          install the Debian packages for build, tests and bench
#   check         the fast tier, in under 3 minutes: format-check, build,
#                 unit, embed, check-docs, check-layers and the
#                 integration tests that need no cluster, real backend
#                 or packaging
#   test          deps, format-check, unit, embed, check-layers,
#                 integration, test-sanitize, fuzz, docs, package
#   test-asan     the same suites against an ASan + UBSan build
#   test-sanitize part of test: the length-class and odd-byte tests
#                 (test_lengths.py) and the fast suites of refusals and
#                 canonical names against the ASan + UBSan build
#   unit          unit tests only
#   embed         the embedding example (examples/embed.c), built with
#                 pkg-config against a staged make install, and run; and
#                 the check that libtidemark.a exports only tm_* symbols
#   integration   integration tests only (TIDEMARK_BIN picks the binary),
#                 every tier, on TEST_JOBS pytest-xdist workers (4);
#                 test_image.py builds the image unless TIDEMARK_IMAGE
#                 names an archive of make image
#   integration-fast  the integration tests of the fast tier only (make
#                 check's): in none of the cluster, backend and packaging
#                 tiers (tests/integration/tiers.py)
#   chaos         the randomized history check, long: fencing off then on,
#                 DURATION seconds each (60), SEED to replay a run,
#                 STORE=lmdb|redis (a short run is in integration)
#   bench         wrk: bare upstream vs nginx vs tidemark, 3 runs a cell,
#                 medians, ratios, system calls per request (perf);
#                 raw output in tests/bench/results/
#   bench-locks   wrk: lock+release pairs/s and hot-lock tries/wins on
#                 the control port's lock service (BACKEND=lmdb|redis|
#                 redis-cluster|postgres); WAITERS="0 1000 10000": the
#                 pairs beside that many waiting calls, with CPU a request
#   bench-locks-raw  the seed's Redis scripts and lease-row SQL pair
#                 without tidemark (redis-benchmark, also --cluster on 3
#                 masters, pgbench): the baseline
#   bench-logstorm  a 502 and a warn line a request (upstream down):
#                 tidemark with log_buffer = 0 against 1M, pinned, in turn
#   bench-conns   tidemark's VmRSS idle, with 10,000 client connections
#                 open, and after they have gone (CONNS_TOTAL, CONNS_ROUNDS)
#   bench-busy    VmRSS per busy connection (a request held upstream),
#                 tidemark vs nginx (BUSY_CLIENTS "1000 4000", BUSY_BINS)
#   bench-instr   instructions per request on the equal path (callgrind),
#                 or per durable raise (INSTR_WORKLOAD=rising), by thread,
#                 tidemark vs nginx (INSTR_BINS, INSTR_FEW, INSTR_MANY)
#   bench-readme  the README's paragraph on speed, made again from the
#                 summaries in tests/bench/results it quotes (check-docs
#                 checks that it is current)
#   bench-marks   CPU per refusal and p99 as the marks grow (1e3, 1e7 by
#                 default, loaded with premark): proxy and wrk pinned,
#                 MARKS_BINS="A=bin B=bin" alternates binaries, after
#                 MARKS_WARMUP (2s) of refusals not counted
#   bench-marks-counts  the same refusals counted, not timed: instructions
#                 (callgrind), mallocs, LMDB reads, system calls and page
#                 faults a refusal at 1e3 and 1e7 marks (MARKS_COUNTS,
#                 MARKS_STORES keeps the stores for the next run)
#   bench-watch   the window a [watch] leaves: a holder's lease ended
#                 (revoked, closed, expired) to the mark raised, on a
#                 3-member etcd cluster and a 3-server ZooKeeper ensemble
#                 (WATCH_ROUNDS, WATCH_TTL_ROUNDS)
#   bench-batch   what reading a mark store's batch answer costs the loop
#                 a raise, at 1 to 512 raises a batch (batchanswer, on
#                 the store's own code, pinned to core 1)
#   format-check  clang-format --dry-run over every C file
#   check-layers  the layers' include rules (tests/check-layers.sh):
#                 policies/ pure, conf/ below proxy/, proxy/'s wings
#   check-docs    doc/tidemark.8, conf/tidemark.ini and doc/operations.md's
#                 configuration reference against the option table (keys,
#                 defaults, restart marks; cfgdoc man, ini and md write
#                 entries for a new key), and the keys named in README.md
#                 and doc/*.md; doc/operations.md's Metrics section against
#                 the metrics table (metricsdoc); every relative link of
#                 those pages; packaging/tidemark.ini against
#                 conf/tidemark.ini (packaged-ini writes it)
#   install       PREFIX=/usr/local, DESTDIR: binary, libtidemark.a,
#                 tidemark.h, tidemark.pc, example config, man pages
#                 (LIBDIR, INCLUDEDIR, MANDIR override the places)
#   deb           the Debian package, into out/
#   test-deb      build the package, install it, smoke-test it, purge it
#   image         the container image tidemark:VERSION, with buildah and
#                 mmdebstrap from Debian's packages (no registry), as
#                 out/tidemark-image_VERSION.tar (docker-archive)
#   test-image    run the image's tidemark as its user, its configuration
#                 and its HEALTHCHECK (podman; a chroot as its user where
#                 containers cannot run); its labels and size
#   fuzz          libFuzzer targets (clang, ASan+UBSan), FUZZ_SECONDS each (60)
#   lab           the failure lab (lab/tidemark-lab) in full, with the
#                 seed's timings: lab-report.html and lab-report.json
#                 (the short run is part of make integration: test_lab.py)
#   clean

CC      ?= cc
BUILD   ?= build
PKGS    := libevent libevent_openssl libevent_pthreads inih lmdb hiredis libpq openssl jansson
CFLAGS  ?= -O2 -g
# The version: packaging/debian/changelog's; tidemark_build_info shows it.
VERSION := $(shell sed -n '1s/.*(\(.*\)).*/\1/p' packaging/debian/changelog)
# The flags the code needs, kept apart from CFLAGS so that a CFLAGS given on
# the command line (test-asan) changes optimisation, not the language.
TM_CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow \
           -Wno-unused-parameter -fno-strict-aliasing -MMD -MP \
           -DTM_VERSION='"$(VERSION)"' \
           $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# The ZooKeeper C client (libzookeeper-mt-dev) ships no .pc file.
ZK_LIBS := -lzookeeper_mt
LDLIBS  += $(shell pkg-config --libs $(PKGS) 2>/dev/null) $(ZK_LIBS) -lpthread
# A test still running after 600 s (pytest-timeout) fails with where it
# stood, rather than hold the run to CI's limit; the slowest take seconds.
PYTEST  := /usr/bin/python3 -m pytest -o timeout=600
# The integration tests wait on their servers more than they compute: 4
# workers on 2 cores (the fast tier took 109 s on 2 workers, 85 s on 4,
# 82 s on 8, on a shared machine). A file whose tests share a server its
# fixtures start once stays on one worker (xdist_group, set by
# conftest.py).
TEST_JOBS ?= 4
XDIST   := -n $(TEST_JOBS) --dist loadgroup
# The tiers (markers set by conftest.py, see tiers.py): make check runs
# what is in none of them.
FAST_TIER := not cluster and not backend and not packaging
PREFIX  ?= /usr/local
LIBDIR  ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR  ?= $(PREFIX)/share/man

LIB_SRC := $(wildcard policies/*.c conf/*.c proxy/*.c proxy/clients/*.c \
                    proxy/store/*.c proxy/locks/*.c proxy/carry/*.c \
                    proxy/path/*.c proxy/adm/*.c)
LIB_SRC := $(filter-out proxy/main.c,$(LIB_SRC))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

ifeq ($(BUILD),build)
TM_BIN := tidemark
TM_LIB := libtidemark.a
else
TM_BIN := $(BUILD)/tidemark
TM_LIB := $(BUILD)/libtidemark.a
endif
# Every object, every symbol: for the unit tests, which call internals.
INT_LIB := $(BUILD)/libtidemark-internal.a
# The calls tidemark.h declares: the only global symbols of $(TM_LIB).
TM_SYMS := $(BUILD)/tidemark.syms

.PHONY: demo all deps check check-layers test test-asan test-sanitize unit \
        integration integration-fast bench \
        bench-locks bench-locks-raw bench-conns bench-busy bench-instr bench-readme bench-logstorm bench-marks bench-marks-counts bench-batch bench-watch embed \
        format-check install clean deb test-deb image test-image fuzz \
        check-docs packaged-ini lab chaos

all: $(TM_BIN) $(TM_LIB)

demo:
	sh tests/demo.sh

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(TM_CFLAGS) $(CFLAGS) -c -o $@ $<

# The version is compiled into the registry (tidemark_build_info).
$(BUILD)/proxy/metrics.o: packaging/debian/changelog

$(INT_LIB): $(LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

$(TM_SYMS): proxy/tidemark.h
	@mkdir -p $(dir $@)
	grep -o '\btm_[a-z0-9_]*(' $< | tr -d '(' | sort -u > $@

# The public archive: one relocatable object made of every object, in
# which every global symbol but the calls of tidemark.h is made local, so
# that an embedder's own symbols (log_write, store_find, ...) cannot
# clash with the library's.
$(TM_LIB): $(LIB_OBJ) $(TM_SYMS)
	rm -f $@ $(BUILD)/libtidemark.o
	$(LD) -r -o $(BUILD)/libtidemark.o $(LIB_OBJ)
	objcopy --keep-global-symbols=$(TM_SYMS) $(BUILD)/libtidemark.o
	ar rcs $@ $(BUILD)/libtidemark.o

# The version is compiled into tm_version().
$(BUILD)/conf/config.o: packaging/debian/changelog

# What --version --verbose shows of the build: the flags, the sanitizers
# among them, and inih's version (it has no call that says it).
TM_SANITIZE := $(patsubst -fsanitize=%,%,$(filter -fsanitize=%,$(CFLAGS)))
$(BUILD)/proxy/build_info.o: TM_CFLAGS += \
    -DTM_BUILD_CFLAGS='"$(subst ",,$(subst ',,$(CFLAGS)))"' \
    -DTM_BUILD_SANITIZE='"$(or $(TM_SANITIZE),none)"' \
    -DTM_INIH_VERSION='"$(shell pkg-config --modversion inih 2>/dev/null)"'

# The daemon links the public archive: it uses tidemark.h alone; and
# libsystemd for sd_notify (the library does not).
$(BUILD)/proxy/main.o: TM_CFLAGS += $(shell pkg-config --cflags libsystemd)
$(TM_BIN): $(BUILD)/proxy/main.o $(TM_LIB)
	$(CC) $(TM_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS) \
	    $(shell pkg-config --libs libsystemd)

# The option table as documentation: cfgdoc man | ini | check.
$(BUILD)/tools/cfgdoc: conf/tools/cfgdoc.c $(INT_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(TM_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(INT_LIB) $(LDLIBS)

# The metrics registry as documentation: metricsdoc list | check.
$(BUILD)/tools/metricsdoc: proxy/tools/metricsdoc.c proxy/metrics.h
	@mkdir -p $(dir $@)
	$(CC) $(TM_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $<

# The pages a reader meets: the README and one document per reader in
# doc/. doc/operations.md holds the configuration reference and the
# metrics list.
DOC_PAGES := README.md $(wildcard doc/*.md)
DOC_OTHERS := $(filter-out doc/operations.md,$(DOC_PAGES))

check-docs: $(BUILD)/tools/cfgdoc $(BUILD)/tools/metricsdoc
	$(BUILD)/tools/cfgdoc check doc/tidemark.8 conf/tidemark.ini \
	    doc/operations.md $(DOC_OTHERS)
	$(BUILD)/tools/metricsdoc check doc/operations.md $(DOC_OTHERS)
	/usr/bin/python3 tests/check-links.py $(DOC_PAGES)
	/usr/bin/python3 tests/bench/readme.py --check
	@sh packaging/packaged-ini.sh | cmp -s - packaging/tidemark.ini || \
	    { echo "check-docs: packaging/tidemark.ini is not what" \
	        "packaging/packaged-ini.sh makes of conf/tidemark.ini:" \
	        "run make packaged-ini" >&2; exit 1; }
	@echo "check-docs: packaging/tidemark.ini is conf/tidemark.ini's"

# The packaged /etc/tidemark/tidemark.ini, written from conf/tidemark.ini.
packaged-ini:
	sh packaging/packaged-ini.sh > packaging/tidemark.ini

$(BUILD)/tests/%: tests/unit/%.c $(INT_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(TM_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(INT_LIB) $(LDLIBS) -lcmocka

deps:
	@sh tests/deps.sh

# Each unit test binary runs in seconds; one still running after 300 s
# is stopped and fails the run, rather than hold it to CI's limit.
unit: $(UNIT_BIN)
	@for t in $(UNIT_BIN); do echo "== $$t"; \
	    timeout -k 10 300 $$t; rc=$$?; \
	    if [ $$rc = 124 ]; then echo "== $$t: still running after 300 s; stopped"; fi; \
	    if [ $$rc != 0 ]; then exit $$rc; fi; \
	done

# Install into a staging tree, build the example with pkg-config against
# it, run it; and check the archive's symbols.
STAGE := $(abspath $(BUILD)/stage)
embed: $(TM_BIN) $(TM_LIB) $(TM_SYMS)
	sh tests/check-symbols.sh $(TM_LIB) $(TM_SYMS)
	rm -rf $(STAGE)
	$(MAKE) --no-print-directory install DESTDIR=$(STAGE) PREFIX=/usr/local
	PKG_CONFIG_PATH=$(STAGE)/usr/local/lib/pkgconfig \
	PKG_CONFIG_SYSROOT_DIR=$(STAGE) \
	    sh tests/embed/build.sh $(CC) "$(CFLAGS)" "$(LDFLAGS)" \
	    examples/embed.c $(BUILD)/embed
	$(BUILD)/embed
	PKG_CONFIG_PATH=$(STAGE)/usr/local/lib/pkgconfig \
	PKG_CONFIG_SYSROOT_DIR=$(STAGE) \
	    sh tests/embed/readme.sh $(CC) "$(CFLAGS)" "$(LDFLAGS)" $(BUILD)

PRELOADS := tests/preload/failsync.so tests/preload/fakehosts.so

# The failure lab's clock shim (LD_PRELOAD into one Redis node): plain
# flags, never the sanitizer build's.
LAB_SO := lab/clockjump.so
$(LAB_SO): lab/clockjump.c
	$(CC) -shared -fPIC -O2 -g -Wall -Wextra -Werror -o $@ $<

lab: $(TM_BIN) $(LAB_SO)
	/usr/bin/python3 lab/tidemark-lab --tidemark $(abspath $(TM_BIN)) \
	    --numbers --out lab-report.html --json lab-report.json

integration: $(TM_BIN) $(PRELOADS) $(LAB_SO)
	TIDEMARK_BIN=$(abspath $(TM_BIN)) $(PYTEST) -q -rs -p no:cacheprovider \
	    $(XDIST) tests/integration

# The integration tests of the fast tier only.
integration-fast: $(TM_BIN) $(PRELOADS)
	TIDEMARK_BIN=$(abspath $(TM_BIN)) $(PYTEST) -q -rs -p no:cacheprovider \
	    $(XDIST) -m "$(FAST_TIER)" tests/integration

check:
	$(MAKE) format-check
	$(MAKE) -j2 all
	$(MAKE) unit
	$(MAKE) embed
	$(MAKE) check-docs
	$(MAKE) check-layers
	$(MAKE) integration-fast

chaos: $(TM_BIN)
	TIDEMARK_BIN=$(abspath $(TM_BIN)) /usr/bin/python3 tests/chaos/chaos.py \
	    --seed "$(SEED)" --duration $(or $(DURATION),60) \
	    --store $(or $(STORE),lmdb) $(if $(LEASE),--lease)

tests/preload/%.so: tests/preload/%.c
	$(CC) -shared -fPIC -O2 -Wall -Wextra -Werror -o $@ $< -ldl

test: deps
	$(MAKE) format-check
	$(MAKE) all
	$(MAKE) unit
	$(MAKE) embed
	$(MAKE) check-layers
	$(MAKE) test-image
	$(MAKE) integration TIDEMARK_IMAGE=$(abspath $(IMAGE))
	$(MAKE) test-sanitize
	FUZZ_SECONDS=5 $(MAKE) fuzz
	sh packaging/check-manpage.sh
	$(MAKE) check-docs
	$(MAKE) test-deb

ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
              -fno-sanitize-recover=undefined

test-asan: deps
	$(MAKE) BUILD=build-asan CFLAGS="$(ASAN_FLAGS)" \
	    LDFLAGS="-fsanitize=address,undefined" all
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	$(MAKE) BUILD=build-asan CFLAGS="$(ASAN_FLAGS)" \
	    LDFLAGS="-fsanitize=address,undefined" unit embed integration

# Names and values from outside in every length class and with odd bytes,
# the fast suites that feed tidemark hostile requests, and a process out
# of file descriptors, and the drain's end (what a refused client sent, in
# every length class, read and dropped), against the ASan + UBSan build: a sanitizer report in tidemark's log, or a tidemark
# that died, fails the test (conftest.py's teardown).
SANITIZE_TESTS := $(addprefix tests/integration/,test_lengths.py \
                  test_canon.py test_refusals.py test_token_smuggling.py \
                  test_smuggling_scanners.py test_limits.py \
                  test_descriptors.py test_store.py test_lifecycle.py \
                  test_logs.py test_log_escape.py test_journal_file.py \
                  test_store_answer_size.py)

test-sanitize:
	$(MAKE) BUILD=build-asan CFLAGS="$(ASAN_FLAGS)" \
	    LDFLAGS="-fsanitize=address,undefined" all
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	TIDEMARK_BIN=$(abspath build-asan/tidemark) $(PYTEST) -q -rs \
	    -p no:cacheprovider $(XDIST) $(SANITIZE_TESTS)

bench: deps all tests/preload/nosync.so $(BUILD)/tools/premark \
       $(BUILD)/tools/fsyncloop
	PREMARK=$(abspath $(BUILD)/tools/premark) \
	FSYNCLOOP=$(abspath $(BUILD)/tools/fsyncloop) sh tests/bench/run.sh

# The bench's bulk loader of marks (tests/bench/premark.c), on the store's
# own code.
$(BUILD)/tools/premark: tests/bench/premark.c $(INT_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(TM_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(INT_LIB) $(LDLIBS)

# The raises set's floor: one append and fdatasync at a time.
$(BUILD)/tools/fsyncloop: tests/bench/fsyncloop.c
	@mkdir -p $(dir $@)
	$(CC) $(TM_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $<

bench-locks: deps all
	BACKEND=$(or $(BACKEND),lmdb) sh tests/bench/locks.sh

bench-locks-raw: deps
	sh tests/bench/locks_raw.sh

bench-conns: all
	TIDEMARK_BIN=$(abspath $(TM_BIN)) /usr/bin/python3 tests/bench/conns.py

bench-busy: all
	TIDEMARK_BIN=$(abspath $(TM_BIN)) /usr/bin/python3 tests/bench/busy.py

bench-instr: all
	TIDEMARK_BIN=$(abspath $(TM_BIN)) /usr/bin/python3 tests/bench/instr.py

bench-readme:
	/usr/bin/python3 tests/bench/readme.py

bench-logstorm: all
	TIDEMARK_BIN=$(abspath $(TM_BIN)) sh tests/bench/logstorm.sh

bench-marks: all $(BUILD)/tools/premark
	MARKS_BINS="$${MARKS_BINS:-tidemark=$(abspath $(TM_BIN))}" \
	PREMARK=$(abspath $(BUILD)/tools/premark) sh tests/bench/marks.sh

bench-marks-counts: all $(BUILD)/tools/premark
	TIDEMARK_BIN=$(abspath $(TM_BIN)) PREMARK=$(abspath $(BUILD)/tools/premark) \
	/usr/bin/python3 tests/bench/marks_counts.py

bench-batch: $(BUILD)/tools/batchanswer
	taskset -c 1 $(BUILD)/tools/batchanswer

$(BUILD)/tools/batchanswer: tests/bench/batchanswer.c $(INT_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(TM_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(INT_LIB) $(LDLIBS)

bench-watch: all
	TIDEMARK_BIN=$(abspath $(TM_BIN)) /usr/bin/python3 \
	    tests/bench/watch_window.py

format-check:
	clang-format --dry-run --Werror $(shell git ls-files '*.c' '*.h')

check-layers:
	sh tests/check-layers.sh

LABDIR  ?= $(PREFIX)/lib/tidemark/lab

install: $(TM_BIN) $(TM_LIB) $(LAB_SO)
	install -D -m 0755 $(TM_BIN) $(DESTDIR)$(PREFIX)/bin/tidemark
	install -D -m 0755 lab/tidemark-lab $(DESTDIR)$(PREFIX)/bin/tidemark-lab
	install -D -m 0644 -t $(DESTDIR)$(LABDIR)/tmlab lab/tmlab/*.py
	install -D -m 0644 -t $(DESTDIR)$(LABDIR) tests/integration/servers.py \
	    tests/integration/common.py
	install -D -m 0644 $(LAB_SO) $(DESTDIR)$(LABDIR)/clockjump.so
	install -D -m 0644 $(TM_LIB) $(DESTDIR)$(LIBDIR)/libtidemark.a
	install -D -m 0644 proxy/tidemark.h $(DESTDIR)$(INCLUDEDIR)/tidemark.h
	@mkdir -p $(DESTDIR)$(LIBDIR)/pkgconfig
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@VERSION@|$(VERSION)|' \
	    -e 's|@REQUIRES@|$(PKGS)|' -e 's|@LIBS@|$(ZK_LIBS)|' \
	    packaging/tidemark.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/tidemark.pc
	install -D -m 0644 conf/tidemark.ini \
	    $(DESTDIR)$(PREFIX)/share/tidemark/tidemark.ini
	install -D -m 0644 doc/tidemark.8 \
	    $(DESTDIR)$(MANDIR)/man8/tidemark.8
	install -D -m 0644 doc/tidemark-lab.1 \
	    $(DESTDIR)$(MANDIR)/man1/tidemark-lab.1

deb:
	sh packaging/build-deb.sh out

test-deb: deb
	sh packaging/smoke-deb.sh out/tidemark_*.deb

# The container image, with buildah from Debian's packages (no registry):
# tidemark:$(VERSION) as a docker-archive in out/ (docker or podman load).
IMAGE := out/tidemark-image_$(VERSION).tar
image: deb
	sh packaging/build-image.sh out/tidemark_$(VERSION)_*.deb $(IMAGE)

# Run the image's tidemark as its user against its own configuration,
# and its HEALTHCHECK, labels and size (tests/integration/test_image.py).
test-image: image
	sh packaging/smoke-image.sh $(IMAGE)
	TIDEMARK_BIN=$(abspath $(TM_BIN)) TIDEMARK_IMAGE=$(abspath $(IMAGE)) \
	    $(PYTEST) -q -rs -p no:cacheprovider tests/integration/test_image.py

fuzz:
	sh tests/fuzz/run.sh

clean:
	rm -rf build build-asan build-fuzz out tidemark libtidemark.a \
	    tests/preload/*.so $(LAB_SO) lab-report.html lab-report.json

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
