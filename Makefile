# mtkit: `make demo` runs the whole pipeline on a real corpus, `make test` runs the test suite.
# Both install what they need into the current Python environment first (see `make install`).
PYTHON ?= python3
PIP := $(PYTHON) -m pip
TORCH_VERSION ?= 2.13.0
STAMP := .install.stamp

.PHONY: install test test-quick test-isa lint demo bench clean

install: $(STAMP)

# torch is pinned first so pip never replaces it; on a CUDA machine the same pin installs the CUDA build.
$(STAMP): pyproject.toml
	$(PIP) install -q "torch==$(TORCH_VERSION)"
	$(PIP) install -q -e ".[dev,plot,ct2,serve,hf]"
	@touch $(STAMP)

# Most tests run one thread: one pytest worker per core (pytest-xdist; tests/conftest.py pins each worker
# to its core, so that commands taking every allowed core run one thread), each taking whole modules so
# that a module's fixtures (a trained model, an export) are built once. The modules go out in the order
# tests/conftest.py gives them, longest first (xdist would otherwise send the modules with the most tests
# first and leave the long end-to-end ones for the end, one worker idle). TEST_WORKERS=0 runs serially.
TEST_WORKERS ?= auto
PYTEST := $(PYTHON) -m pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

test: install
	$(PYTEST) tests

# The inner loop: all but the long end-to-end tests (@pytest.mark.slow: kill and resume, torchrun, whole
# recipes, the CLI chains); `make test` and CI run those too.
test-quick: install
	$(PYTEST) -m "not slow" tests

# The numerically sensitive tests (two engines, precisions, batch compositions, search, the server
# against offline translation) again with every library's CPU code path forced down, so that a machine
# with AVX-512 sees what an AVX2-only one (and one with neither) computes: CTranslate2, PyTorch's ATen
# kernels, oneDNN and MKL each choose their kernels by the CPU they find, and mtkit's `auto` precision
# follows oneDNN's cap (fp32 below bf16), as on such a CPU. The training tests (test_trainer) run too.
# .ci/run runs it after `make test`.
ISA_TESTS ?= tests/test_export.py tests/test_search.py tests/test_translator.py tests/test_serve.py \
	tests/test_transformer.py tests/test_rnn.py tests/test_device.py tests/test_constrained.py \
	tests/test_confidence.py tests/test_translate_jobs.py tests/test_corpora.py tests/test_corpora_decoder.py \
	tests/test_hf.py tests/test_torch_engine.py tests/test_attention.py tests/test_trainer.py
ISA_AVX2 := CT2_FORCE_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 \
	FBGEMM_ENABLE_INSTRUCTIONS=AVX2
ISA_GENERIC := CT2_FORCE_CPU_ISA=GENERIC ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41 \
	MKL_ENABLE_INSTRUCTIONS=SSE4_2

test-isa: install
	@if grep -q avx512 /proc/cpuinfo 2>/dev/null; then \
		echo "== $(ISA_TESTS) with $(ISA_AVX2)"; $(ISA_AVX2) $(PYTEST) -q $(ISA_TESTS); \
	else echo "== no AVX-512 on this CPU: make test already ran the AVX2 code paths"; fi
	@echo "== $(ISA_TESTS) with $(ISA_GENERIC)"
	$(ISA_GENERIC) $(PYTEST) -q $(ISA_TESTS)

lint: install
	$(PYTHON) -m ruff check mtkit tests bench recipes

# The recipe runs in its own directory: a PYTHON given as a relative path (.venv/bin/python) is made absolute.
demo: install
	$(MAKE) -C recipes/demo PYTHON="$(if $(findstring /,$(PYTHON)),$(abspath $(PYTHON)),$(PYTHON))"

# e.g. make bench BENCH_ARGS="--quick" or BENCH_ARGS="--only translate --model DIR"
# (its parts are the modules at bench/ top level; one-off studies are in bench/studies/: bench/README.md)
bench: install
	$(PYTHON) bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(STAMP) .pytest_cache .ruff_cache
