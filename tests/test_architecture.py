"""The house rules of the layout, read from the source: one owner for each concept."""

import ast
from pathlib import Path

import pytest

WEBAPP = Path(__file__).resolve().parent.parent / "webapp"


def _module_name(path: Path) -> str:
    parts = path.relative_to(WEBAPP.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in WEBAPP.rglob("*.py")}


def _from_base(node: ast.ImportFrom, name: str, path: Path) -> str:
    """Return the absolute module a `from … import` in module name (at path) reads from."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    base = node.module or ""
    if node.level:
        anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join(anchor + ([base] if base else []))
    return base


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Return the webapp modules path imports, at any depth (function-level imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(node, name, path)
            # `from pkg import mod` imports pkg.mod when that is a module
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Return every module start imports, directly or through others."""
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph[node])
    return seen


def _import_graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _sources_containing(needle: str) -> list[str]:
    return sorted(name for name, path in _modules().items() if needle in path.read_text())


def test_no_module_imports_one_that_imports_it_back():
    graph = _import_graph()
    assert len(graph) > 50  # the walk found the package
    assert sorted(name for name in graph if name in _reachable(graph, name)) == []


def test_the_dialect_is_tested_in_the_database_module_only():
    assert _sources_containing("dialect.name") == ["webapp.db"]
    # config rewrites DATABASE_URL before any engine exists; everyone else asks webapp.db
    for prefix in ('startswith("sqlite', 'startswith("postgres'):
        assert set(_sources_containing(prefix)) <= {"webapp.db", "webapp.config"}, prefix


def test_views_build_no_sql():
    offenders = [name for name in _sources_containing("import sqlalchemy")
                 if name.startswith("webapp.views")]
    assert offenders == []


def test_only_the_scheduling_package_starts_threads_or_sleeps():
    # a lock (the lock session's wait flag) is not a thread: only starting one is named
    for needle in ("threading.Thread", "threading.Timer", "from threading import",
                   "time.sleep"):
        outside = [n for n in _sources_containing(needle)
                   if not n.startswith("webapp.scheduling")]
        assert outside == [], needle


# Only config.py reads the environment (or sets it, for the libraries that read it there):
# each variable has one home for its default and its rule, and docs/configuration.md is
# checked against that one module (tests/test_docs.py).
ENVIRONMENT_HOME = "webapp.config"
ENVIRONMENT_NAMES = ("environ", "environb", "getenv", "getenvb", "putenv", "unsetenv")


def _touches_environment(node: ast.AST) -> bool:
    """Tell whether node is os.environ, os.getenv and the like, or imports one from os."""
    if isinstance(node, ast.Attribute):
        return node.attr in ENVIRONMENT_NAMES and (
            isinstance(node.value, ast.Name) and node.value.id == "os")
    return isinstance(node, ast.ImportFrom) and node.module == "os" and any(
        alias.name in ENVIRONMENT_NAMES for alias in node.names)


def _environment_uses(path: Path) -> list[int]:
    """Return the lines where path touches the environment."""
    return [node.lineno for node in ast.walk(ast.parse(path.read_text()))
            if _touches_environment(node)]


def test_only_the_config_module_reads_the_environment():
    modules = _modules()
    assert _environment_uses(modules[ENVIRONMENT_HOME])  # the walk sees a read
    outside = [f"{name}:{line}" for name, path in sorted(modules.items())
               if name != ENVIRONMENT_HOME for line in _environment_uses(path)]
    assert outside == [], "read the variable in webapp/config.py (load_config or a reader)"


def test_plugins_never_import_the_scheduler():
    graph = _import_graph()
    upward = {name: sorted(t for t in targets if t.startswith("webapp.scheduling"))
              for name, targets in graph.items() if name.startswith("webapp.plugins")}
    assert {name: found for name, found in upward.items() if found} == {}


