# CUDA test clients: ordinary programs linked against the runtime (or the
# driver) by soname, run by tests/end_to_end/cuda/cuda_*_test.cc under the recorder with
# LD_LIBRARY_PATH pointing at the test doubles in $(BUILD)/fakes.
CUDA_CLIENT_DIR   := $(BUILD)/cuda
# cudaGetDriverEntryPoint is deprecated in CUDA 13 and still what PyTorch calls.
CUDA_CLIENT_FLAGS := $(CXXSTD) $(CXXFLAGS) $(WARN) -Wno-deprecated-declarations $(CPPFLAGS) -isystem $(CUDA_HOME)/include
CUDA_CLIENTS      := $(addprefix $(CUDA_CLIENT_DIR)/,cudart_client torch_style_client threads_client fork_client vmm_client)
# The doubles (tests/fakes/module.mk, included after this file: spelled out here).
CUDA_CLIENT_RUNTIME := $(BUILD)/fakes/libcudart.so.13
CUDA_CLIENT_DRIVER  := $(BUILD)/fakes/libcuda.so.1

$(CUDA_CLIENT_DIR)/ptsz_calls.o: tests/cuda/ptsz_calls.cc | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_CLIENT_FLAGS) -DCUDA_API_PER_THREAD_DEFAULT_STREAM -c $< -o $@

$(CUDA_CLIENT_DIR)/cudart_client $(CUDA_CLIENT_DIR)/torch_style_client: $(CUDA_CLIENT_DIR)/%: tests/cuda/%.cc \
    $(CUDA_CLIENT_DIR)/ptsz_calls.o $(CUDA_CLIENT_RUNTIME)
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_CLIENT_FLAGS) $< $(CUDA_CLIENT_DIR)/ptsz_calls.o -o $@ $(CUDA_CLIENT_RUNTIME) -ldl -lpthread

$(CUDA_CLIENT_DIR)/threads_client $(CUDA_CLIENT_DIR)/fork_client: $(CUDA_CLIENT_DIR)/%: tests/cuda/%.cc $(CUDA_CLIENT_RUNTIME)
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_CLIENT_FLAGS) $< -o $@ $(CUDA_CLIENT_RUNTIME) -ldl -lpthread

$(CUDA_CLIENT_DIR)/vmm_client: tests/cuda/vmm_client.cc $(CUDA_CLIENT_DRIVER)
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_CLIENT_FLAGS) $< -o $@ $(CUDA_CLIENT_DRIVER) -ldl

# An interposer of its own, preloaded after peakscope (RTLD_NEXT test).
$(CUDA_CLIENT_DIR)/libnext_probe.so: tests/cuda/next_probe.cc | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_CLIENT_FLAGS) -fPIC -shared $< -o $@ -ldl

# A runtime user opened with RTLD_LOCAL (runtime lookup outside the global scope).
$(CUDA_CLIENT_DIR)/liblocal_runtime.so: tests/cuda/local_runtime.cc $(CUDA_CLIENT_RUNTIME)
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_CLIENT_FLAGS) -fPIC -shared $< -o $@ $(CUDA_CLIENT_RUNTIME)

$(CUDA_CLIENT_DIR)/local_client: tests/cuda/local_client.cc
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_CLIENT_FLAGS) $< -o $@ -ldl

# Scripts the CUPTI double (tests/fakes/fake_cupti.h), found at run time.
$(CUDA_CLIENT_DIR)/cupti_client: tests/cuda/cupti_client.cc tests/fakes/fake_cupti.h $(CUDA_CLIENT_RUNTIME)
	@mkdir -p $(dir $@)
	$(CXX) $(CUDA_CLIENT_FLAGS) $< -o $@ $(CUDA_CLIENT_RUNTIME) -ldl

CUDA_CLIENTS += $(CUDA_CLIENT_DIR)/cupti_client
CUDA_CLIENTS += $(CUDA_CLIENT_DIR)/libnext_probe.so $(CUDA_CLIENT_DIR)/liblocal_runtime.so $(CUDA_CLIENT_DIR)/local_client
ALL_EXTRA  += $(CUDA_CLIENTS)
TEST_EXTRA += $(CUDA_CLIENTS)

# `make bench` also prints the cost of a hooked allocation pair, with and
# without the preload, against the doubles (tools/bench-cuda-hooks).
.PHONY: bench-cuda-hooks
bench-cuda-hooks: $(CUDA_CLIENT_DIR)/cudart_client $(PRELOAD) $(CUDA_CLIENT_DRIVER) $(CUDA_CLIENT_RUNTIME)
	@BUILD=$(BUILD) tools/bench-cuda-hooks
bench: bench-cuda-hooks
