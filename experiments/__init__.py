"""Stage 4: what ties the stages together, each a rerunnable chain of the
project's commands (common/pipeline.py):

  ship/     the product: a user's teacher to a phone-ready int8 student
            (`python -m experiments.ship`), its split search, steps, report
  demo/     `make demo`: ship on the real MiniLM teacher, once per task
  apps/     a shipped file checked as an app asks it (QA, classifier, arm64)
  bench/    MobileBERT's Table 7 latency benchmark (`make benchmark`), TFLite
            beside ONNX Runtime (onnx_compare)
  papers/   the paper experiments and their committed results (results/)
  common/   what they share: steps, the experiment skeleton, paths, readers

common <- apps, bench <- ship <- demo, papers: a sub-package imports only
those before it (tests/test_import_direction.py). experiments is the only
package that may import all of tfmodels, converters and android_bench.
"""

import tfmodels  # noqa: F401  first: TensorFlow's Keras is tf-keras
