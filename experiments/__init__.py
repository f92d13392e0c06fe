"""Measured experiments, each a rerunnable chain of the project's commands."""
