"""`python -m experiments.demo` (`make demo`): experiments/demo/command.py."""

from experiments.demo.command import run

run()
