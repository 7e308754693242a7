"""Tests of the Python helper (python/peakscope) and the embedded workload.

Run from the repository root: /usr/bin/python3 -m unittest discover -s tests/python -t .
"""
