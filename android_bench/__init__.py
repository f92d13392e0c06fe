"""Stage 3: the adb / host latency harness and the Android QA app.

Imports tfmodels and converters (LiteRT file and delegate facts live there),
never experiments; the adb stand-in device the tests use is in tests/.
"""

import tfmodels  # noqa: F401  first: TensorFlow's Keras is tf-keras
