"""The one matplotlib set-up every report's figures use (harness, latency
benchmark, demo): a headless backend, quiet font-cache logging, and PNGs
written atomically.

    plt = pyplot()
    fig, ax = plt.subplots()
    ...
    save_figure(fig, "report/latency.png")  # closes the figure
"""

from tfmodels.staging import staged_path


def pyplot():
  """matplotlib.pyplot on the Agg backend (no display needed)."""
  import logging
  import matplotlib
  matplotlib.use("Agg")
  logging.getLogger("matplotlib").setLevel(logging.WARNING)  # font cache
  import matplotlib.pyplot as plt
  return plt


def save_figure(fig, path):
  """Writes the figure as a PNG atomically, frees it; returns `path`."""
  try:
    with staged_path(path) as temp:
      fig.savefig(temp, dpi=110, bbox_inches="tight")
  finally:
    pyplot().close(fig)
  return path
