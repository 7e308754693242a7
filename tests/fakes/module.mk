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

ALL_EXTRA  += $(FAKE_CUDA) $(FAKE_CUDART)
TEST_EXTRA += $(FAKE_CUDA) $(FAKE_CUDART)
