"""The handbook cannot go stale: its links, variables, commands and API routes are checked.

README.md and docs/*.md are read as GitHub shows them: links and anchors must resolve,
the configuration page's table must name every variable the code reads (and no other),
the commands shown must exist, and every API route must be on the API page. A dotted
webapp name in a page, pyproject.toml or a source file's docstring must name a module or
an attribute that is there. No database: the app is built on a throwaway SQLite file
only to list its commands and routes.
"""

import ast
import importlib
import re
from pathlib import Path
from types import ModuleType

import click
import pytest
from flask.cli import FlaskGroup

from webapp import create_app

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CONFIGURATION = ROOT / "docs" / "configuration.md"
API = ROOT / "docs" / "api.md"
PYPROJECT = ROOT / "pyproject.toml"
CONFIG_SOURCES = [ROOT / "webapp" / "config.py", ROOT / "webapp" / "gunicorn_conf.py"]

# Documented in the configuration table, but read outside config.py and gunicorn_conf.py.
READ_ELSEWHERE = {
    "SOLOIST_INSTANCE_PATH": "webapp/__init__.py",  # create_app's instance folder
}

FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)=\"([^\"]+)\"", re.IGNORECASE)
HTML_ID = re.compile(r"<a\b[^>]*?\b(?:id|name)=\"([^\"]+)\"", re.IGNORECASE)
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def split_fences(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, str, list[str]]]]:
    """Return the lines outside fenced blocks, and each block as (line, info string, body)."""
    prose, blocks, block = [], [], None
    for number, line in enumerate(text.splitlines(), 1):
        fence = FENCE.match(line.strip())
        if block is None and fence:
            block = (number, fence.group(2).strip(), [], fence.group(1))
        elif block is not None and fence and fence.group(1).startswith(block[3]) and (
                not fence.group(2).strip()):
            blocks.append(block[:3])
            block = None
        elif block is not None:
            block[2].append(line)
        else:
            prose.append((number, line))
    assert block is None, f"a fenced block opened on line {block[0]} is never closed"
    return prose, blocks


def slug(heading: str) -> str:
    """Return GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link reads as its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Return every anchor of a page: its headings' slugs (-1, -2 on repeats) and <a id>s."""
    prose, _ = split_fences(path.read_text())
    found, seen = set(), {}
    for _, line in prose:
        found.update(HTML_ID.findall(line))
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            found.add(base if count == 0 else f"{base}-{count}")
            seen[base] = count + 1
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """Return (line, target) of every link and image outside code."""
    prose, _ = split_fences(path.read_text())
    found = []
    for number, line in prose:
        line = CODE_SPAN.sub("", line)
        found += [(number, target) for target in LINK.findall(line) + HTML_LINK.findall(line)]
    return found


def code_spans(path: Path) -> list[str]:
    """Return the text of every inline code span outside fenced blocks."""
    prose, _ = split_fences(path.read_text())
    return [span for _, line in prose for _, span in CODE_SPAN.findall(line)]


def shell_lines(path: Path) -> list[str]:
    """Return every line of the page's sh blocks, without comments."""
    _, blocks = split_fences(path.read_text())
    return [line.split(" #")[0].strip() for _, info, body in blocks if info == "sh"
            for line in body if not line.strip().startswith("#")]


def test_the_handbook_pages_exist():
    assert len(DOCS) > 10, "README.md and the docs/ handbook pages"
    assert CONFIGURATION in DOCS and API in DOCS


@pytest.mark.parametrize("page", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    broken = []
    for number, target in links(page):
        if SCHEME.match(target):
            continue  # http(s), mailto: outside the repository
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"line {number}: {target} (no file {file.relative_to(ROOT)})")
        elif anchor and (file.suffix != ".md" or anchor not in anchors(file)):
            broken.append(f"line {number}: {target} (no heading #{anchor} there)")
    assert not broken, f"{page.name}: " + "; ".join(broken)


SOURCE_PATH = re.compile(r"\b((?:webapp|tests|bench|docs|migrations|templates|static)/[\w./-]*\w)")


