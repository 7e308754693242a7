# peakscope build. `make` builds everything; `make run` records the embedded
# LoRA training step and reports it; `make test` runs every test.
# Folders hold their sources; adding a .cc to a folder adds it to the build.

BUILD      ?= build
CXX        ?= g++
PYTHON     ?= /usr/bin/python3
OPT        ?= -O2
CXXFLAGS   ?= $(OPT) -g
WARN       := -Wall -Wextra -Wno-missing-field-initializers
GENERATED  := $(BUILD)/generated
CPPFLAGS   := -I. -Iinclude -I$(GENERATED) -MMD -MP
CXXSTD     := -std=c++20
JOBS       ?= $(shell nproc)
CUDA_HOME  ?= /usr/local/cuda
NVCC       ?= $(CUDA_HOME)/bin/nvcc
# Builds in parallel (a job per core) unless -j is given, and quietly: one
# line per file built; V=1 prints the commands instead.
MAKEFLAGS  += -j$(JOBS)
V          ?= 0
ifeq ($(V),1)
say         = @:
else
MAKEFLAGS  += -s
say         = @printf '  %-6s %s\n' '$(1)' '$(2)'
endif
# Extension points for folders' own makefiles (*/module.mk): products to build
# with `make`, and products `make test` needs.
ALL_EXTRA  :=
TEST_EXTRA :=

# The preloaded library: hooks, recorder and the shared event and file format.
# No libstdc++ beyond headers, no exceptions, no RTTI; it links nothing of the
# reading half.
# tools/layers is the one table of layers: the folders tagged "preload" go into
# it, those tagged "archive" are the reading half below.
layers_tagged = $(shell sed -n 's/^\([a-z_]*\):[^|]*|.*\<$(1)\>.*/\1/p' tools/layers)
reverse = $(if $(1),$(call reverse,$(wordlist 2,$(words $(1)),$(1))) $(firstword $(1)))
# A layer is a top folder: its sources are every .cc under it.
sources_under = $(sort $(shell find $(1) -name '*.cc' 2>/dev/null))
PRELOAD_SRCS := $(foreach l,$(call layers_tagged,preload),$(call sources_under,$(l)))
PRELOAD_FLAGS := -isystem $(CUDA_HOME)/include -fPIC -fno-exceptions -fno-rtti -fvisibility=hidden -ftls-model=initial-exec \
                 -fno-stack-protector -fno-threadsafe-statics -DPSC_PRELOAD
