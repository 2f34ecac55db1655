"""The layers of docs/ARCHITECTURE.md, read from the code: every import of the product, the lab, the Spark apps and
the DAG files (module level and inside functions, read with ``ast``, nothing imported or run).

Fails on an import circle between modules, on an import that points up the layers, on an import inside a function
without a comment on its line saying why (keeps DAG parsing fast, breaks a load-time cost...), and on a detector,
parser or remediation function over ``MAX_FUNCTION_LINES`` lines.
"""

from __future__ import annotations

import ast
import collections
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# (folder, module prefix): where the modules live and how Python names them
ROOTS = ((REPO / "plugins", ""),
    (REPO / "lab", ""),
    (REPO / "spark_apps", "spark_apps."),
    (REPO / "dags", "dags."))
SKIP_PARTS = {"migrations"}  # Alembic's scripts: loaded by Alembic, never imported

# Bottom to top; a module may import its own layer or any layer below. A module's layer is that of the longest
# prefix naming it (a package name covers its modules). docs/ARCHITECTURE.md says the same in words.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("vocabulary", ("kafka_runbooks.model", "kafka_runbooks.versions", "kafka_runbooks.clock",
                    "kafka_runbooks.policies", "kafka_runbooks.schedules", "kafka_runbooks.xcom_size",
                    "kafka_runbooks.zookeeper", "kafka_runbooks.truth", "kafka_runbooks.findings",
                    "kafka_runbooks.urls", "kafka_runbooks.metrics", "kafka_runbooks.spark_apps_path")),
    ("config", ("kafka_runbooks.config", "kafka_runbooks.settings_model")),
    ("host", ("kafka_runbooks.host",)),
    ("rules", ("kafka_runbooks.analyze", "kafka_runbooks.remediate.safety", "kafka_runbooks.remediate.blast",
               "kafka_runbooks.remediate.markdown", "kafka_runbooks.remediate.asking",
               "kafka_runbooks.remediate.briefing", "kafka_runbooks.remediate.digest", "kafka_runbooks.remediate.demote",
               "kafka_runbooks.remediate.recovery", "kafka_runbooks.remediate.waits",
               "kafka_runbooks.remediate.resumption", "kafka_runbooks.remediate.termination")),
    ("hooks", ("kafka_runbooks.hooks",)),
    ("state", ("kafka_runbooks.state", "kafka_runbooks.hooks.db")),
    ("detect", ("kafka_runbooks.detect",)),
    ("capture", ("kafka_runbooks.capture",)),
    ("incidents", ("kafka_runbooks.incidents",)),
    ("remediate", ("kafka_runbooks.remediate",)),
    ("notify", ("kafka_runbooks.notify", "kafka_runbooks.triggers")),
    ("services", ("kafka_runbooks.runbook",)),
    ("operators", ("kafka_runbooks.operators", "kafka_runbooks.state.__main__")),
    ("web", ("kafka_runbooks.web", "kafka_runbooks_web", "spark_apps", "kafka_runbooks.provider")),
    ("dags", ("dags", "kafka_runbooks.dags", "kafka_runbooks.example_dags", "kafka_runbooks.cli")),
    ("lab", ("kafka_lab",)),
)
PACKAGE_ROOT = "kafka_runbooks"  # its __init__ imports nothing of the product: any layer may name it

