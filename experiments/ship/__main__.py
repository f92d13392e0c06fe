"""`python -m experiments.ship`: the command (experiments/ship/command.py)."""

from experiments.ship.command import run

run()
