"""Stage 1: Keras implementations of the compact BERTs in shared/papers, their
data, checkpoints, training and distillation (see WORKSPACE.md). Imports no
other stage of the project.
"""

import os

# The project's Keras is tf-keras (the Keras 2 API, imported as tf_keras).
# Said before TensorFlow loads, `import tensorflow` no longer loads Keras 3
# and scikit-learn with it: about 3 s less for every command that imports
# TensorFlow, and the commands a pipeline starts inherit it.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