# Imports inside functions that carry no comment yet, per module: may only shrink (a new one needs its reason on
# its line). Written when the test was added; lower a number when you comment or hoist such imports.
UNCOMMENTED_FUNCTION_IMPORTS_BASELINE: dict[str, int] = {
    "kafka_lab.__main__": 1,
    "kafka_lab.deployment": 6,
    "kafka_lab.drill": 4,
    "kafka_lab.drill_003": 17,
    "kafka_lab.drill_all": 6,
    "kafka_lab.drill_deployed": 4,
    "kafka_lab.faults": 3,
    "kafka_lab.incident_drills": 4,
    "kafka_lab.lab": 1,
    "kafka_lab.leadership": 2,
    "kafka_lab.load": 1,
    "kafka_runbooks.analyze.fastscan": 2,
    "kafka_runbooks.analyze.nativescan": 9,
    "kafka_runbooks.analyze.parsers.listings": 1,
    "kafka_runbooks.analyze.regex_audit": 1,
    "kafka_runbooks.analyze.signatures": 1,
    "kafka_runbooks.capture.collector": 5,
    "kafka_runbooks.capture.zookeeper": 2,
    "kafka_runbooks.config": 4,
    "kafka_runbooks.detect.history": 1,
    "kafka_runbooks.detect.host_probe": 4,
    "kafka_runbooks.detect.jmx": 1,
    "kafka_runbooks.detect.leadership": 1,
    "kafka_runbooks.detect.leadership_observe": 10,
    "kafka_runbooks.detect.observe": 16,
    "kafka_runbooks.detect.snapshot": 1,
    "kafka_runbooks.detect.zk_probe": 4,
    "kafka_runbooks.detect.zookeeper": 1,
    "kafka_runbooks.hooks.kafka": 5,
    "kafka_runbooks.host.procfs": 1,
    "kafka_runbooks.notify.webhook": 3,
    "kafka_runbooks.remediate.activity": 2,
    "kafka_runbooks.remediate.approvals": 2,
    "kafka_runbooks.remediate.blast": 1,
    "kafka_runbooks.remediate.election": 4,
    "kafka_runbooks.remediate.election_run": 16,
    "kafka_runbooks.remediate.election_schedule": 2,
    "kafka_runbooks.remediate.gates": 4,
    "kafka_runbooks.remediate.host": 2,
    "kafka_runbooks.remediate.progress": 2,
    "kafka_runbooks.remediate.safety": 1,
    "kafka_runbooks.state": 1,
    "kafka_runbooks.state.__main__": 4,
    "kafka_runbooks.state.bundles": 1,
    "kafka_runbooks.state.fleet": 1,
    "kafka_runbooks.state.history": 1,
    "kafka_runbooks.state.incidents": 1,
    "kafka_runbooks.state.ledger": 1,
    "kafka_runbooks.state.plans": 3,
    "kafka_runbooks.state.snapshots": 1,
    "kafka_runbooks.triggers.election": 4,
    "kafka_runbooks.triggers.zookeeper": 2,
    "kafka_runbooks.web.app": 2,
    "kafka_runbooks.web.common": 1,
    "kafka_runbooks.web.incidents": 4,
    "kafka_runbooks.web.pages": 1,
    "kafka_runbooks.web.plugin": 1,
    "kafka_runbooks.web.routes": 9,
    "spark_apps.analyze_bundle": 1,
}

MAX_FUNCTION_LINES = 80
# The engine, the detectors, the host-side parsers and collectors, the analysis (its parsers, diagnosis rules and
# report), the services, the hooks (and the ZooKeeper reader beneath them), the web pages, the DAG factory and the
# repository's DAG files, and the Spark applications: no function of theirs over MAX_FUNCTION_LINES lines, and no
# allow-list -- each long one was split into named pieces (pure logic apart from I/O) when this list grew (issue 28).
LENGTH_CHECKED = ("kafka_runbooks.detect", "kafka_runbooks.analyze", "kafka_runbooks.remediate",
                  "kafka_runbooks.runbook", "kafka_runbooks.host", "kafka_runbooks.capture", "kafka_runbooks.hooks",
                  "kafka_runbooks.zookeeper", "kafka_runbooks.web", "kafka_runbooks.dags", "dags.", "spark_apps")


# Operators are glue (docs/ARCHITECTURE.md, "services" and "operators"): an operator's task methods read their
# arguments, call a service of runbook/ and hand back what it returns -- a few lines each, as Airflow's own provider
# operators are. Their modules import, of the product, only the services, the operators' own helpers, the Airflow
# triggers they defer to and the vocabulary; params.py (the trigger forms) reads the configured brokers at parse time.
OPERATOR_METHODS = ("execute", "execute_complete", "poke", "choose_branch")
MAX_OPERATOR_METHOD_LINES = 12
OPERATOR_IMPORTS = ("kafka_runbooks.runbook", "kafka_runbooks.operators", "kafka_runbooks.triggers")
OPERATOR_IMPORT_EXCEPTIONS = {"kafka_runbooks.operators.params": ("kafka_runbooks.config",)}


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module of this repo
    line: int
    in_function: bool
    commented: bool


