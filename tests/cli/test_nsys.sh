#!/usr/bin/env bash
# The Nsight Systems checks (tests/nsys/check_nsys.sh) as part of the CLI suite.
exec bash "$(dirname "$0")/../nsys/check_nsys.sh" "${PSC_BUILD_DIR:-build}"
