# `make fuzz`: libFuzzer targets (clang, -fsanitize=fuzzer,address,undefined)
# for every reader of outside input: the .pstrace reader (with the analysis on
# what it reads), the torch-snapshot importer (pickle subset reader included),
# the nsys-sqlite importer, and the CLI's JSON inputs: plans (`price`),
# calibrations (`price --calibration`, `check`) and saved reports (`replay`). Each runs FUZZ_SECONDS (default 20) from the
# seed corpus in tests/fuzz/corpus/<target>; what it finds goes to
# $(BUILD)/fuzz/corpus-<target>, crashes to $(BUILD)/fuzz/ (reproduce with
# `$(BUILD)/fuzz/<target> CRASH-FILE`). `make test` runs two of them (fuzz-ci, below).
FUZZ_CXX      ?= clang++
FUZZ_SECONDS  ?= 20
FUZZ_DIR      := $(BUILD)/fuzz
FUZZ_SAN      := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CXXFLAGS := $(CXXSTD) -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link -I. -Iinclude -I$(GENERATED) -MMD -MP
FUZZ_LIB_SRCS := $(filter-out cli/%,$(READ_SRCS))
FUZZ_LIB_OBJS := $(patsubst %.cc,$(FUZZ_DIR)/obj/%.o,$(FUZZ_LIB_SRCS))
FUZZ_TARGETS  := fuzz_reader fuzz_torch_snapshot fuzz_nsys_sqlite fuzz_plan fuzz_calibration fuzz_report
FUZZ_BINS     := $(addprefix $(FUZZ_DIR)/,$(FUZZ_TARGETS))

$(FUZZ_DIR)/obj/%.o: %.cc | $(DEPS_STAMP) $(FINGERPRINT_H)
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(FUZZ_CXXFLAGS) -c $< -o $@

$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/obj/tests/fuzz/fuzz_%.o $(FUZZ_LIB_OBJS)
	$(FUZZ_CXX) $(CXXSTD) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ -lfmt -lsqlite3 -ldeflate -lz -lpthread


# The objects are intermediates of a pattern rule: keep them, or every
# `make fuzz` compiles the whole reading half again.
.SECONDARY: $(FUZZ_LIB_OBJS) $(patsubst %,$(FUZZ_DIR)/obj/tests/fuzz/%.o,$(FUZZ_TARGETS))

.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_BINS)
fuzz: $(FUZZ_BINS)
	@for t in $(FUZZ_TARGETS); do \
	  seeds=tests/fuzz/corpus/$$(echo $$t | sed -e 's/^fuzz_//' -e 's/torch_snapshot/pickle/' -e 's/nsys_sqlite/nsys/'); \
	  work=$(FUZZ_DIR)/corpus-$$t; mkdir -p $$work; \
	  echo "== $$t ($(FUZZ_SECONDS) s, seeds $$seeds)"; \
	  (cd $(FUZZ_DIR) && ./$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
	     -print_final_stats=1 corpus-$$t $(CURDIR)/$$seeds) >$(FUZZ_DIR)/$$t.log 2>&1; status=$$?; \
	  grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ *DONE)' $(FUZZ_DIR)/$$t.log | tr '\n' ' '; echo; \
	  if [ $$status -ne 0 ]; then tail -n 40 $(FUZZ_DIR)/$$t.log; echo "fuzz: $$t failed (log: $(FUZZ_DIR)/$$t.log)"; exit 1; fi; \
	done; rm -f /tmp/peakscope-fuzz-*; echo "fuzz: no crash, hang or leak in $(FUZZ_TARGETS)"

# `make test` fuzzes the inputs that need only the pricing model for a fixed
# time (FUZZ_CI_SECONDS each, from the corpus in the repository): plans and
# saved reports. Their objects are the pricing and common layers alone, so the
# build stays small; every other target runs under `make fuzz`. Skipped where
# clang++ is missing.
FUZZ_CI_SECONDS := 10
FUZZ_CI_TARGETS := fuzz_plan fuzz_report
FUZZ_CI_OBJS    := $(patsubst %.cc,$(FUZZ_DIR)/obj/%.o,$(wildcard pricing/*.cc common/*.cc))
.SECONDARY: $(FUZZ_CI_OBJS)

$(FUZZ_DIR)/ci/fuzz_%: $(FUZZ_DIR)/obj/tests/fuzz/fuzz_%.o $(FUZZ_CI_OBJS)
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(CXXSTD) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ -lfmt -lpthread

.PHONY: fuzz-ci
ifneq ($(shell command -v $(FUZZ_CXX) 2>/dev/null),)
fuzz-ci: $(addprefix $(FUZZ_DIR)/ci/,$(FUZZ_CI_TARGETS))
	@for t in $(FUZZ_CI_TARGETS); do \
	  seeds=$(CURDIR)/tests/fuzz/corpus/$${t#fuzz_}; work=$(FUZZ_DIR)/ci/corpus-$$t; mkdir -p $$work; \
	  (cd $(FUZZ_DIR)/ci && ./$$t -max_total_time=$(FUZZ_CI_SECONDS) -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
	     -print_final_stats=1 corpus-$$t $$seeds) >$(FUZZ_DIR)/ci/$$t.log 2>&1; status=$$?; \
	  runs=$$(grep -oE '^stat::number_of_executed_units: *[0-9]+' $(FUZZ_DIR)/ci/$$t.log | grep -oE '[0-9]+$$'); \
	  if [ $$status -eq 0 ]; then echo "ok fuzz $$t: $${runs:-?} inputs in $(FUZZ_CI_SECONDS) s, no crash, hang or leak"; \
	  else echo "not ok fuzz $$t (log: $(FUZZ_DIR)/ci/$$t.log)"; tail -n 30 $(FUZZ_DIR)/ci/$$t.log; fi; \
	done
else
fuzz-ci:
	@echo "ok fuzz: skipped ($(FUZZ_CXX) not found)"
endif
