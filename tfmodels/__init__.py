"""Keras implementations of the compact BERTs in shared/papers (see WORKSPACE.md)."""
