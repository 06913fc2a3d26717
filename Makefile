# The same commands run here and in CI (.ci/run calls `make test` through the README's command).
PY ?= .venv/bin/python

.PHONY: install check test lint format typecheck bench

install:
	python3 -m venv .venv
	$(PY) -m pip install -q -e '.[dev]'

lint:
	$(PY) -m ruff check src tests examples bench scripts
	$(PY) -m ruff format --check src tests examples bench scripts

format:
	$(PY) -m ruff format src tests examples bench scripts
	$(PY) -m ruff check --fix src tests examples bench scripts

typecheck:
	$(PY) -m mypy

check: lint typecheck

test:
	$(PY) -m pytest -q

# Figures, not pass/fail: each script prints one JSON object with both sides measured in one run.
# All of them take about ten minutes on 2 cores; docs/BENCHMARKS.md holds the latest figures.
bench:
	$(PY) bench/hook_overhead.py
	$(PY) bench/hook_exit.py
	$(PY) bench/claude_code_fork.py
	$(PY) bench/scan_scaling.py
	$(PY) bench/secret_guard.py
	$(PY) bench/scale_out.py
	$(PY) bench/openai_agents_turn.py
	$(PY) bench/first_turn_loop.py
	$(PY) bench/cache_share.py
	$(PY) bench/cost_vs_mem0.py
	$(PY) bench/burst.py
	$(PY) bench/sessions.py
	$(PY) bench/locomo.py --model offline
