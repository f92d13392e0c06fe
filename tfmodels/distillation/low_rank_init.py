"""A narrow student's word embeddings from a wide teacher's table.

MobileBERT's student embeds tokens at E (128) and projects them, through
its 3-gram concatenation [e(t+1), e(t), e(t-1)], to the feature-map width H
that it shares with its teacher. Layer-wise transfer copies what has the
same shape; the word table does not (V x E against V x H). With the teacher's
table W = U S V^T, the best rank-E approximation (Eckart-Young) is
(U_E S_E^1/2)(S_E^1/2 V_E^T): the left factor becomes the student's table and
the right one the current-token block of the projection, the neighbours'
blocks starting at zero. The student's embedding output then starts as the
teacher's word vectors seen through rank E, instead of noise.
"""

import numpy as np


def low_rank_factors(table, rank):
  """(left [V, rank], right [rank, H], relative Frobenius error) of table."""
  table = np.asarray(table, np.float64)
  if not 0 < rank <= min(table.shape):
    raise ValueError(f"rank {rank} for a {list(table.shape)} table")
  u, s, vt = _top_singular(table, rank)
  root = np.sqrt(s[:rank])
  left, right = u * root, root[:, None] * vt
  error = np.sqrt(max(np.sum(s ** 2) - np.sum(s[:rank] ** 2), 0.0) /
                  np.sum(s ** 2))
  return left, right, float(error)


def _top_singular(matrix, rank):
  """(U [:, :rank], every singular value, V^T [:rank]) of `matrix`. A word
  table is tall (V >> H): its right singular vectors and values are the
  eigenvectors and root eigenvalues of the H x H Gram matrix A^T A, and
  U_r = A V_r / s_r. That costs two V x H x H products (30522 x 384: a
  fraction of a second), where the QR or SVD of the whole table took
  seconds per carve; in float64 the top factors agree with the SVD's to
  ~1e-12 (tests/test_low_rank_init.py)."""
  if matrix.shape[0] <= 2 * matrix.shape[1]:
    u, s, vt = np.linalg.svd(matrix, full_matrices=False)
    return u[:, :rank], s, vt[:rank]
  eigenvalues, v = np.linalg.eigh(matrix.T @ matrix)
  order = np.argsort(eigenvalues)[::-1]
  s = np.sqrt(np.clip(eigenvalues[order], 0.0, None))
  v = v[:, order[:rank]]
  return (matrix @ v) / s[:rank], s, v.T


def init_word_embeddings(student_embeddings, teacher_embeddings):
  """Sets a projected student table from the teacher's; returns the error.

  Both arguments are `layers.embeddings.Embeddings` layers, built. The
  student must project its word vectors first (MobileBERT layout) to the
  teacher's width, over the same vocabulary.
  """
  c = student_embeddings.config
  teacher_table = teacher_embeddings.output_embedding_table().numpy()
  projection = student_embeddings.projection
  if not student_embeddings.project_first or projection is None:
    raise ValueError(f"{c.name}: the student's embeddings are not projected "
                     "before the positions are added (MobileBERT layout)")
  vocab, width = teacher_table.shape
  if (vocab, width) != (c.vocab_size, c.hidden_size):
    raise ValueError(f"teacher word table {[vocab, width]} does not match "
                     f"the student's vocabulary and width "
                     f"{[c.vocab_size, c.hidden_size]}")
  left, right, error = low_rank_factors(teacher_table, c.embedding_size)
  kernel = np.zeros(projection.kernel.shape, np.float64)
  # trigram_concat puts the current token's vector in the middle block.
  start = c.embedding_size if c.trigram_input else 0
  kernel[start:start + c.embedding_size] = right
  dtype = student_embeddings.word_embeddings.embeddings.dtype.as_numpy_dtype
  student_embeddings.word_embeddings.embeddings.assign(left.astype(dtype))
  projection.kernel.assign(kernel.astype(dtype))
  projection.bias.assign(np.zeros(projection.bias.shape, dtype))
  return error