# The reading half, one archive per layer tagged "archive" in tools/layers,
# listed top first: the order a linker needs. "archive=DIR" takes DIR's sources
# only. The CLI's main (cli/main.cc) stays out of the cli archive.
LAYERS := $(strip $(call reverse,$(call layers_tagged,archive)))
ARCHIVE_DIRS := $(shell sed -n 's/^\([a-z_]*\):.*|.*\<archive=\([^ ]*\).*/\1=\2/p' tools/layers)
layer_dir = $(or $(patsubst $(1)=%,%,$(filter $(1)=%,$(ARCHIVE_DIRS))),$(1))
layer_srcs = $(filter-out cli/main.cc,$(call sources_under,$(call layer_dir,$(1))))
READ_SRCS := $(foreach l,$(LAYERS),$(call layer_srcs,$(l)))
SUPPORT_SRCS   := $(wildcard tests/support/*.cc)
# Unit tests (in process, by subject) and end-to-end tests (they run the
# recorder, the CLI or other programs), each one gtest binary.
UNIT_SRCS      := $(call sources_under,tests/unit)
E2E_SRCS       := $(call sources_under,tests/end_to_end)
BENCH_SRCS     := $(wildcard tests/bench/*.cc)
PROGRAM_SRCS   := $(wildcard tests/programs/*.cc)

obj = $(patsubst %.cc,$(BUILD)/$(1)/%.o,$(2))

PRELOAD_OBJS   := $(call obj,preload,$(PRELOAD_SRCS))
SUPPORT_OBJS   := $(call obj,lib,$(SUPPORT_SRCS))
UNIT_OBJS      := $(call obj,lib,$(UNIT_SRCS)) $(SUPPORT_OBJS)
E2E_OBJS       := $(call obj,lib,$(E2E_SRCS)) $(SUPPORT_OBJS)
BENCH_OBJS     := $(call obj,lib,$(BENCH_SRCS)) $(SUPPORT_OBJS)
PROGRAMS       := $(patsubst tests/programs/%.cc,$(BUILD)/programs/%,$(PROGRAM_SRCS))

PRELOAD := $(BUILD)/libpeakscope_preload.so
# libpsc_<layer>.a, top first; `$(LIBS)` links them all.
LIBS    := $(foreach l,$(LAYERS),$(BUILD)/lib/libpsc_$(l).a)
CLI     := $(BUILD)/peakscope
UNIT    := $(BUILD)/unit_tests
E2E     := $(BUILD)/end_to_end_tests
BENCH   := $(BUILD)/benchmarks
# The calibrated predictor behind a C ABI (include/peakscope/estimator.h),
# for Python through ctypes: exports the psc_calibration_* functions only.
CAPI_SRC := capi/estimator_capi.cc
CAPI_OBJ := $(BUILD)/capi/estimator_capi.o
CAPI_MAP := capi/peakscope_estimator.map
CAPI_LIB := $(BUILD)/libpeakscope_estimator.so
DEPS_STAMP := $(BUILD)/.deps-build

.PHONY: FORCE all deps deps-torch deps-viewers deps-install run test unit end-to-end bench lint docs format \
        clean install uninstall
all: $(PRELOAD) $(CLI) $(CAPI_LIB) $(PROGRAMS) all-extra

# Folder makefiles add rules and append to ALL_EXTRA / TEST_EXTRA.
include $(sort $(wildcard */module.mk */*/module.mk))
all-extra: $(ALL_EXTRA)

# ---- dependencies (installed on demand, quiet when present) -------------------
deps: $(DEPS_STAMP)
$(DEPS_STAMP):
	@tools/ensure-deps build
	@mkdir -p $(BUILD) && touch $@
deps-torch:
	@tools/ensure-deps torch
# What tests/cli/test_install.sh uses: pip, setuptools, wheel, pkg-config.
deps-install:
	@tools/ensure-deps install

# The real programs the viewer tests open exports with: Chromium, protoc,
# Nsight Systems (tests/html, tests/end_to_end/exchange/export_perfetto_test.cc, tests/cli/test_nsys.sh).
deps-viewers:
	@tools/ensure-deps viewers
	@tools/ensure-deps nsys

# ---- generated ----------------------------------------------------------------
# The pricing fingerprint that reports carry (pricing/pricing_fingerprint.h),
# from the tokens of the sources that decide a price. The tool rewrites the
# header only when the value changes, so a comment edit rebuilds nothing.
FINGERPRINT_SRCS := $(sort $(filter-out pricing/saved_price.% pricing/pricing_fingerprint.h,$(wildcard pricing/*.cc pricing/*.h)))
FINGERPRINT_H    := $(GENERATED)/pricing/fingerprint_value.h
$(FINGERPRINT_H): $(FINGERPRINT_SRCS) tools/pricing-fingerprint FORCE | $(DEPS_STAMP)
	@$(PYTHON) tools/pricing-fingerprint --header $@ $(FINGERPRINT_SRCS)
FORCE:

# The version, written once in python/peakscope/_version.py (the package's
# own, and pyproject.toml's): the CLI prints it (`peakscope --version`, the
# man page) and peakscope.pc carries it.
VERSION := $(shell sed -n 's/^__version__ = "\([^"]*\)"$$/\1/p' python/peakscope/_version.py)
VERSION_H := $(GENERATED)/cli/version_value.h
$(VERSION_H): python/peakscope/_version.py
	@mkdir -p $(dir $@)
	@printf '// Generated by the Makefile from python/peakscope/_version.py.\n#pragma once\nnamespace psc::cli {\ninline constexpr const char kVersionText[] = "%s";\n}\n' '$(VERSION)' >$@

# ---- objects ------------------------------------------------------------------
$(BUILD)/preload/%.o: %.cc | $(DEPS_STAMP)
	$(call say,CXX,$<)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXSTD) $(CXXFLAGS) $(WARN) $(CPPFLAGS) $(PRELOAD_FLAGS) -c $< -o $@

# -fPIC: the archive's objects also go into the estimator's shared library.
# The stamp is newer than objects built before that flag: they build again once.
LIB_PIC_STAMP := $(BUILD)/lib/.fpic
$(LIB_PIC_STAMP):
	@mkdir -p $(dir $@) && touch $@
$(BUILD)/lib/%.o: %.cc $(LIB_PIC_STAMP) | $(DEPS_STAMP) $(FINGERPRINT_H) $(VERSION_H)
	$(call say,CXX,$<)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXSTD) $(CXXFLAGS) $(WARN) $(CPPFLAGS) -fPIC -c $< -o $@

$(CAPI_OBJ): $(CAPI_SRC) | $(DEPS_STAMP) $(FINGERPRINT_H)
	$(call say,CXX,$<)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXSTD) $(CXXFLAGS) $(WARN) $(CPPFLAGS) -fPIC -fvisibility=hidden -c $< -o $@

# ---- products -----------------------------------------------------------------
# Linked with gcc, not g++: the injected library needs no libstdc++ at run time.
$(PRELOAD): $(PRELOAD_OBJS)
	$(call say,LINK,$@)
	$(CC) -shared -o $@ $^ -Wl,--no-undefined -Wl,-z,nodelete -ldl -lpthread -lc

define layer_archive
$(BUILD)/lib/libpsc_$(1).a: $(call obj,lib,$(call layer_srcs,$(1)))
	$$(call say,AR,$$@)
	@rm -f $$@
	ar rcs $$@ $$^
endef
$(foreach l,$(LAYERS),$(eval $(call layer_archive,$(l))))

$(CLI): $(BUILD)/lib/cli/main.o $(LIBS) $(PRELOAD)
	$(call say,LINK,$@)
	$(CXX) -o $@ $(BUILD)/lib/cli/main.o $(LIBS) -lfmt -lsqlite3 -ldeflate -lpthread

# Nothing of the archive (or of fmt's headers) is exported: the version script
# keeps the psc_calibration_* functions global and everything else local.
$(CAPI_LIB): $(CAPI_OBJ) $(LIBS) $(CAPI_MAP)
	$(call say,LINK,$@)
	$(CXX) -shared -o $@ $(CAPI_OBJ) $(LIBS) -Wl,--exclude-libs,ALL -Wl,--version-script=$(CAPI_MAP) \
	  -Wl,--no-undefined -lfmt -lsqlite3 -lpthread

$(BUILD)/programs/%: tests/programs/%.cc | $(DEPS_STAMP)
	$(call say,CXX,$<)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXSTD) $(CXXFLAGS) $(WARN) $(CPPFLAGS) $< -o $@ -lpthread -ldl

$(UNIT): $(UNIT_OBJS) $(CAPI_OBJ) $(LIBS)
	$(call say,LINK,$@)
	$(CXX) -o $@ $(UNIT_OBJS) $(CAPI_OBJ) $(LIBS) -lgtest -lgtest_main -lfmt -lsqlite3 -ldeflate -lz -lpthread

$(E2E): $(E2E_OBJS) $(LIBS)
	$(call say,LINK,$@)
	$(CXX) -o $@ $(E2E_OBJS) $(LIBS) -lgtest -lgtest_main -lfmt -lsqlite3 -ldeflate -lz -lpthread

$(BENCH): $(BENCH_OBJS) $(LIBS)
	$(call say,LINK,$@)
	$(CXX) -o $@ $(BENCH_OBJS) $(LIBS) -lbenchmark -lfmt -lsqlite3 -ldeflate -lz -lpthread

# ---- install ------------------------------------------------------------------
# `make install PREFIX=/usr DESTDIR=/staging`; `make uninstall` with the same
# variables removes exactly those files. The CLI finds the recorder library
# at ../lib beside its own folder (cli/recorder_library.h) and the Python
# package finds both from the prefix it sits under (python/peakscope/locate.py),
# so LIBDIR is PREFIX/lib, not a variable. PYTHONDIR is where this Python looks
# for packages under PREFIX (Debian: /usr/lib/python3/dist-packages for /usr,
# /usr/local/lib/python3.X/dist-packages for /usr/local); set it for another.
PREFIX     ?= /usr/local
DESTDIR    ?=
BINDIR     := $(PREFIX)/bin
LIBDIR     := $(PREFIX)/lib
INCLUDEDIR := $(PREFIX)/include
MANDIR     := $(PREFIX)/share/man
PYTHONDIR  ?= $(shell $(PYTHON) -c 'import sys; p = "$(PREFIX)"; v = "python%d.%d" % sys.version_info[:2]; \
                print(p + {"/usr": "/lib/python3/dist-packages", "/usr/local": "/lib/" + v + "/dist-packages"} \
                      .get(p, "/lib/" + v + "/site-packages"))')
MAN_PAGE   := $(BUILD)/peakscope.1
HEADERS    := $(wildcard include/peakscope/*.h)
PY_FILES   := $(wildcard python/peakscope/*.py) python/peakscope/trace_tracker.cpp
INSTALLED  := $(BINDIR)/peakscope $(LIBDIR)/libpeakscope_preload.so $(LIBDIR)/libpeakscope_estimator.so \
              $(LIBDIR)/pkgconfig/peakscope.pc $(MANDIR)/man1/peakscope.1 \
              $(patsubst include/%,$(INCLUDEDIR)/%,$(HEADERS)) \
              $(patsubst python/%,$(PYTHONDIR)/%,$(PY_FILES))

# The manual page is the command table's (cli/command_table.cc), printed by the CLI.
$(MAN_PAGE): $(CLI)
	$(CLI) help --man >$@

install: $(PRELOAD) $(CLI) $(CAPI_LIB) $(MAN_PAGE)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)/peakscope \
	  $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(PYTHONDIR)/peakscope
	install -m 755 $(CLI) $(DESTDIR)$(BINDIR)/peakscope
	install -m 755 $(PRELOAD) $(CAPI_LIB) $(DESTDIR)$(LIBDIR)/
	install -m 644 $(HEADERS) $(DESTDIR)$(INCLUDEDIR)/peakscope/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' capi/peakscope.pc.in \
	  >$(DESTDIR)$(LIBDIR)/pkgconfig/peakscope.pc
	install -m 644 $(MAN_PAGE) $(DESTDIR)$(MANDIR)/man1/peakscope.1
	install -m 644 $(PY_FILES) $(DESTDIR)$(PYTHONDIR)/peakscope/

# What install wrote, the bytecode Python compiled from the package's modules,
# and the package's and headers' folders once empty; nothing else.
uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	rm -f $(foreach f,$(wildcard python/peakscope/*.py),$(DESTDIR)$(PYTHONDIR)/peakscope/__pycache__/$(basename $(notdir $(f))).*.pyc)
	-rmdir $(DESTDIR)$(PYTHONDIR)/peakscope/__pycache__ $(DESTDIR)$(PYTHONDIR)/peakscope \
	  $(DESTDIR)$(INCLUDEDIR)/peakscope 2>/dev/null

# ---- the two promised commands -------------------------------------------------
run: all deps-torch
	@tools/run-default

test: all $(UNIT) $(E2E) $(TEST_EXTRA) deps-torch deps-viewers deps-install
	@tools/run-tests

unit: $(UNIT)
	$(UNIT)

end-to-end: all $(E2E)
	$(E2E)

bench: all $(BENCH)
	@tools/run-bench

# lint also checks that README's generated sections (the layer table, the
# command table) are what `make docs` writes; the commands' come from the CLI.
lint: $(CLI)
	@BUILD=$(BUILD) tools/lint

docs: $(CLI)
	@BUILD=$(BUILD) tools/docs

format:
	@clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
