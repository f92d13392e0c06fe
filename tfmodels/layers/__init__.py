"""Keras layers of the model zoo (blocks go here, stacks in tfmodels.encoders)."""