def _modules() -> dict[str, Path]:
    found = {}
    for base, prefix in ROOTS:
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if SKIP_PARTS & set(parts):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[prefix + ".".join(parts)] = path
    return found


MODULES = _modules()


def _known(name: str | None) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _targets(module: str, node: ast.Import | ast.ImportFrom, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            base = module.split(".")[: None if is_package else -1]
            base = base[: len(base) - (node.level - 1)]
            where = ".".join(base + ([node.module] if node.module else []))
        else:
            where = node.module or ""
        names = [f"{where}.{a.name}" if f"{where}.{a.name}" in MODULES else where for a in node.names]
    return [t for t in (_known(n) for n in names) if t and t != module]


def _imports_of(module: str, path: Path) -> list[Import]:
    text = path.read_text()
    lines = text.splitlines()
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                span = lines[child.lineno - 1: (child.end_lineno or child.lineno)]
                commented = any("#" in line for line in span)
                for target in dict.fromkeys(_targets(module, child, path.name == "__init__.py")):
                    found.append(Import(module, target, child.lineno, in_function, commented))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(text, str(path)), False)
    return found


IMPORTS = [i for m, p in MODULES.items() for i in _imports_of(m, p)]


def layer_of(module: str) -> int:
    best, rank = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, rank = len(p), i
    return rank


def _where(i: Import) -> str:
    return f"{MODULES[i.source].relative_to(REPO)}:{i.line}"


def test_every_module_has_a_layer():
    assert [m for m in MODULES if m != PACKAGE_ROOT and layer_of(m) < 0] == []


