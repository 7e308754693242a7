# NVTX injection test clients. Each shared object and the program compile their
# own copy of the nvtx3 headers, so the program holds four NVTX instances
# (the fourth, libpsc_nvtx_cuda, only in `nvtx_program names`);
# the fake tool stands in for another injection (Nsight Systems) to chain to.
NVTX_TEST_DIR    := $(BUILD)/nvtx
NVTX_TEST_FLAGS  := $(CXXSTD) $(CXXFLAGS) $(WARN) -I. -Iinclude -isystem $(CUDA_HOME)/include -fPIC
NVTX_CLIENT_LIBS := $(NVTX_TEST_DIR)/libpsc_nvtx_core.so $(NVTX_TEST_DIR)/libpsc_nvtx_domains.so \
                    $(NVTX_TEST_DIR)/libpsc_nvtx_cuda.so
NVTX_FAKE_TOOL   := $(NVTX_TEST_DIR)/libpsc_nvtx_fake_tool.so
NVTX_PROGRAM     := $(NVTX_TEST_DIR)/nvtx_program

$(NVTX_TEST_DIR)/libpsc_nvtx_%.so: tests/nvtx/client_%.cc tests/nvtx/nvtx_clients.h
	@mkdir -p $(dir $@)
	$(CXX) $(NVTX_TEST_FLAGS) -shared $< -o $@ -ldl

$(NVTX_FAKE_TOOL): tests/nvtx/fake_tool.cc
	@mkdir -p $(dir $@)
	$(CXX) $(NVTX_TEST_FLAGS) -shared $< -o $@

$(NVTX_PROGRAM): tests/nvtx/nvtx_program.cc tests/nvtx/nvtx_clients.h $(NVTX_CLIENT_LIBS)
	$(CXX) $(NVTX_TEST_FLAGS) $< -o $@ -L$(NVTX_TEST_DIR) -lpsc_nvtx_core -lpsc_nvtx_domains -lpsc_nvtx_cuda \
	  -Wl,-rpath,'$$ORIGIN' -ldl -lpthread

ALL_EXTRA  += $(NVTX_CLIENT_LIBS) $(NVTX_FAKE_TOOL) $(NVTX_PROGRAM)
TEST_EXTRA += $(NVTX_CLIENT_LIBS) $(NVTX_FAKE_TOOL) $(NVTX_PROGRAM)
