# `make accuracy`: calibrated prices against measured peaks on 30 random
# models nobody priced before (tools/accuracy-random, tools/heldout/random_models.py),
# one table; exit 1 when a wave is priced under its measured peak. 5 to 6
# minutes on 2 cores; files in out/accuracy-random/seed-N/.
.PHONY: accuracy
accuracy: all deps-torch
	@BUILD=$(BUILD) PYTHON=$(PYTHON) tools/accuracy-random
