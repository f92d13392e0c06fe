"""The Android QA app: its Python twin, golden vectors, and the Gradle project.

The app (`app/`, `qa-core/` here) and the Python twin answer a question about a
passage the same way: WordPiece tokenization (`tfmodels.tokenization`),
`[CLS] question [SEP] window [SEP]` features with doc-stride windows and the
n-best decoder (`tfmodels.data.squad`), and a converted span model whose
tensors are looked up by name. The settings below are the ones both sides use;
the golden vectors (`golden.py`) hold the Java side to the Python results.

    python -m android_bench.qa_app --model qa.tflite --passage passage.txt \
        --question "Which word means: a large natural stream of water?"
"""

from converters.contract import CONTRACT_INPUTS, HEAD_OUTPUTS, LENGTH_STEP
from tfmodels.data import squad

# The model contract (converters/contract.py): [1, L] int32 inputs, float32
# outputs, looked up by these names.
INPUT_NAMES = CONTRACT_INPUTS
OUTPUT_NAMES = HEAD_OUTPUTS["span"]

# Windows and decoding, as the official BERT QA example (question <= 64
# pieces, answers <= 32 pieces) and Google's run_squad.py (stride 128,
# n-best 20).
SEQUENCE_LENGTH = squad.MAX_SEQ_LENGTH
DOC_STRIDE = 128
MAX_QUERY_LENGTH = 64
N_BEST_SIZE = 20
MAX_ANSWER_LENGTH = 32
DEFAULT_THREADS = 4
# A model with a dynamic length (convert_tflite --dynamic_length) runs each
# window at the smallest multiple of this many tokens that holds it.
WINDOW_STEP = LENGTH_STEP


class QaAppError(ValueError):
  """Unusable input; the message names the file or flag."""