def _package(module: str) -> str:
    """Return the concept a module belongs to: webapp.<package>, or the top module itself."""
    return ".".join(module.split(".")[:2])


def _package_graph() -> dict[str, set[str]]:
    """Return which packages import which (the app factory, webapp itself, left out)."""
    graph: dict[str, set[str]] = {}
    for name, targets in _import_graph().items():
        if name == "webapp":
            continue
        mine = graph.setdefault(_package(name), set())
        mine.update(_package(t) for t in targets if t != "webapp" and _package(t) != _package(name))
    return graph


def test_no_package_imports_one_that_imports_it_back():
    graph = _package_graph()
    assert {"webapp.accounts", "webapp.site", "webapp.ops", "webapp.posts"} <= set(graph)
    cycles = {name: sorted(t for t in graph[name] if name in _reachable(graph, t))
              for name in graph if name in _reachable(graph, name)}
    assert cycles == {}


@pytest.mark.parametrize("package", ["accounts", "site", "ops", "leadership", "posts",
                                     "plugins", "timers", "scheduling", "media"])
def test_each_package_says_what_it_owns_and_what_it_may_import(package):
    doc = ast.get_docstring(ast.parse((WEBAPP / package / "__init__.py").read_text())) or ""
    assert "import" in doc, f"webapp/{package}/__init__.py does not say what it may import"


def test_ops_and_leadership_build_on_no_domain_package():
    graph = _package_graph()
    domains = {"webapp.accounts", "webapp.site", "webapp.posts", "webapp.plugins",
               "webapp.timers", "webapp.scheduling", "webapp.views"}
    assert graph["webapp.ops"] & domains == set()
    assert graph["webapp.leadership"] & (domains | {"webapp.ops"}) == set()


# imported where they are used, never at a module's top: every gunicorn master imports all
# of webapp before it forks (gunicorn_conf), and these are a fifth of that import's CPU
USED_RARELY = ("flask_migrate", "alembic", "webauthn")


def test_migration_and_passkey_libraries_are_imported_only_where_used():
    offenders = []
    for name, path in _modules().items():
        for node in ast.parse(path.read_text()).body:  # the module's top level only
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                targets = [node.module or ""]
            else:
                continue
            offenders += [f"{name}: {t}" for t in targets if t.split(".")[0] in USED_RARELY]
    assert offenders == []


def test_the_test_modules_run_first_exist():
    from tests.harness.plugin import RUN_FIRST

    tests = Path(__file__).resolve().parent
    assert [name for name in RUN_FIRST if not (tests / f"{name}.py").exists()] == []


ROUTE_DECORATORS = {"route", "get", "post", "put", "patch", "delete"}


def _declares_routes(path: Path) -> bool:
    """Return whether a module adds routes to a blueprint (@bp.get, @bp.route, add_url_rule)."""
    for node in ast.walk(ast.parse(path.read_text())):
        calls = node.decorator_list if isinstance(node, ast.FunctionDef) else [node]
        for call in calls:
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and (
                    call.func.attr == "add_url_rule"
                    or node is not call and call.func.attr in ROUTE_DECORATORS):
                return True
    return False


def test_no_view_imports_another_view():
    # a view (a module with routes) shares with others through modules without routes:
    # views/errors.py, views/editor.py (the post editor's page), the API's helpers
    modules = _modules()
    views = {n for n, path in modules.items()
             if n.startswith("webapp.views") and _declares_routes(path)}
    assert {"webapp.views.posts", "webapp.views.api.posts", "webapp.views.revisions"} <= views
    known = set(modules)
    found = {name: sorted(_imports(name, modules[name], known) & views) for name in views}
    assert {name: other for name, other in found.items() if other} == {}


def test_no_module_imports_a_private_name_from_another():
    # what a module lends, it names without a leading underscore (and its package exports)
    found = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and _from_base(node, name, path).startswith(
                    "webapp"):
                found += [f"{name}: {alias.name}" for alias in node.names
                          if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert found == []
