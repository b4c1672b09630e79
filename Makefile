# Set-up and everyday commands. Everything installs into .venv on first use.
# Without make (Windows, or anywhere): python kit.py check | test, which sets up the same .venv.
#   make grade          grade your exercises (python -m grader check)
#   make test           run the project's own test suite
#   make notebooks      rebuild notebooks/ from the stubs (docs/contributors.md)
#   make messages       re-extract the learner-facing texts into grader/locale/ (docs/contributors.md)
# TORCH picks the torch requirement; the project itself needs torch>=2.2.
# Example: make test TORCH=torch==2.13.0   (a CPU wheel, where one is at hand)
# EXTRAS=nbgrader also installs nbgrader, for the nbgrader channel and its test.
PYTHON ?= python3
VENV   ?= .venv
TORCH  ?= torch>=2.2
EXTRAS ?=
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: grade test clean messages check-messages notebooks

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".$(if $(EXTRAS),[$(EXTRAS)])"
	touch $(STAMP)

grade: $(STAMP)
	$(BIN)/python -m grader check $(COMPONENTS)

test: $(STAMP)
	$(BIN)/python -m pytest selftests -q --durations=40

# The gettext catalogues (grader/i18n.py): the template from the code and course.yml (babel.cfg), merged into
# each language's .po, whose new or changed entries then await a translator (fuzzy or empty).
POT := grader/locale/grader.pot
messages: $(STAMP)
	$(BIN)/pybabel extract -F babel.cfg -k N_ -k Phrase --no-location --sort-output --width 100 \
		--project transformer-drills --version 0.1.0 -o $(POT) .
	$(BIN)/pybabel update -D grader -i $(POT) -d grader/locale --width 100 --ignore-obsolete --previous

# Exit 1 when the committed template or a catalogue lags behind the code (run `make messages`, then translate;
# selftests/test_i18n.py also fails on an entry left untranslated).
check-messages: $(STAMP)
	$(BIN)/pybabel extract -F babel.cfg -k N_ -k Phrase --no-location --sort-output --width 100 \
		--project transformer-drills --version 0.1.0 -o $(VENV)/grader.pot .
	$(BIN)/pybabel update -D grader -i $(VENV)/grader.pot -d grader/locale --width 100 --ignore-obsolete --previous \
		--check --ignore-pot-creation-date

# The self-study notebooks (notebooks/, committed so that Colab can open them): rebuilt from the stubs and the
# nbgrader channel's cells; selftests/test_notebooks.py fails while a committed one differs.
notebooks: $(STAMP)
	$(BIN)/python -m grader notebooks --out notebooks
	$(BIN)/python -m grader --lang zh notebooks --out notebooks

clean:
	rm -rf $(VENV) build *.egg-info
