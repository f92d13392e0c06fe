"""WORKSPACE.md is a true map: what it names exists, and it names every module.

The convention (stated at the top of WORKSPACE.md): inside backticks,
  * a token containing "/" or ending in ".py" or ".md" is a path relative to
    the repository root (a trailing "/" means a directory; shell globs and
    one {a,b,...} group are expanded; bare names such as `README.md` are at
    the root);
  * a dotted name starting with one of the four packages
    (`tfmodels.data.squad`) is a module or package;
  * `python -m NAME ...` names module NAME (a module, or a package with
    __main__.py);
  * `make NAME ...` names a Makefile target.
Each must exist. Every .py module of the four packages (but __init__.py,
__main__.py and anything under a tests/ folder) must be named, by its path
or its dotted name. Fenced code blocks are not read. Nothing here imports
TensorFlow or the product.
"""

import glob
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("tfmodels", "converters", "android_bench", "experiments")
EXEMPT = ("__init__.py", "__main__.py")

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_BACKTICKED = re.compile(r"`([^`\n]+)`")
_DOTTED = re.compile(r"^(?:%s)(?:\.[A-Za-z_][A-Za-z0-9_]*)*$" % "|".join(PACKAGES))
_BRACES = re.compile(r"\{([^{}]*)\}")
_TARGET = re.compile(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", re.M)


def backticked(text):
  """Every inline backticked token of a Markdown text, code blocks left out."""
  return [token.strip() for token in _BACKTICKED.findall(_FENCE.sub("", text))]


def expand_braces(token):
  """`a/{b,c}.py` -> [`a/b.py`, `a/c.py`] (one group; none: [token])."""
  match = _BRACES.search(token)
  if not match:
    return [token]
  return [token[:match.start()] + choice + token[match.end():]
          for choice in match.group(1).split(",")]


def module_path(dotted, root=REPO):
  """The repository path of a dotted module or package name, or None."""
  base = os.path.join(root, *dotted.split("."))
  for candidate in (base + ".py", os.path.join(base, "__init__.py")):
    if os.path.isfile(candidate):
      return os.path.relpath(candidate, root).replace(os.sep, "/")
  return None


def makefile_targets(root=REPO):
  path = os.path.join(root, "Makefile")
  if not os.path.isfile(path):
    return set()
  with open(path, encoding="utf-8") as f:
    return set(_TARGET.findall(f.read()))


def path_exists(path, root=REPO):
  """A repository path (globs allowed; a trailing / must be a directory)."""
  full = os.path.join(root, path)
  if any(c in path for c in "*?["):
    matches = glob.glob(full)
    return bool(matches) and (not path.endswith("/") or
                              any(os.path.isdir(m) for m in matches))
  return os.path.isdir(full) if path.endswith("/") else os.path.exists(full)


def is_path(token):
  return "/" in token or token.endswith((".py", ".md"))


def repo_modules(root=REPO):
  """Repository paths of every module the map must name."""
  modules = set()
  for package in PACKAGES:
    for directory, dirs, files in os.walk(os.path.join(root, package)):
      dirs[:] = [d for d in dirs if d not in ("tests", "__pycache__")]
      for name in files:
        if name.endswith(".py") and name not in EXEMPT:
          path = os.path.relpath(os.path.join(directory, name), root)
          modules.add(path.replace(os.sep, "/"))
  return modules


def check_map(text, root=REPO):
  """(unknown, missing): what `text` names that the repository lacks, and
  the modules of the repository `text` does not name."""
  unknown, named = [], set()
  targets = None
  for token in backticked(text):
    words = token.split()
    if words[:2] == ["python", "-m"] and len(words) > 2:
      path = module_path(words[2], root)
      main = os.path.join(root, *words[2].split("."), "__main__.py")
      if path is None or (path.endswith("__init__.py") and
                          not os.path.isfile(main)):
        unknown.append(f"command `{token}`")
      else:
        named.add(path)
    elif words[:1] == ["make"] and len(words) > 1:
      if targets is None:
        targets = makefile_targets(root)
      if words[1] not in targets:
        unknown.append(f"Makefile target `{token}`")
    elif len(words) == 1 and _DOTTED.match(token):
      path = module_path(token, root)
      if path is None:
        unknown.append(f"module `{token}`")
      else:
        named.add(path)
    elif len(words) == 1 and is_path(token):
      for path in expand_braces(token):
        if not path_exists(path, root):
          unknown.append(f"path `{path}`")
        else:
          named.add(path.rstrip("/"))
  missing = sorted(repo_modules(root) - named)
  return unknown, missing


def map_errors(text, root=REPO):
  """One message naming everything wrong, or '' when the map is true."""
  unknown, missing = check_map(text, root)
  lines = []
  if unknown:
    lines.append("WORKSPACE.md names what the repository lacks: " +
                 ", ".join(unknown))
  if missing:
    lines.append("modules missing from WORKSPACE.md: " + ", ".join(missing))
  return "\n".join(lines)


def read_workspace(root=REPO):
  with open(os.path.join(root, "WORKSPACE.md"), encoding="utf-8") as f:
    return f.read()


def test_workspace_map_matches_the_repository():
  errors = map_errors(read_workspace())
  assert not errors, errors


def test_workspace_map_has_no_issue_numbers():
  text = read_workspace()
  found = re.findall(r"(?i)\bissues?\s+\d+|(?<![\w&])#\d+\b", text)
  assert not found, f"issue numbers in WORKSPACE.md: {found}"


def test_the_user_docs_stay_short():
  """A map and a README read in minutes: at most 300 lines each."""
  for name in ("WORKSPACE.md", "README.md"):
    with open(os.path.join(REPO, name), encoding="utf-8") as f:
      lines = len(f.read().splitlines())
    assert lines <= 300, f"{name}: {lines} lines"


def _fake_repo(tmp_path):
  """A small repository: two modules, a package, a Makefile, a README."""
  for path in ("tfmodels/__init__.py", "tfmodels/configs.py",
               "tfmodels/data/__init__.py", "tfmodels/data/glue.py",
               "experiments/__init__.py", "experiments/ship/__init__.py",
               "experiments/ship/__main__.py", "experiments/ship/command.py",
               "experiments/tests/test_x.py", "README.md"):
    full = tmp_path / path
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_text('"""Doc."""\n')
  (tmp_path / "Makefile").write_text("demo: setup\n\tpython x\nVENV := .venv\n")
  return str(tmp_path)


GOOD_MAP = """# Map
- `tfmodels/configs.py`: configs.
- `tfmodels/data/glue.py`: GLUE.
- `experiments/ship/command.py`: `python -m experiments.ship --teacher DIR`, `make demo`.
See `README.md`, `tfmodels/{configs,data/glue}.py`, `tfmodels/data/*.py`,
`tfmodels.data`, `task.json`, `--output_dir`.
```
`not/checked.py`
```
"""


def test_the_checker_passes_a_true_map(tmp_path):
  root = _fake_repo(tmp_path)
  assert check_map(GOOD_MAP, root) == ([], [])
  assert map_errors(GOOD_MAP, root) == ""


def test_the_checker_names_a_missing_module(tmp_path):
  root = _fake_repo(tmp_path)
  text = GOOD_MAP.replace("- `tfmodels/data/glue.py`: GLUE.\n", "").replace(
      "`tfmodels/{configs,data/glue}.py`, `tfmodels/data/*.py`,", "")
  unknown, missing = check_map(text, root)
  assert unknown == []
  assert missing == ["tfmodels/data/glue.py"]
  assert "tfmodels/data/glue.py" in map_errors(text, root)


def test_the_checker_names_unknown_modules_paths_commands_targets(tmp_path):
  root = _fake_repo(tmp_path)
  text = GOOD_MAP + """- `tfmodels/bogus.py`: gone.
`tfmodels.nothing`, `python -m experiments.nope --x`,
`python -m tfmodels.data` (a package without __main__), `make deploy`,
`docs/absent.md`, `data/nowhere/`, `tfmodels/configs.py/`, `NOTES.md`,
`tfmodels/{configs,bogus2}.py`, `tfmodels/*.json`.
"""
  unknown, missing = check_map(text, root)
  assert missing == []
  assert unknown == [
      "path `tfmodels/bogus.py`", "module `tfmodels.nothing`",
      "command `python -m experiments.nope --x`",
      "command `python -m tfmodels.data`", "Makefile target `make deploy`",
      "path `docs/absent.md`", "path `data/nowhere/`",
      "path `tfmodels/configs.py/`", "path `NOTES.md`",
      "path `tfmodels/bogus2.py`", "path `tfmodels/*.json`"]
  message = map_errors(text, root)
  for name in ("tfmodels/bogus.py", "tfmodels.nothing", "experiments.nope",
               "make deploy", "docs/absent.md"):
    assert name in message


def test_the_real_map_fails_without_a_module_line_or_with_a_bogus_one():
  text = read_workspace()
  unknown, missing = check_map(
      text.replace("`experiments/common/tiny_teacher.py`", "tiny_teacher"))
  assert missing == ["experiments/common/tiny_teacher.py"] and unknown == []
  bogus = text + "\n- `converters/no_such_module.py`: made up.\n"
  unknown, missing = check_map(bogus)
  assert unknown == ["path `converters/no_such_module.py`"] and missing == []
