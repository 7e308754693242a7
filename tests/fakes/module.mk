# Test doubles of the CUDA driver and runtime (see tests/fakes/fake_cuda.cc and
# fake_cudart.cc). Both go in $(BUILD)/fakes under the real sonames, so
# LD_LIBRARY_PATH=$(BUILD)/fakes makes any program load them instead of a real
# CUDA installation. -Bsymbolic-functions: like the real libraries, the doubles
# call their own functions directly, never through a hooked export.
FAKES_DIR   := $(BUILD)/fakes
FAKE_CUDA   := $(FAKES_DIR)/libcuda.so.1
FAKE_CUDART := $(FAKES_DIR)/libcudart.so.13
FAKE_FLAGS  := $(CXXSTD) $(CXXFLAGS) $(WARN) $(CPPFLAGS) -isystem $(CUDA_HOME)/include -fPIC -fvisibility=hidden

$(FAKE_CUDA): tests/fakes/fake_cuda.cc tests/fakes/module.mk | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) $(FAKE_FLAGS) -shared -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic-functions -o $@ $< -lpthread

$(FAKE_CUDART): tests/fakes/fake_cudart.cc tests/fakes/libcudart.map tests/fakes/module.mk | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) $(FAKE_FLAGS) -shared -Wl,-soname,libcudart.so.13 -Wl,--version-script=tests/fakes/libcudart.map \
	  -Wl,-Bsymbolic-functions -o $@ $< -ldl -lpthread

# The CUPTI double lives in folders of its own: a process finds it only when a
# test puts one on LD_LIBRARY_PATH (the machine's real libcupti.so.13 may be on
# the default path). cupti_old/ is the same double without the CUDA 13
# additions (cuptiSubscribe_v2, allocation sources, the timestamp callback).
FAKE_CUPTI     := $(FAKES_DIR)/cupti/libcupti.so.13
FAKE_CUPTI_OLD := $(FAKES_DIR)/cupti_old/libcupti.so.13

$(FAKE_CUPTI): tests/fakes/fake_cupti.cc tests/fakes/fake_cupti.h tests/fakes/module.mk | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) $(FAKE_FLAGS) -shared -Wl,-soname,libcupti.so.13 -Wl,-Bsymbolic-functions -o $@ $< -lpthread

$(FAKE_CUPTI_OLD): tests/fakes/fake_cupti.cc tests/fakes/fake_cupti.h tests/fakes/module.mk | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) $(FAKE_FLAGS) -DFAKE_CUPTI_OLD -shared -Wl,-soname,libcupti.so.13 -Wl,-Bsymbolic-functions -o $@ $< -lpthread

ALL_EXTRA  += $(FAKE_CUDA) $(FAKE_CUDART) $(FAKE_CUPTI) $(FAKE_CUPTI_OLD)
TEST_EXTRA += $(FAKE_CUDA) $(FAKE_CUDART) $(FAKE_CUPTI) $(FAKE_CUPTI_OLD)
