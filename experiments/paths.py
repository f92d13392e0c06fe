"""Where the repository and its shipped data are, for the experiments that
run the project's commands on them (one definition, so a move cannot leave
one experiment looking in the wrong place)."""

import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "data")
VOCAB = os.path.join(DATA, "vocab", "uncased_vocab.txt")
