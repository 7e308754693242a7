# `make accuracy`: calibrated prices against measured peaks on 30 random
# models nobody priced before (tools/accuracy-random, workloads/heldout/random_models.py),
# one table; exit 1 when a wave is priced under its measured peak. 5 to 6
# minutes on 2 cores; files in out/accuracy-random/seed-N/.
.PHONY: accuracy
accuracy: all deps-torch
	@BUILD=$(BUILD) PYTHON=$(PYTHON) tools/accuracy-random

# `make accuracy-groups`: the same for waves of several gradient groups (2 or
# 3 slots, equal and unequal, both backward orders, up to 3x beyond the
# calibrated sizes), calibrated on waves of several groups and on waves of
# one; 10 random models (tools/accuracy-groups), about a minute on 2 cores.
.PHONY: accuracy-groups
accuracy-groups: all deps-torch
	@BUILD=$(BUILD) PYTHON=$(PYTHON) tools/accuracy-groups
