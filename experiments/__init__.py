"""Stage 4: what ties the stages together, each a rerunnable chain of the
project's commands (pipeline.py): `make demo` (demo*.py), the
knowledge-transfer experiment, MobileBERT's Table 7 latency benchmark
(`make benchmark`), their reports and committed results (results/).

The only package that may import all of tfmodels, converters and
android_bench (tests/test_import_direction.py).
"""

import tfmodels  # noqa: F401  first: TensorFlow's Keras is tf-keras
