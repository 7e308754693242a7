# The GPU bundle (tools/gpu-bundle, docs/gpu.md): `make test` builds it and
# tests/cli/test_gpu_bundle.sh dry-runs it, so what goes to a GPU machine is
# checked on every run. It links objects the ordinary build already made (the
# reading half's archives, the CLI's main, the recorder, the reference
# workload): a few seconds after `make`. Needs nvcc, like the workload.
GPU_BUNDLE := $(BUILD)/gpu-bundle/MANIFEST
GPU_BUNDLE_INPUTS := tools/gpu-bundle tools/gpu-check workloads/torch/hf_lora.py workloads/torch/wave_args.py \
                     $(wildcard python/peakscope/*.py) python/peakscope/trace_tracker.cpp

ifneq ($(wildcard $(NVCC)),)
$(GPU_BUNDLE): $(PRELOAD) $(LIBS) $(BUILD)/lib/cli/main.o $(LORA_WORKLOAD) $(GPU_BUNDLE_INPUTS)
	@GPU_BUNDLE_NO_MAKE=1 BUILD=$(BUILD) CUDA_HOME=$(CUDA_HOME) CXX=$(CXX) tools/gpu-bundle >/dev/null

.PHONY: gpu-bundle
gpu-bundle: $(GPU_BUNDLE)
TEST_EXTRA += $(GPU_BUNDLE)
endif