@pytest.mark.parametrize("page", [*DOCS, PYPROJECT], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_in_the_code_the_docs_name_exists(page):
    # a module moved into a package leaves no page pointing at where it was
    named = {m for line in page.read_text().splitlines() for m in SOURCE_PATH.findall(line)}
    missing = sorted(n for n in named if "*" not in n and not (ROOT / n).exists())
    assert not missing, f"{page.name} names files that do not exist: {missing}"


@pytest.mark.parametrize("page", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_fenced_block_names_its_language(page):
    _, blocks = split_fences(page.read_text())
    unnamed = [number for number, info, _ in blocks if not info]
    assert not unnamed, f"{page.name}: fenced blocks without a language on lines {unnamed}"


def test_slugs_follow_githubs_rules():
    assert slug("Locally, as on the platform") == "locally-as-on-the-platform"
    assert slug("`GET /metrics` — the gauges") == "get-metrics--the-gauges"
    assert slug("What survives what") == "what-survives-what"
    assert slug("SESSION_IDLE_HOURS and [sessions](accounts.md)") == (
        "session_idle_hours-and-sessions")


# Configuration: the variables the code reads, and the table that documents them.

ENV_HELPERS = {"env_bool", "env_int", "env_float"}


def is_environment(node: ast.expr) -> bool:
    """Tell whether node is the environment mapping: `env`, or `os.environ`."""
    return (isinstance(node, ast.Name) and node.id == "env") or (
        isinstance(node, ast.Attribute) and node.attr == "environ")


def constant(node: ast.expr | None):
    """Return the value of a literal, or of arithmetic on literals (24.0 * 7); else None."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Add):
        left, right = constant(node.left), constant(node.right)
        if isinstance(left, int | float) and isinstance(right, int | float):
            return left * right if isinstance(node.op, ast.Mult) else left + right
    return None


def string_tuple(node: ast.expr, names: dict[str, list[str]]) -> list[str]:
    """Return the strings of a tuple literal, or of a module constant naming one."""
    if isinstance(node, ast.Name):
        return names.get(node.id, [])
    if isinstance(node, ast.Tuple | ast.List):
        return [e.value for e in node.elts if isinstance(e, ast.Constant)
                and isinstance(e.value, str)]
    return []


def looked_up_by(loop: ast.For) -> bool:
    """Tell whether a for loop's variable is used as a key into the environment."""
    if not isinstance(loop.target, ast.Name):
        return False
    var = loop.target.id
    for node in ast.walk(loop):
        key = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                node.func.attr == "get" and is_environment(node.func.value) and node.args):
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and is_environment(node.value):
            key = node.slice
        if isinstance(key, ast.Name) and key.id == var:
            return True
    return False


def read_variables(source: str) -> dict[str, object]:
    """Return every environment variable a module reads, with its default when literal."""
    tree = ast.parse(source)
    tuples = {t.id: string_tuple(node.value, {}) for node in tree.body
              if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}
    found: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
                node.func.id in ENV_HELPERS) and len(node.args) >= 2:
            name, default = constant(node.args[1]), constant(
                node.args[2] if len(node.args) > 2 else None)
            if isinstance(name, str):
                found[name] = default
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                node.func.attr == "get" and is_environment(node.func.value) and node.args):
            if isinstance(constant(node.args[0]), str):
                found.setdefault(constant(node.args[0]), None)
        elif isinstance(node, ast.Subscript) and is_environment(node.value) and (
                isinstance(node.ctx, ast.Load) and isinstance(constant(node.slice), str)):
            found.setdefault(constant(node.slice), None)
        elif isinstance(node, ast.For) and looked_up_by(node):
            for name in string_tuple(node.iter, tuples):
                found.setdefault(name, None)
    return found


def code_variables() -> dict[str, object]:
    """Return the variables config.py and gunicorn_conf.py read, with literal defaults."""
    found: dict[str, object] = {}
    for path in CONFIG_SOURCES:
        for name, default in read_variables(path.read_text()).items():
            if found.get(name) is None:
                found[name] = default
    return found


