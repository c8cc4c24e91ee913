# Two commands: `make demo` and `make test`. Both create .venv and install what they need.
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Without CUDA, torch==2.13.0 is the CPU build (on the development machines it lies on local disk).
HAS_CUDA := $(shell command -v nvidia-smi >/dev/null 2>&1 && echo 1)
TORCH_SPEC := $(if $(HAS_CUDA),torch,torch==2.13.0)

.PHONY: demo test install clean

$(STAMP): pyproject.toml constraints.txt Makefile
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q "$(TORCH_SPEC)"
	$(VPY) -m pip install -q -c constraints.txt -e ".[test,bench]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/flashtriton demo

# On CPU the real @triton.jit kernels run under the Triton interpreter.
test: $(STAMP)
	$(if $(HAS_CUDA),,TRITON_INTERPRET=1) $(VPY) -m pytest -q -n 2 --durations=10 tests

clean:
	rm -rf $(VENV)
