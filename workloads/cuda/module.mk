# The CUDA reference workload (workloads/cuda/lora_workload.cu), built with nvcc and
# linked against the shared runtime (-cudart shared), so LD_LIBRARY_PATH picks
# the runtime at run time: the test doubles in $(BUILD)/fakes, or a real one.
# PTX for compute_75 (the oldest CUDA 13 target; the driver JITs it for newer
# GPUs) plus SASS for sm_90. Skipped, with its tests, where nvcc is missing.
KERNELS_DIR   := $(BUILD)/workloads/cuda
LORA_WORKLOAD := $(KERNELS_DIR)/lora_workload
KERNELS_ARCH  ?= -gencode arch=compute_75,code=compute_75 -gencode arch=compute_90,code=sm_90

ifneq ($(wildcard $(NVCC)),)
$(LORA_WORKLOAD): workloads/cuda/lora_workload.cu workloads/cuda/module.mk | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -O2 -ccbin $(CXX) -cudart shared $(KERNELS_ARCH) -Xcompiler -Wall,-Wextra -o $@ $< -ldl

ALL_EXTRA  += $(LORA_WORKLOAD)
TEST_EXTRA += $(LORA_WORKLOAD)
endif
