"""Markdown for the reports every stage writes: one table writer and one
number format, so the tables of a conversion, a benchmark, a ship run and
an experiment read alike and a change of style is made once."""


def number(value, digits=1, missing="-", scale=1.0, thousands=False):
  """`value * scale` to `digits` decimals (with thousands separators when
  asked), or `missing` where there is no value."""
  if value is None:
    return missing
  return f"{value * scale:{',' if thousands else ''}.{digits}f}"


def table(header, rows):
  """A markdown table's lines: the header, its rule, a line per row (each
  cell as str() gives it)."""
  return ["| " + " | ".join(map(str, header)) + " |",
          "|" + " --- |" * len(header),
          *("| " + " | ".join(map(str, row)) + " |" for row in rows)]
