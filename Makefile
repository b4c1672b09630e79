# Set-up and everyday commands. Everything installs into .venv on first use.
#   make grade          grade your exercises (python -m grader check)
#   make test           run the project's own test suite
# TORCH picks the torch requirement; the project itself needs torch>=2.2.
# Example: make test TORCH=torch==2.13.0   (a CPU wheel, where one is at hand)
# EXTRAS=nbgrader also installs nbgrader, for the nbgrader channel and its test.
PYTHON ?= python3
VENV   ?= .venv
TORCH  ?= torch>=2.2
EXTRAS ?=
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: grade test clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".$(if $(EXTRAS),[$(EXTRAS)])"
	touch $(STAMP)

grade: $(STAMP)
	$(BIN)/python -m grader check $(COMPONENTS)

test: $(STAMP)
	$(BIN)/python -m pytest selftests -q --durations=15

clean:
	rm -rf $(VENV) build *.egg-info
