"""The rules of the house (../shared/DESIGN.md), checked on the source: who may import what.

Each rule is one test, reading every module's imports with ``ast`` (function-level imports included, except
where a rule is about what loading a module costs, where only module-level imports count).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "rocket_rebalance"
STUB = ROOT / "nameserver_stub"

# Layers, each importing only those below it (DESIGN.md); a module's layer is its first path part under the package.
LAYERS = {
    "model": 0,
    "route": 1,
    "strategies": 1,
    "subscription": 1,  # subscription expressions as Java builds them: pure, below the remoting codec
    "trace": 1,  # message trace records as Java writes them: an ordinary message's body, for either wire
    "plan": 2,
    "snapshot_folder": 2,  # the snapshot folder's contract: files and JSON over model and strategies
    "remoting": 2,
    "mqadmin": 3,
    "whatif": 3,
    "testing": 3,
    "tradeoffs": 3,
    "pictures": 3,  # ownership grids: plans as pictures (matplotlib only when drawing), for commands and pipeline
    "core": 4,
    "inputs": 2,
    "progress": 2,  # a command's progress on the stream it is given: the commands and the pipeline both use it
    "runtime": 5,
    "admin": 6,
    "lab": 7,
    "commands": 8,
    "cli": 8,
    "__main__": 9,
    "__init__": 3,
}
PURE = ("model", "route", "subscription", "trace", "strategies", "plan", "remoting", "mqadmin", "whatif")
# What a pure module must never touch: I/O, threads, clocks, randomness, logging, and every wire or engine.
IMPURE = (
    "asyncio",
    "concurrent",
    "grpc",
    "grpc_health",
    "http",
    "logging",
    "multiprocessing",
    "os",
    "pandas",
    "pyarrow",
    "pyspark",
    "random",
    "select",
    "selectors",
    "socket",
    "sqlite3",
    "ssl",
    "subprocess",
    "threading",
    "time",
    "urllib",
    "rocket_rebalance._proto",
)
CORE_ALLOWED = ("__future__", "bisect", "collections", "dataclasses", "enum", "math", "operator", "typing")


def _modules(folder: Path) -> list[Path]:
    """The modules under ``folder``; a folder with none fails the rule that walks it, so a rule over a renamed or
    emptied folder cannot pass by checking nothing."""
    found = sorted(p for p in folder.rglob("*.py") if "_proto" not in p.parts)
    assert found, f"{folder.relative_to(ROOT)} holds no module: the rule walking it would check nothing"
    return found


def _type_checking_only(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:``: imports for annotations, never executed."""
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _imports(path: Path, module_level_only: bool = False) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes: list[ast.AST] = []
    if module_level_only:
        stack: list[ast.AST] = list(tree.body)
        while stack:
            node = stack.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) or _type_checking_only(node):
                continue
            nodes.append(node)
            stack.extend(ast.iter_child_nodes(node))
    else:
        nodes = list(ast.walk(tree))
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _dotted(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(name: str, imported: ast.ImportFrom | ast.Import, known: set[str]) -> set[str]:
    """The package modules an import loads by name: ``from a.b import c`` is ``a.b.c`` when that is a module (its
    package ``a.b`` is loaded as a parent, which is no dependency on the package's own names), else ``a.b``."""
    if isinstance(imported, ast.Import):
        return {name} & known
    submodules = {f"{name}.{alias.name}" for alias in imported.names} & known
    names_of_the_module = len(submodules) < len(imported.names)
    return submodules | ({name} & known if names_of_the_module else set())


def _import_graph() -> dict[str, set[str]]:
    """Each package module's imports of other package modules, function-level ones included (a lazy import is a
    dependency all the same: it only moves the moment the cycle bites)."""
    paths = {_dotted(p): p for p in _modules(PACKAGE)}
    known = set(paths)
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        edges: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        annotations_only = {id(n) for block in ast.walk(tree) if _type_checking_only(block) for n in ast.walk(block)}
        for node in ast.walk(tree):
            if id(node) in annotations_only:
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    edges |= _resolve(alias.name, node, known)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                edges |= _resolve(node.module, node, known)
        graph[module] = edges - {module}
    return graph


def _part(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0].removesuffix(".py")


def test_every_package_module_has_a_layer() -> None:
    parts = {_part(p) for p in _modules(PACKAGE)} - {"pipeline"}
    assert parts <= set(LAYERS), f"give these a layer in LAYERS: {sorted(parts - set(LAYERS))}"


def test_each_layer_imports_only_those_below_it() -> None:
    """The package's top ``__init__`` is the one exception, and only as far as loading goes: it names the consumer
    API for type checkers (``TYPE_CHECKING``) and loads it on first use by name (``_LAZY``), never at import."""
    for path in _modules(PACKAGE):
        part = _part(path)
        if part == "pipeline":
            continue
        for name in _imports(path, module_level_only=path == PACKAGE / "__init__.py"):
            if not name.startswith("rocket_rebalance.") or _under(name, ("rocket_rebalance._proto",)):
                continue
            target = name.split(".")[1]
            if target == part:
                continue
            assert target != "pipeline", f"{path.relative_to(ROOT)} imports the pipeline"
            assert LAYERS[target] <= LAYERS[part], f"{path.relative_to(ROOT)} ({part}) imports {name} from above"


@pytest.mark.parametrize("part", PURE)
def test_pure_layers_do_no_io_and_load_no_wire(part: str) -> None:
    paths = [p for p in _modules(PACKAGE) if _part(p) == part]
    assert paths
    for path in paths:
        for name in _imports(path):
            assert not _under(name, IMPURE), f"{path.relative_to(ROOT)} imports {name}"


def test_core_imports_only_the_pure_layers_and_harmless_stdlib() -> None:
    allowed = CORE_ALLOWED + tuple(f"rocket_rebalance.{p}" for p in ("core", "model", "strategies", "plan"))
    for path in _modules(PACKAGE / "core"):
        for name in _imports(path):
            assert _under(name, allowed), f"{path.relative_to(ROOT)} imports {name}"


def test_only_the_wire_modules_import_a_wire() -> None:
    """Code written against the transport interface loads neither gRPC nor the remoting codec."""
    wires = {
        ("grpc", "rocket_rebalance._proto"): {
            "runtime/transport/grpc.py",
            "runtime/transport/grpc_async.py",
            "runtime/transport/grpc_calls.py",
        },
        ("rocket_rebalance.remoting",): {
            "runtime/transport/remoting.py",
            "runtime/transport/remoting_pool.py",
            "runtime/transport/remoting_inbound.py",
            "runtime/transport/remoting_admin.py",
            "runtime/transport/remoting_producer.py",
            "runtime/transport/connection.py",
            "runtime/transport/remoting_wire.py",
            "runtime/transport/remoting_calls.py",
            "runtime/transport/remoting_answers.py",
            "runtime/transport/pulled.py",
            "runtime/transport/remoting_async.py",
            "runtime/transport/connection_async.py",
        },
    }
    for path in _modules(PACKAGE / "runtime") + _modules(PACKAGE / "commands"):
        relative = str(path.relative_to(PACKAGE))
        for name in _imports(path, module_level_only=True):
            for prefixes, owners in wires.items():
                if _under(name, prefixes):
                    assert relative in owners, f"{relative} imports {name} at module level"


def test_the_stub_shares_only_the_model_and_the_generated_code() -> None:
    for path in _modules(STUB):
        for name in _imports(path):
            if name.startswith("rocket_rebalance"):
                assert _under(name, ("rocket_rebalance.model", "rocket_rebalance._proto")), f"{path.name}: {name}"


def test_only_the_pipeline_imports_spark_and_it_uses_only_the_pure_layers() -> None:
    for path in _modules(PACKAGE) + _modules(STUB):
        inside = PACKAGE / "pipeline" in path.parents
        for name in _imports(path):
            if not inside:
                assert not _under(name, ("pyspark",)), f"{path.relative_to(ROOT)} imports {name}"
            elif name.startswith("rocket_rebalance."):
                # route: the model's route; snapshot_folder: the folder's contract, pure but for its files;
                # subscription: pure expressions (the audit compares what a group's members subscribe); progress:
                # what the job says of its steps, on the stream it is given; pictures: the ownership grid the
                # report draws as simulate and allocate-mq do
                allowed = (
                    "model", "route", "strategies", "subscription", "plan", "snapshot_folder", "inputs", "progress",
                    "pictures",
                    "pipeline",
                )  # fmt: skip
                assert name.split(".")[1] in allowed, f"{path.relative_to(ROOT)} imports {name}"


def test_progress_does_no_io_but_on_its_stream() -> None:
    """The progress module sits low because the pipeline uses it: it writes to the stream it is given, reads the
    clock it is given (its default, the monotonic one) and the terminal's width, and loads nothing else."""
    allowed = ("__future__", "collections", "os", "time", "types", "typing", "rocket_rebalance.model")
    for name in _imports(PACKAGE / "progress.py"):
        assert _under(name, allowed), f"progress.py imports {name}"


def test_embedding_loads_no_wire_until_one_is_chosen() -> None:
    code = (
        "import sys, rocket_rebalance.runtime.consumer, rocket_rebalance.runtime.engine;"
        "print(sorted(m for m in ('grpc', 'pyspark', 'rocket_rebalance.remoting', 'rocket_rebalance._proto', "
        "'prometheus_client', 'rocket_rebalance.runtime.prometheus') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_the_top_level_names_the_consumer_api_without_loading_it() -> None:
    code = (
        "import sys, rocket_rebalance;"
        "loaded = sorted(m for m in sys.modules if m.startswith('rocket_rebalance.runtime'));"
        "from rocket_rebalance import PushConsumer, PullConsumer, AsyncPushConsumer, AsyncPullConsumer;"
        "from rocket_rebalance import RebalanceListener, Message;"
        "print(loaded, PushConsumer.__module__, AsyncPullConsumer.__module__, Message.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == [
        "[]",
        "rocket_rebalance.runtime.consumer",
        "rocket_rebalance.runtime.async_consumer",
        "rocket_rebalance.runtime.transport",
    ]


def test_runtime_imports_neither_admin_nor_lab() -> None:
    """What an application embeds loads no operator tool and no process harness."""
    for path in _modules(PACKAGE / "runtime"):
        for name in _imports(path):
            assert not _under(name, ("rocket_rebalance.admin", "rocket_rebalance.lab")), f"{path.name}: {name}"


def test_commands_import_no_core() -> None:
    """The commands drive the runtime and the pure layers; the state machine is the runtime's business."""
    for path in [*_modules(PACKAGE / "commands"), PACKAGE / "cli.py", *_modules(PACKAGE / "pipeline")]:
        for name in _imports(path):
            assert not _under(name, ("rocket_rebalance.core",)), f"{path.relative_to(ROOT)} imports {name}"


def test_only_the_demo_imports_the_lab() -> None:
    """Inside the package and the stub, only ``commands/demo.py`` imports the lab, and only inside functions."""
    allowed = {PACKAGE / "commands" / "demo.py"}
    for path in _modules(PACKAGE) + _modules(STUB) + _modules(ROOT / "tools"):
        if PACKAGE / "lab" in path.parents:
            continue
        names = _imports(path, module_level_only=path in allowed)
        lab = sorted(name for name in names if _under(name, ("rocket_rebalance.lab",)))
        assert not lab, f"{path.relative_to(ROOT)} imports {lab}" + (" at module level" if path in allowed else "")


def _exported(tree: ast.Module) -> list[str]:
    """The names of a module's ``__all__`` (empty without one)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            assert isinstance(node.value, ast.List | ast.Tuple), "__all__ is a literal list"
            return [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _imported_from(tree: ast.Module) -> dict[str, str]:
    """Each name a module binds by importing, with the module it comes from (``import a.b`` binds ``a`` from ``a``;
    ``TYPE_CHECKING`` and function-level imports included: the top ``__init__`` names its lazy API that way)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.update((alias.asname or alias.name, node.module) for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update((alias.asname or alias.name.split(".")[0], alias.name) for alias in node.names)
    return names


def test_no_module_re_exports_another_modules_names() -> None:
    """One name per concept, imported from where it is defined (DESIGN.md rule 6): a module's ``__all__`` lists only
    what it defines, and no import says ``as`` its own name, mypy's mark of a re-export. A package's ``__init__`` may
    present its own subpackage's names (``rocket_rebalance`` is everything's package), never another package's."""
    found = []
    for path in _modules(PACKAGE):
        relative = str(path.relative_to(PACKAGE))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = _imported_from(tree)
        package = _dotted(path) if path.name == "__init__.py" else None
        for name in _exported(tree):
            source = imported.get(name)
            own = package is not None and source is not None and (source + ".").startswith(package + ".")
            if source is not None and not own:
                found.append(f"{relative} re-exports {name} from {source}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                found += [f"{relative} re-exports {a.name} (as itself)" for a in node.names if a.asname == a.name]
    assert not found, "import these from where they are defined instead:\n" + "\n".join(found)


def test_no_import_cycle_between_the_package_modules() -> None:
    graph = _import_graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycle = path[path.index(target) :] + [target]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)


def test_the_cycle_check_sees_a_cycle() -> None:
    """The graph the cycle rule walks has edges for lazy and ``from package import module`` imports alike."""
    graph = _import_graph()
    assert "rocket_rebalance.lab.stub_cluster" in graph["rocket_rebalance.lab.mixed_group"]
    assert "rocket_rebalance.lab.stub_cluster" in graph["rocket_rebalance.commands.demo"]  # inside a function


@pytest.mark.parametrize("argv", [[], ["allocate-mq", "--help"]], ids=["import", "allocate-mq --help"])
def test_the_command_line_loads_no_lab_module(argv: list[str]) -> None:
    code = (
        "import sys\n"
        "from rocket_rebalance.cli import main\n"
        f"try:\n    main({argv!r}) if {bool(argv)!r} else None\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('rocket_rebalance.lab')), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    if argv:
        assert "allocate-mq" in done.stdout  # the help was printed: the command line was really parsed
    assert done.stderr.strip().splitlines()[-1] == "[]"


ENGINE_PARTS = ("brokers", "pulling", "dispatch", "polling", "callbacks", "reports", "service", "settings", "steps")


def test_no_part_of_the_runtime_imports_the_driver() -> None:
    """The engine's parts reach the engine through the service interface (``runtime/service.py``), never by
    importing the driver: only the two engines built on it, the consumers that make them and the metrics
    endpoint that reads one import it."""
    users = {"engine", "async_engine", "consumer", "prometheus"}
    importers = {
        path.stem for path in _modules(PACKAGE / "runtime") if "rocket_rebalance.runtime.driver" in _imports(path)
    }
    assert importers <= users, f"import the service interface instead: {sorted(importers - users)}"
    for part in ENGINE_PARTS:
        assert (PACKAGE / "runtime" / f"{part}.py").exists(), f"runtime/{part}.py is gone: update this rule"


def test_push_dispatch_and_polling_do_not_know_each_other() -> None:
    """A mode is which part exists: push dispatch and polling are two parts, and neither imports the other."""
    runtime = PACKAGE / "runtime"
    assert "rocket_rebalance.runtime.polling" not in _imports(runtime / "dispatch.py")
    assert "rocket_rebalance.runtime.dispatch" not in _imports(runtime / "polling.py")


def _string_named_calls(source: str, where: str) -> list[str]:
    """``Call("name", ...)`` or ``call("name", ...)``: a call to the wire naming the transport's method by a string,
    which neither mypy nor a rename sees."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        callee = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        first = node.args[0]
        named_by_string = isinstance(first, ast.Constant) and isinstance(first.value, str)
        if callee in ("Call", "call") and (named_by_string or isinstance(first, ast.JoinedStr)):
            found.append(f"{where}:{node.lineno}")
    return found


def test_calls_to_the_wire_name_the_transports_method() -> None:
    """``yield from call(Transport.lock, ...)``, never ``Call("lock", ...)``."""
    found = [
        where
        for path in _modules(PACKAGE)
        for where in _string_named_calls(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert not found, f"name the transport's method itself: {found}"


def test_the_string_call_check_sees_one() -> None:
    sample = 'def steps():\n    yield Call("update_offsets", ())\n    yield from call(f"{x}", 1)\n'
    assert _string_named_calls(sample, "sample") == ["sample:2", "sample:3"]
