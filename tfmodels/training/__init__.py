"""Training: optimizers, schedules, loops and the command-line scripts."""
