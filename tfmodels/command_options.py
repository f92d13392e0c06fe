"""A command's flags, read once, as one frozen options object.

Only a command's `main()` reads absl's FLAGS: it turns them into its
options dataclass with `from_flags` and passes that down, so every library
function can be called from another command or a test without defining
flags (`with_defaults` gives the options a bare command line would, and
`dataclasses.replace` changes a field).

    @dataclasses.dataclass(frozen=True)
    class ConvertOptions:
      model_dir: str
      modes: tuple

    def main(argv):
      convert(from_flags(ConvertOptions))

A field takes the value of the flag of its name; list flags become tuples,
so the options cannot change under the code they are handed to.
"""

import dataclasses

from absl import flags


def _frozen(value):
  return tuple(value) if isinstance(value, list) else value


def _filled(options_class, flag_values, values, value_of):
  for field in dataclasses.fields(options_class):
    if field.name not in values and (field.name in flag_values or
                                     _has_no_default(field)):
      values[field.name] = _frozen(value_of(flag_values[field.name]))
  return options_class(**values)


def _has_no_default(field):
  return (field.default is dataclasses.MISSING
          and field.default_factory is dataclasses.MISSING)


def from_flags(options_class, flag_values=flags.FLAGS, **values):
  """`options_class` filled from the parsed flags of its field names;
  `values` set fields that are not flags (or override one), and a field
  that is no flag keeps its dataclass default."""
  return _filled(options_class, flag_values, values, lambda f: f.value)


def with_defaults(options_class, flag_values=flags.FLAGS, **values):
  """`options_class` as a command line with no flags would give it (each
  flag's default), with `values` set: for tests and for commands that call
  another command's library."""
  return _filled(options_class, flag_values, values, lambda f: f.default)
