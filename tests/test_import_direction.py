"""The stages import only earlier stages, and no modules import each other.

tfmodels <- converters <- android_bench <- experiments (shared/DESIGN.md):
every import statement of the product, those inside functions included, is
parsed (nothing is imported), so a helper that two stages need has to live
in the earlier one. Within a stage, SUBPACKAGE_RULES forbid a sub-package
to import another (the distillation stage comes before training).
"""

import ast
import os

import pytest

from conftest import REPO

STAGES = ("tfmodels", "converters", "android_bench", "experiments")
# (importer, imported): nothing under the first imports anything under the
# second. Distillation (initialisations, losses) is a stage of its own that
# the training commands use, never the other way round.
# In experiments: common <- apps, bench <- ship <- demo, papers (the demo
# and the paper experiments both run ship's parts, never each other's).
_LATER = {"common": ("apps", "bench", "ship", "demo", "papers"),
          "apps": ("ship", "demo", "papers"), "bench": ("apps", "ship",
                                                        "demo", "papers"),
          "ship": ("demo", "papers"), "demo": ("papers",),
          "papers": ("demo",)}
SUBPACKAGE_RULES = (("tfmodels.distillation", "tfmodels.training"),) + tuple(
    (f"experiments.{a}", f"experiments.{b}")
    for a, later in _LATER.items() for b in later)


def product_modules(root=REPO):
  """{dotted module name: path} of every .py file of the four stages."""
  modules = {}
  for stage in STAGES:
    for directory, _, files in os.walk(os.path.join(root, stage)):
      for name in files:
        if not name.endswith(".py"):
          continue
        path = os.path.join(directory, name)
        parts = os.path.relpath(path, root)[:-3].split(os.sep)
        if parts[-1] == "__init__":
          parts = parts[:-1]
        modules[".".join(parts)] = path
  return modules


def imported_names(module, path):
  """Every dotted name an import statement of the file may load."""
  tree = ast.parse(open(path, encoding="utf-8").read(), path)
  package = module.split(".") if path.endswith("__init__.py") else (
      module.split(".")[:-1])
  names = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names += [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        parent = package[:len(package) - node.level + 1]
        base = ".".join(parent + ([node.module] if node.module else []))
      names += [base] + [f"{base}.{alias.name}" for alias in node.names]
  return names


def import_graph(modules):
  """{module: set of project modules it imports} (names resolved to the
  longest module they start with: `from converters import quantize` is
  converters.quantize, `from converters.quantize import MODES` too)."""
  graph = {}
  for module, path in modules.items():
    targets = set()
    for name in imported_names(module, path):
      while name and name not in modules:
        name = name.rpartition(".")[0]
      if name and name != module:
        targets.add(name)
    graph[module] = targets
  return graph


def backward_imports(graph):
  """(importer, imported) pairs where a stage imports a later one."""
  rank = {stage: i for i, stage in enumerate(STAGES)}
  return sorted((a, b) for a, targets in graph.items() for b in targets
                if rank[b.split(".")[0]] > rank[a.split(".")[0]])


def _under(module, package):
  return module == package or module.startswith(package + ".")


def forbidden_imports(graph, rules=SUBPACKAGE_RULES):
  """(importer, imported) pairs that break a sub-package rule."""
  return sorted((a, b) for a, targets in graph.items() for b in targets
                for importer, imported in rules
                if _under(a, importer) and _under(b, imported))


def cycles(graph):
  """Strongly connected components of more than one module (Tarjan)."""
  index, low, stack, on_stack, found = {}, {}, [], set(), []

  def visit(node):
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    for target in sorted(graph.get(node, ())):
      if target not in index:
        visit(target)
        low[node] = min(low[node], low[target])
      elif target in on_stack:
        low[node] = min(low[node], index[target])
    if low[node] == index[node]:
      component = []
      while True:
        member = stack.pop()
        on_stack.discard(member)
        component.append(member)
        if member == node:
          break
      if len(component) > 1:
        found.append(sorted(component))

  for node in sorted(graph):
    if node not in index:
      visit(node)
  return found


@pytest.fixture(scope="module")
def graph():
  return import_graph(product_modules())


def test_every_stage_imports_only_earlier_stages(graph):
  assert len(graph) > 100  # the whole product was read
  assert backward_imports(graph) == []


def test_sub_packages_import_only_what_their_rules_allow(graph):
  assert any(_under(m, "tfmodels.distillation") for m in graph)
  assert forbidden_imports(graph) == []


def test_no_modules_import_each_other(graph):
  assert cycles(graph) == []


def test_the_product_never_imports_test_code():
  for module, path in product_modules().items():
    roots = {name.split(".")[0] for name in imported_names(module, path)}
    assert not roots & {"tests", "fixtures", "conftest"}, module


def test_the_checks_catch_what_they_forbid(tmp_path):
  """The same functions on a made-up tree: a backward import, a cycle
  through a lazy import and a relative one, and distillation importing
  training (lazily, and relatively) are all found."""
  files = {
      "tfmodels/__init__.py": "",
      "tfmodels/a.py": "def f():\n  from converters import b\n",
      "tfmodels/distillation/__init__.py": "",
      "tfmodels/distillation/e.py": ("def g():\n"
                                     "  from ..training import loop\n"),
      "tfmodels/training/__init__.py": "",
      "tfmodels/training/loop.py": "",
      "tfmodels/training/run.py": "from tfmodels.distillation import e\n",
      "converters/__init__.py": "",
      "converters/b.py": "from . import c\n",
      "converters/c.py": "import converters.b\n",
      "experiments/__init__.py": "",
      "experiments/d.py": "from tfmodels.a import f\n",
  }
  for name, text in files.items():
    os.makedirs(tmp_path / os.path.dirname(name), exist_ok=True)
    (tmp_path / name).write_text(text)
  made_up = import_graph(product_modules(str(tmp_path)))
  assert backward_imports(made_up) == [("tfmodels.a", "converters"),
                                       ("tfmodels.a", "converters.b")]
  assert cycles(made_up) == [["converters.b", "converters.c"]]
  assert forbidden_imports(made_up) == [
      ("tfmodels.distillation.e", "tfmodels.training"),
      ("tfmodels.distillation.e", "tfmodels.training.loop")]


def sub_package_graph(graph, stage="tfmodels"):
  """`graph` with each sub-package of `stage` one node (`tfmodels.data`) and
  the stage's own modules (`tfmodels.staging`) kept apart."""
  packages = {m.split(".")[1] for m in graph
              if m.startswith(stage + ".") and m.count(".") >= 2}

  def node(module):
    parts = module.split(".")
    return (".".join(parts[:2]) if len(parts) > 1 and parts[1] in packages
            else module)

  merged = {}
  for a, targets in graph.items():
    if _under(a, stage):
      merged.setdefault(node(a), set()).update(
          node(b) for b in targets if _under(b, stage) and node(b) != node(a))
  return merged


def test_no_sub_package_and_package_module_import_each_other(graph):
  """A module of the package root that a sub-package uses (staging,
  tokenization) never leads back into that sub-package (issue 38: the
  root's vocab_learning read tfmodels.data, whose build_demo_data
  imported it)."""
  assert cycles(sub_package_graph(graph)) == []
