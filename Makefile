# The same commands run here and in CI (.ci/run calls `make test` through the README's command).
PY ?= .venv/bin/python

.PHONY: install check test lint format typecheck

install:
	python3 -m venv .venv
	$(PY) -m pip install -q -e '.[dev]'

lint:
	$(PY) -m ruff check src tests examples
	$(PY) -m ruff format --check src tests examples

format:
	$(PY) -m ruff format src tests examples
	$(PY) -m ruff check --fix src tests examples

typecheck:
	$(PY) -m mypy

check: lint typecheck

test:
	$(PY) -m pytest -q
