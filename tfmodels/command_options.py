"""A command's options, declared once: the dataclass field is the flag.

Each option is a field of the command's frozen options dataclass, made with
`option` (default, help, allowed values); `define_flags` turns those fields
into absl flags, and only the command's `main()` reads the parsed flags back
into the options (`from_flags`) and passes them down, so every library
function can be called from another command or a test without defining
flags (`with_defaults` gives the options a bare command line would, and
`dataclasses.replace` changes a field).

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class ConvertOptions:
      model_dir: str | None = option(None, "Our model directory.")
      modes: tuple = option(("float32",), "Quantization modes.")
      int8_recipe: str = option("xnnpack", "...", choices=("xnnpack", "x"))

    define_flags(ConvertOptions)

    def main(argv):
      convert(from_flags(ConvertOptions))

The flag's kind follows the field's type: bool, int, float, str (an enum
with `choices`), tuple (a comma-separated list; its values are checked
against `choices` when given). A field made without `option` is no flag
(set it with `from_flags(..., name=value)`). A field named after a Python
keyword takes a trailing underscore: `from_` is --from. A subclass gives an
inherited option its own default with `redefault`. List
flags become tuples, so the options cannot change under the code they are
handed to.
"""

import dataclasses
import keyword
import types
import typing

from absl import flags

# The flags `define_flags` defines belong to the module that calls it (in
# its --helpshort, and re-importing that module does not redefine them).
flags.disclaim_key_flags()

_OPTION = "command_option"


def option(default, help, *, choices=None, required=False):  # pylint: disable=redefined-builtin
  """A dataclass field that is also a flag: its `default` and `help`;
  `choices` the allowed values (str: an enum flag; tuple: each item);
  `required`: the command refuses to run without it."""
  if isinstance(default, list):
    default = tuple(default)
  return dataclasses.field(default=default, metadata={_OPTION: {
      "help": help, "choices": tuple(choices) if choices else None,
      "required": required}})


def redefault(base_class, name, default):
  """`base_class`'s option `name` with another default, for a subclass:
  `train_steps: int = redefault(RunOptions, "train_steps", 500)`."""
  field = base_class.__dataclass_fields__[name]
  if isinstance(default, list):
    default = tuple(default)
  return dataclasses.field(default=default, metadata=field.metadata)


def flag_name(field):
  """The flag of an option field: its name, less the trailing underscore
  of a Python keyword (`from_` is --from)."""
  name = field.name
  keyword_ = name.endswith("_") and keyword.iskeyword(name[:-1])
  return name[:-1] if keyword_ else name


def option_fields(options_class):
  """The fields of `options_class` that are flags, in declaration order."""
  return [f for f in dataclasses.fields(options_class) if _OPTION in f.metadata]


def flag_spec(field, options_class):
  """(absl kind, default, help, choices, required) of an option field."""
  spec = field.metadata[_OPTION]
  kind = _kind(typing.get_type_hints(options_class)[field.name], field.name)
  if kind == "string" and spec["choices"]:
    kind = "enum"
  return kind, field.default, spec["help"], spec["choices"], spec["required"]


_KINDS = {bool: "bool", int: "integer", float: "float", str: "string",
          tuple: "list"}


def _kind(annotation, name):
  """The flag kind of a field's type; `X | None` is X's."""
  if isinstance(annotation, types.UnionType) or typing.get_origin(
      annotation) is typing.Union:
    annotation = next(a for a in typing.get_args(annotation)
                      if a is not type(None))
  annotation = typing.get_origin(annotation) or annotation
  if annotation not in _KINDS:
    raise TypeError(f"option {name}: no flag kind for type {annotation}")
  return _KINDS[annotation]


def define_flags(options_class, flag_values=flags.FLAGS):
  """Defines one flag per option field of `options_class` (the caller's
  module owns them)."""
  required = []
  for field in option_fields(options_class):
    kind, default, help, choices, needed = flag_spec(field, options_class)  # pylint: disable=redefined-builtin
    name = flag_name(field)
    if kind == "enum":
      flags.DEFINE_enum(name, default, list(choices), help,
                        flag_values=flag_values)
    elif kind == "list":
      if choices:
        help = f"{help} (of: {', '.join(choices)})"
      flags.DEFINE_list(name, None if default is None else list(default),
                        help, flag_values=flag_values)
      if choices:
        flags.register_validator(
            name, lambda items, allowed=choices: all(
                item in allowed for item in items or ()),
            f"--{name} takes only {', '.join(choices)}",
            flag_values=flag_values)
    else:
      define = getattr(flags, f"DEFINE_{kind}")
      define(name, default, help, flag_values=flag_values)
    if needed:
      required.append(name)
  for name in required:
    flags.mark_flag_as_required(name, flag_values=flag_values)


def _frozen(value):
  return tuple(value) if isinstance(value, list) else value


def from_flags(options_class, flag_values=flags.FLAGS, **values):
  """`options_class` filled from the parsed flags of its option fields;
  `values` set fields that are not flags (or override one). An option
  whose flag is not defined is an error: the command forgot
  `define_flags`."""
  for field in option_fields(options_class):
    if field.name not in values:
      name = flag_name(field)
      if name not in flag_values:
        raise KeyError(f"option --{name} of {options_class.__name__} "
                       "is not a defined flag (define_flags?)")
      values[field.name] = _frozen(flag_values[name].value)
  return options_class(**values)


def with_defaults(options_class, **values):
  """`options_class` as a command line with no flags would give it (each
  option's default), with `values` set: for tests and for commands that
  call another command's library."""
  return options_class(**values)


def run_command(define, main):
  """A command's entry point: SIGTERM ends it as Ctrl-C does, `define()`
  defines its flags (here, when it runs, so tests may import its
  functions), then absl runs `main`."""
  from absl import app
  from tfmodels.sigterm import exit_on_sigterm
  exit_on_sigterm()
  define()
  app.run(main)
