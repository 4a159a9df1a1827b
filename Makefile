# The two commands of the README. Both set everything up (idempotently) and then run.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# Mesa's Vulkan and GL drivers want a runtime dir; headless CI has none
export XDG_RUNTIME_DIR ?= /tmp

.PHONY: demo test system lint bench clean conform-opencl conform-wgpu

demo: system $(VENV)/.stamp-base
	$(BIN)/vyre demo

# the suite in PYTEST_WORKERS processes (pytest-xdist): most tests compile or interpret on one
# core, so two workers keep a 2-core machine busy
PYTEST_WORKERS ?= 2

test: system $(VENV)/.stamp-test
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/lint-imports
	$(MAKE) --no-print-directory -j2 --output-sync=target conform-opencl conform-wgpu
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS)

# conformance on the two CPU backends, side by side (each compiles on one core). lavapipe
# compiles each shader at its first launch, in the one process that launches: wgpu takes
# half the random programs, so it ends near OpenCL instead of running alone for minutes
# (pytest's differential and fuzz tests run more generated programs on wgpu)
CONFORM_RANDOM_opencl := 200
CONFORM_RANDOM_wgpu := 100
conform-opencl conform-wgpu: conform-%: $(VENV)/.stamp-test
	$(BIN)/vyre conform --backend $* --random $(CONFORM_RANDOM_$*) --seed 1 --cert-dir .conform/certs --repro-dir .conform/repros

# PoCL (OpenCL on the CPU) and lavapipe (Vulkan on the CPU, for wgpu) from Debian: the
# PyPI-only PoCL cannot build kernels here.
system:
	@if ! ls /etc/OpenCL/vendors/*pocl* >/dev/null 2>&1 || ! ls /usr/share/vulkan/icd.d/lvp_icd* >/dev/null 2>&1; then \
		if [ "$$(id -u)" = "0" ]; then SUDO=""; else SUDO="sudo"; fi; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq pocl-opencl-icd ocl-icd-libopencl1 \
			mesa-vulkan-drivers libvulkan1; \
	fi

# the base install includes an OpenCL backend (PoCL from `system`), so the README's first
# program runs right after `make demo`
$(VENV)/.stamp-base: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[opencl,wgpu]'
	touch $@

$(VENV)/.stamp-test: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[test]'
	touch $@ $(VENV)/.stamp-base

lint: $(VENV)/.stamp-test
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/lint-imports

bench: $(VENV)/.stamp-test
	$(BIN)/python benchmarks/reference_interp.py
	$(BIN)/python benchmarks/opencl_elementwise.py

clean:
	rm -rf $(VENV)
