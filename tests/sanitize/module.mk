# `make sanitize`: sanitizers on everything that is not injected.
#  - ASan + UBSan: the unit and end-to-end tests in one binary (the recorder
#    tests inside still run the real, unsanitized preload, as in production)
#  - TSan: the runtime's lock-free code linked directly into a stress program
.PHONY: sanitize
SAN_DIR := $(BUILD)/sanitize
SAN_ASAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
SAN_LIB_SRCS := $(READ_SRCS) $(SUPPORT_SRCS) $(CAPI_SRC)
SAN_ASAN_OBJS := $(patsubst %.cc,$(SAN_DIR)/asan/%.o,$(SAN_LIB_SRCS) $(UNIT_SRCS) $(E2E_SRCS))
SAN_TSAN_SRCS := $(wildcard runtime/*.cc) $(wildcard format/*.cc) traces/reader.cc common/input_file.cc tests/sanitize/recorder_stress.cc

$(SAN_DIR)/asan/%.o: %.cc | $(DEPS_STAMP) $(FINGERPRINT_H)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXSTD) -O1 -g $(SAN_ASAN) $(WARN) $(CPPFLAGS) -c $< -o $@

$(SAN_DIR)/unit_tests: $(SAN_ASAN_OBJS)
	$(CXX) $(SAN_ASAN) -o $@ $^ -lgtest -lgtest_main -lfmt -lsqlite3 -ldeflate -lz -lpthread -ldl

$(SAN_DIR)/recorder_stress: $(SAN_TSAN_SRCS) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXSTD) -O1 -g -fsanitize=thread -I. -Iinclude -isystem $(CUDA_HOME)/include $(filter %.cc,$^) -o $@ -lfmt -lpthread -ldl

sanitize: all $(SAN_DIR)/unit_tests $(SAN_DIR)/recorder_stress
	PSC_BUILD_DIR=$(abspath $(BUILD)) $(SAN_DIR)/unit_tests --gtest_brief=1
	@rm -f $(SAN_DIR)/stress.pstrace
	PEAKSCOPE_OUTPUT=$(SAN_DIR)/stress.pstrace TSAN_OPTIONS=halt_on_error=1 \
	  sh -c 'PEAKSCOPE_PRIMARY_PID=$$$$ exec $(SAN_DIR)/recorder_stress $(SAN_DIR)/stress.pstrace'
