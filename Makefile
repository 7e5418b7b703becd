# mtkit: `make demo` runs the whole pipeline on a real corpus, `make test` runs the test suite.
# Both install what they need into the current Python environment first (see `make install`).
PYTHON ?= python3
PIP := $(PYTHON) -m pip
TORCH_VERSION ?= 2.13.0
STAMP := .install.stamp

.PHONY: install test lint demo bench clean

install: $(STAMP)

# torch is pinned first so pip never replaces it; on a CUDA machine the same pin installs the CUDA build.
$(STAMP): pyproject.toml
	$(PIP) install -q "torch==$(TORCH_VERSION)"
	$(PIP) install -q -e ".[dev,plot,ct2,serve]"
	@touch $(STAMP)

test: install
	$(PYTHON) -m pytest tests

lint: install
	$(PYTHON) -m ruff check mtkit tests bench recipes

# The recipe runs in its own directory: a PYTHON given as a relative path (.venv/bin/python) is made absolute.
demo: install
	$(MAKE) -C recipes/demo PYTHON="$(if $(findstring /,$(PYTHON)),$(abspath $(PYTHON)),$(PYTHON))"

# e.g. make bench BENCH_ARGS="--quick" or BENCH_ARGS="--only translate --model DIR"
bench: install
	$(PYTHON) bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(STAMP) .pytest_cache .ruff_cache
