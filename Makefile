# Two entry points (README "Quick start"): `make demo` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
# torch is pinned: on these machines 2.13.0 is the CPU build; an unpinned torch pulls CUDA.
PIP_EXTRA ?= torch==2.13.0

.PHONY: demo test test-slow test-fuzz venv clean

$(VENV)/.stamp: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[all,proofs,test,bench]' $(PIP_EXTRA)
	sh tools/setup_tosa.sh
	touch $@

venv: $(VENV)/.stamp

demo: venv
	$(PY) examples/demo.py

test: venv
	$(PY) -m pytest -q -n 2 --dist worksteal -m "not slow"

test-slow: venv
	$(PY) -m pytest -q -n 2 --dist worksteal -m "slow and not fuzz" --durations=25

test-fuzz: venv
	$(PY) -m pytest -q -m fuzz

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
