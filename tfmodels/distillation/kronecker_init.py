"""Initialise Kronecker layers from a dense teacher (KroneckerBERT, sec. 3.4).

The W closest in Frobenius norm to a sum of r Kronecker products
sum_r A_r (x) B_r is given by Van Loan's rearrangement: R(W) stacks the
vectorised (m2 x n2) blocks of W as rows, so that A (x) B becomes the rank-one
matrix vec(A) vec(B)^T; the best r terms are the top r singular triplets of
R(W), and the squared error left is ||W||^2 - sum of the r largest sigma^2.
"""

import numpy as np

from tfmodels.layers.kronecker import KroneckerDense, KroneckerEmbedding


def rearrange(w, a_shape, b_shape):
  """R(W): row i1*n1 + j1 holds block (i1, j1) of W, flattened row-major."""
  (m1, n1), (m2, n2) = a_shape, b_shape
  return w.reshape(m1, m2, n1, n2).transpose(0, 2, 1, 3).reshape(
      m1 * n1, m2 * n2)


def nearest_kronecker(w, a_shape, num_sums=1):
  """(A [r, m1, n1], B [r, m2, n2], singular values of R(W)) for W [m, n]."""
  w = np.asarray(w, np.float64)
  m1, n1 = a_shape
  if w.shape[0] % m1 or w.shape[1] % n1:
    raise ValueError(f"A shape {a_shape} does not divide W {w.shape}")
  b_shape = (w.shape[0] // m1, w.shape[1] // n1)
  if num_sums > min(m1 * n1, b_shape[0] * b_shape[1]):
    raise ValueError(f"{num_sums} Kronecker products exceed the rank of "
                     f"R(W) for A {a_shape}, B {b_shape}")
  u, s, vt = np.linalg.svd(rearrange(w, a_shape, b_shape),
                           full_matrices=False)
  root = np.sqrt(s[:num_sums])
  a = (u[:, :num_sums] * root).T.reshape(num_sums, m1, n1)
  b = (vt[:num_sums] * root[:, None]).reshape(num_sums, *b_shape)
  return a, b, s


def kronecker_sum(a, b):
  """sum_r A_r (x) B_r."""
  return sum(np.kron(x, y) for x, y in zip(a, b))


def optimal_error(w, a_shape, num_sums=1):
  """The least squared Frobenius error any r-term sum can reach."""
  _, _, s = nearest_kronecker(w, a_shape, num_sums)
  return float(np.sum(np.asarray(w, np.float64) ** 2) - np.sum(
      s[:num_sums] ** 2))


def init_dense(layer: KroneckerDense, kernel, bias=None):
  """Sets a built KroneckerDense from a Keras Dense kernel [in, out]."""
  a, b, _ = nearest_kronecker(np.asarray(kernel).T, layer.a_shape,
                              layer.num_sums)
  layer.kronecker_a.assign(a.astype(layer.kronecker_a.dtype.as_numpy_dtype))
  layer.kronecker_b.assign(b.astype(layer.kronecker_b.dtype.as_numpy_dtype))
  if bias is not None and layer.bias is not None:
    layer.bias.assign(np.asarray(bias))


def init_embedding(layer: KroneckerEmbedding, table):
  """Sets a built KroneckerEmbedding (X = A (x) b, b a row) from a table."""
  a, b, _ = nearest_kronecker(
      np.asarray(table), (layer.vocab_size,
                          layer.embedding_size // layer.row_vector_size), 1)
  layer.table_a.assign(a[0].astype(layer.table_a.dtype.as_numpy_dtype))
  layer.row_b.assign(b[0, 0].astype(layer.row_b.dtype.as_numpy_dtype))


def init_from_teacher(student, teacher):
  """Every Kronecker layer of `student` from the same-named dense layer.

  Returns the names initialised. The teacher is a dense model with the same
  layer names (KroneckerBERT keeps BERT's depth and width); a Kronecker layer
  with no teacher counterpart raises.
  """
  teacher_vars = {v.name.split(":")[0]: v for v in teacher.weights}
  done = []
  for layer in student.submodules:
    if isinstance(layer, KroneckerDense):
      prefix = layer.kronecker_a.name.rsplit("/", 1)[0]
      kernel = teacher_vars.get(prefix + "/kernel")
      if kernel is None:
        raise ValueError(f"teacher has no {prefix}/kernel for {prefix}")
      bias = teacher_vars.get(prefix + "/bias")
      init_dense(layer, kernel.numpy(),
                 None if bias is None else bias.numpy())
      done.append(prefix)
    elif isinstance(layer, KroneckerEmbedding):
      prefix = layer.table_a.name.rsplit("/", 1)[0]
      table = teacher_vars.get(prefix + "/embeddings")
      if table is None:
        raise ValueError(f"teacher has no {prefix}/embeddings for {prefix}")
      init_embedding(layer, table.numpy())
      done.append(prefix)
  return done
