"""Activation-aware low-rank factors of a Dense kernel.

For y = x W + b with inputs of mean mu and covariance S, the rank-r
factors U V that minimise E ||x W - (x U V + delta)||^2 are found from the
SVD of S^1/2 W: with S^1/2 W = P Sigma R^T,
  U = S^-1/2 P_r Sigma_r^1/2,   V = Sigma_r^1/2 R_r^T,
and the bias absorbs the mean of what is lost, delta = mu (W - U V). Plain
SVD (S = I) keeps the directions with the largest weights; this keeps the
ones the layer's real inputs excite (as ASVD / SVD-LLM do). At full rank
U V = W exactly.
"""

import numpy as np


def activation_aware_factors(kernel, rank, mean=None, covariance=None,
                             ridge=1e-6):
  """(U [n, rank], V [rank, m], bias shift [m], relative output error).

  Args:
    kernel: [n, m], a Keras Dense kernel (y = x kernel).
    rank: int, 0 < rank <= min(n, m).
    mean, covariance: the input's mean [n] and covariance [n, n]; None means
      plain SVD (identity covariance, zero mean).
    ridge: eigenvalues below ridge * the largest are raised to it, so a
      direction the data never excites cannot blow up S^-1/2.

  The error is sqrt(E ||x (W - U V) - delta||^2 / E ||x W - E[x W]||^2).
  """
  w = np.asarray(kernel, np.float64)
  n, m = w.shape
  if not 0 < rank <= min(n, m):
    raise ValueError(f"rank {rank} for a {n} x {m} kernel")
  if covariance is None:
    root = inverse_root = np.eye(n)
  else:
    values, vectors = np.linalg.eigh(np.asarray(covariance, np.float64))
    values = np.maximum(values, ridge * max(values.max(), 1e-30))
    root = (vectors * np.sqrt(values)) @ vectors.T
    inverse_root = (vectors / np.sqrt(values)) @ vectors.T
  p, sigma, rt = np.linalg.svd(root @ w, full_matrices=False)
  scale = np.sqrt(sigma[:rank])
  u = inverse_root @ (p[:, :rank] * scale)
  v = scale[:, None] * rt[:rank]
  lost = w - u @ v
  shift = np.zeros(m) if mean is None else np.asarray(mean) @ lost
  total = np.sum(sigma ** 2)
  error = float(np.sqrt(np.sum(sigma[rank:] ** 2) / total)) if total else 0.0
  return u, v, shift, error