def table_cells(line: str) -> list[str]:
    """Split a Markdown table row into its cells (an escaped \\| stays in its cell)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def documented_variables() -> dict[str, str]:
    """Return each variable of the configuration page's table with its default cell."""
    prose, _ = split_fences(CONFIGURATION.read_text())
    rows, in_table = {}, False
    for _, line in prose:
        cells = table_cells(line) if line.startswith("|") else []
        if cells[:2] == ["variable", "default"]:
            in_table = True
        elif not cells:
            in_table = False if rows else in_table
        elif in_table and not set(cells[0]) <= set("-: "):
            names = re.findall(r"`([A-Z][A-Z0-9_]*)`", cells[0])
            defaults = cells[1].split(" / ")
            if len(defaults) != len(names):
                defaults = [cells[1]] * len(names)
            rows.update(zip(names, defaults, strict=True))
    return rows


def as_documented(value: object) -> str:
    """Write a default as the table does: true/false, 10 rather than 10.0."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def test_the_config_parser_finds_the_variables_the_code_reads():
    found = code_variables()
    for name in ("DATABASE_URL", "SECRET_KEY", "LEADER_STALE_SECONDS", "PORT",
                 "WEB_CONCURRENCY", "DYNO", "RENDER_INSTANCE_ID", "SOURCE_VERSION",
                 "FLY_IMAGE_REF", "PROMETHEUS_MULTIPROC_DIR"):
        assert name in found, f"the parser of webapp/config.py misses {name}"
    assert found["SESSION_IDLE_HOURS"] == 8 and found["SCHEDULER_ENABLED"] is True
    assert "postgres://" not in found, "a for loop over URL prefixes is no variable"
    assert len(found) > 40


def test_the_configuration_table_documents_every_variable_the_code_reads():
    table = documented_variables()
    missing = sorted(set(code_variables()) - set(table))
    assert not missing, (f"{CONFIGURATION.name} does not document "
                         f"{', '.join(missing)} (read in webapp/config.py or gunicorn_conf.py)")


def test_the_configuration_table_gives_each_variable_its_default():
    table, wrong = documented_variables(), []
    for name, default in code_variables().items():
        cell = table.get(name)
        if cell is None:
            continue  # undocumented: the test above names it
        if not cell.strip():
            wrong.append(f"{name}: no default")
        elif default not in (None, "") and f"`{as_documented(default)}`" not in cell:
            wrong.append(f"{name}: the code's default is {as_documented(default)}, not {cell}")
    assert not wrong, f"{CONFIGURATION.name}: " + "; ".join(wrong)


def test_the_configuration_table_documents_no_variable_the_code_does_not_read():
    extra = sorted(set(documented_variables()) - set(code_variables()) - set(READ_ELSEWHERE))
    assert not extra, f"{CONFIGURATION.name} documents {', '.join(extra)}, which nothing reads"


@pytest.mark.parametrize("name", sorted(READ_ELSEWHERE))
def test_variables_read_elsewhere_are_read_where_the_allowance_says(name):
    assert f'"{name}"' in (ROOT / READ_ELSEWHERE[name]).read_text()


# Commands and routes: taken from the app itself.

@pytest.fixture(scope="module")
def soloist(tmp_path_factory):
    """Return the app on a throwaway SQLite file it never opens."""
    path = tmp_path_factory.mktemp("docs") / "docs.db"
    return create_app({"TESTING": True, "SECRET_KEY": "x",
                       "SQLALCHEMY_DATABASE_URI": f"sqlite:///{path}"})


@pytest.fixture(scope="module")
def commands(soloist) -> dict[str, set[str]]:
    """Return each `flask --app webapp` command, with a group's subcommands."""
    groups = [soloist.cli, FlaskGroup(add_version_option=False)]  # run, shell, routes
    found: dict[str, set[str]] = {}
    for group in groups:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            sub = command.list_commands(click.Context(command, parent=ctx)) if isinstance(
                command, click.Group) else []
            found.setdefault(name, set()).update(sub)
    return found


FLASK_COMMAND = re.compile(r"flask --app webapp ([\w-]+)(?: ([\w-]+))?")


def test_every_flask_command_the_docs_show_exists(commands):
    unknown = []
    for page in DOCS:
        for command, sub in FLASK_COMMAND.findall(page.read_text()):
            if command not in commands:
                unknown.append(f"{page.name}: flask --app webapp {command}")
            elif commands[command] and sub not in commands[command]:
                unknown.append(f"{page.name}: flask --app webapp {command} {sub}")
    assert "release" in commands and "upgrade" in commands["db"] and "run" in commands
    assert not unknown, "no such command: " + "; ".join(sorted(set(unknown)))