def _circles(imports: list[Import]) -> list[list[str]]:
    graph = collections.defaultdict(set)
    for i in imports:
        graph[i.source].add(i.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def strong(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(MODULES):
        if v not in index:
            strong(v)
    return circles


def test_no_import_circles():
    circles = _circles([i for i in IMPORTS if i.source != i.target])
    ties = [f"{' <-> '.join(c)}: " + ", ".join(f"{_where(i)} -> {i.target}" for i in IMPORTS
                                               if i.source in c and i.target in c) for c in circles]
    assert ties == [], "import circles (module level and inside functions):\n" + "\n".join(ties)


def test_circle_finder_sees_a_circle():
    a = Import("kafka_runbooks.model", "kafka_runbooks.config", 1, False, False)
    b = Import("kafka_runbooks.config", "kafka_runbooks.model", 1, True, True)
    assert _circles([a, b]) == [["kafka_runbooks.config", "kafka_runbooks.model"]]


def test_no_import_points_up_the_layers():
    up = [f"{_where(i)}: {i.source} ({LAYERS[layer_of(i.source)][0]}) imports {i.target} "
          f"({LAYERS[layer_of(i.target)][0]})"
          for i in IMPORTS if i.target != PACKAGE_ROOT and layer_of(i.target) > layer_of(i.source)]
    assert up == [], "imports that point up the layers of docs/ARCHITECTURE.md:\n" + "\n".join(up)


def test_imports_inside_functions_say_why():
    lines_of = {(i.source, i.line): i for i in IMPORTS if i.in_function and not i.commented}
    count = collections.Counter(source for source, _ in lines_of)
    over = {m: (n, UNCOMMENTED_FUNCTION_IMPORTS_BASELINE.get(m, 0)) for m, n in count.items()
            if n > UNCOMMENTED_FUNCTION_IMPORTS_BASELINE.get(m, 0)}
    lines = [f"{_where(i)} -> {i.target}" for i in lines_of.values() if i.source in over]
    assert over == {}, ("imports inside functions without a comment on their line saying why (module: (found, "
                        "allowed)): " + repr(over) + "\n" + "\n".join(lines))


def _long_functions(modules: dict[str, Path] | None = None) -> dict[str, int]:
    found = {}
    for module, path in (MODULES if modules is None else modules).items():
        if not module.startswith(LENGTH_CHECKED):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found[f"{module}.{node.name}"] = max(length, found.get(f"{module}.{node.name}", 0))
    return found


def test_functions_are_short():
    over = _long_functions()
    assert over == {}, f"functions over {MAX_FUNCTION_LINES} lines (module.function: lines): {over}"


def test_the_length_check_sees_a_long_function(tmp_path):
    """The check above can fail: it measures a function from its ``def`` to its last line, nested ones too."""
    path = tmp_path / "m.py"
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    path.write_text(f"def short():\n    pass\n\n\ndef long():\n    def inner():\n{body.replace('    ', '        ')}"
                    "    return inner\n")
    assert _long_functions({"kafka_runbooks.detect.m": path}) == {"kafka_runbooks.detect.m.long": MAX_FUNCTION_LINES + 3,
                                                                  "kafka_runbooks.detect.m.inner": MAX_FUNCTION_LINES + 1}


@pytest.mark.parametrize("line, commented", [("    from x import y  # keeps DAG parsing fast", True),
                                             ("    from x import y", False)])
def test_comment_reader(tmp_path, line, commented):
    path = tmp_path / "m.py"
    path.write_text("def f():\n" + line.replace("x", "kafka_runbooks.model").replace("y", "Broker") + "\n")
    (found,) = _imports_of("kafka_runbooks.config", path)
    assert found.in_function and found.target == "kafka_runbooks.model" and found.commented is commented


def _operator_modules() -> dict[str, Path]:
    return {m: p for m, p in MODULES.items() if m.startswith("kafka_runbooks.operators.")}


def _operator_methods_over(limit: int) -> dict[str, int]:
    over = {}
    for module, path in _operator_modules().items():
        for cls in ast.parse(path.read_text(), str(path)).body:
            if not isinstance(cls, ast.ClassDef):
                continue
            for f in cls.body:
                if isinstance(f, ast.FunctionDef) and f.name in OPERATOR_METHODS:
                    body = f.body[1:] if ast.get_docstring(f) else f.body
                    length = (f.end_lineno or f.lineno) - body[0].lineno + 1
                    if length > limit:
                        over[f"{module}.{cls.name}.{f.name}"] = length
    return over


def test_operators_are_glue():
    """Every operator's task method is short (its body, without its docstring), and operator modules import of the
    product only the services, their own helpers, the triggers and the vocabulary: the decisions are in runbook/ and
    below, where a test reaches them without Airflow."""
    assert _operator_methods_over(MAX_OPERATOR_METHOD_LINES) == {}
    vocabulary = LAYERS[0][1]
    wrong = [f"{_where(i)} -> {i.target}" for i in IMPORTS if i.source in _operator_modules()
             and i.target != PACKAGE_ROOT and not i.target.startswith(OPERATOR_IMPORTS + vocabulary
                                                                      + OPERATOR_IMPORT_EXCEPTIONS.get(i.source, ()))]
    assert wrong == [], "operators importing below the services:\n" + "\n".join(wrong)


def test_the_glue_check_sees_a_long_execute():
    """The check above can fail: every operator's longest task method is over a limit of 3 lines."""
    assert len(_operator_methods_over(3)) >= 10


# A finding crosses the response run's tasks as a reference (issue 28): the services load typed findings in one place,
# runbook/finding_records.py, the only module of the services and the operators that parses one from a dict.
FINDING_LOADER = "kafka_runbooks.runbook.finding_records"


def _finding_parses(modules: dict[str, Path]) -> list[str]:
    found = []
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Attribute) and node.attr == "from_dict" and isinstance(node.value, ast.Name)
                    and node.value.id == "Finding"):
                found.append(f"{module}:{node.lineno}")
    return found


def test_findings_are_parsed_in_one_place():
    services = {m: p for m, p in MODULES.items() if m.startswith(("kafka_runbooks.runbook.", "kafka_runbooks.operators."))
                and m != FINDING_LOADER}
    assert _finding_parses(services) == [], "Finding.from_dict outside runbook/finding_records.py"
    assert _finding_parses({FINDING_LOADER: MODULES[FINDING_LOADER]})  # the check sees one where there is one
