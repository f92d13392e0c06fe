"""Stage 1: Keras implementations of the compact BERTs in shared/papers, their
data, checkpoints, training and distillation (see WORKSPACE.md). Imports no
other stage of the project.
"""