def test_every_command_of_the_app_is_on_the_api_page(commands, soloist):
    page = API.read_text()
    absent = [name for name in soloist.cli.list_commands(click.Context(soloist.cli))
              if f"flask --app webapp {name}" not in page]
    assert not absent, f"{API.name} does not show: {', '.join(absent)}"


def make_targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", makefile, re.MULTILINE))


def test_every_make_target_the_docs_show_exists():
    targets, unknown = make_targets(), []
    assert {"run", "test"} <= targets
    for page in DOCS:
        shown = [line for line in shell_lines(page) if line.startswith("make ")]
        shown += [span for span in code_spans(page) if span.startswith("make ")]
        unknown += [f"{page.name}: {line}" for line in shown
                    if not set(line.split()[1:]) <= targets]
    assert not unknown, "no such make target: " + "; ".join(unknown)


def documented_path(rule: str) -> str:
    """Write a Flask rule as the API page does: <int:post_id> becomes <id>."""
    return re.sub(r"<(?:[\w]+(?:\([^)]*\))?:)?\w+>", "<id>", rule)


@pytest.fixture(scope="module")
def api_routes(soloist) -> set[str]:
    """Return every API route as METHOD /api/path in the API page's form."""
    return {f"{method} {documented_path(rule.rule)}" for rule in soloist.url_map.iter_rules()
            if rule.rule.startswith("/api/")
            for method in sorted(rule.methods - {"HEAD", "OPTIONS"})}


def test_every_api_route_is_on_the_api_page(api_routes):
    page = API.read_text()
    absent = sorted(r for r in api_routes if not re.search(rf"`{re.escape(r)}[`?\s]", page))
    assert not absent, f"{API.name} does not document: {', '.join(absent)}"


def test_every_api_route_the_docs_name_exists(api_routes):
    named = re.compile(r"\b(GET|POST|PUT|PATCH|DELETE) (/api/[^\s`?)\]]*)")
    unknown = [f"{page.name}: {method} {path}" for page in DOCS
               for method, path in named.findall(page.read_text())
               if f"{method} {path}" not in api_routes]
    assert not unknown, "no such API route: " + "; ".join(sorted(set(unknown)))


# Dotted names: a docstring, comment or page that names webapp.x.y names something there.

DOTTED = re.compile(r"(?<![\w./-])webapp(?:\.[A-Za-z_]\w*)+")
NAMING = [*DOCS, PYPROJECT, *sorted(p for folder in ("webapp", "tests", "bench")
                                    for p in (ROOT / folder).rglob("*.py"))]
NAMING.remove(Path(__file__).resolve())  # its examples name what is not there on purpose


def resolves(dotted: str) -> bool:
    """Return whether webapp.x.y names a module of webapp or an attribute of one."""
    found: object = importlib.import_module("webapp")
    for part in dotted.split(".")[1:]:
        if hasattr(found, part):
            found = getattr(found, part)
        elif isinstance(found, ModuleType) and hasattr(found, "__path__"):  # a package
            try:
                found = importlib.import_module(f"{found.__name__}.{part}")
            except ModuleNotFoundError:
                return False
        else:
            return False
    return True


def test_the_dotted_name_check_tells_a_moved_module_from_a_present_one():
    assert resolves("webapp.site.state.bump") and resolves("webapp.ops.alerts")
    assert resolves("webapp.plugins.RunContext.time_left")
    assert not resolves("webapp.alerts") and not resolves("webapp.site.state.nothing")


def test_every_dotted_webapp_name_in_the_code_and_the_docs_exists():
    # a module moved into a package leaves no docstring pointing at where it was
    stale = [f"{path.relative_to(ROOT)}:{number}: {name}" for path in NAMING
             for number, line in enumerate(path.read_text().splitlines(), 1)
             for name in DOTTED.findall(line) if not resolves(name)]
    assert not stale, "names that do not exist: " + "; ".join(stale)
