"""The package's shape: imports between its parts run one way, and nothing outside models/
reaches into a model's layers (everything goes through models/interface.py), and no function
runs over 80 lines."""

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "attnkit"


def _part(module: list[str]) -> str:
    """The top-level part of the package a module belongs to (``models``, ``cli``, ...)."""
    return module[0]


def package_imports() -> dict[str, set[str]]:
    """part -> the other parts it imports (at module level or inside functions)."""
    edges: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).with_suffix("")
        parts = list(rel.parts)
        package = parts[:-1]  # a module's package; an __init__'s is its own folder
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package[: len(package) - (node.level - 1)]
                target = base + (node.module.split(".") if node.module else [])
                names = [target[0]] if target else [a.name for a in node.names]
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                if not module or not module.startswith("attnkit."):
                    continue
                names = [module.split(".")[1]]
            else:
                continue
            for name in names:
                if name != _part(parts):
                    edges.setdefault(_part(parts), set()).add(name)
    return edges


def test_imports_between_parts_run_one_way():
    edges = package_imports()

    def reaches(a: str, b: str, seen: set[str]) -> bool:
        return any(n == b or (n not in seen and (seen.add(n) or reaches(n, b, seen))) for n in edges.get(a, ()))

    cycles = sorted((a, b) for a in edges for b in edges[a] if reaches(b, a, set()))
    assert cycles == [], f"parts that import each other (directly or through others): {cycles}"
    # the library never imports the command line, the demo or the figures' consumers upwards
    for low in ("attention", "positions", "models", "data", "search", "config", "errors", "atomic", "loading"):
        assert not edges.get(low, set()) & {
            "cli",
            "demos",
            "inference",
            "inspection",
            "viewer",
            "plots",
            "training",
            "server",
            "attribution",
        }, low
    assert not edges.get("plots", set()) & {"inspection", "attribution"}  # plots take arrays


def test_the_modules_of_models_import_each_other_one_way():
    """Within models/, no two modules import each other, type hints included: a captioner's
    encoders stand in for a translator's through the protocols of models/interface.py."""
    edges: dict[str, set[str]] = {}
    for path in (PACKAGE / "models").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                edges.setdefault(path.stem, set()).add(node.module.split(".")[0])

    def reaches(a: str, b: str, seen: set[str]) -> bool:
        return any(n == b or (n not in seen and (seen.add(n) or reaches(n, b, seen))) for n in edges.get(a, ()))

    assert edges["image"] >= {"rnn", "transformer"}  # the captioners are built on both
    cycles = sorted((a, b) for a in edges for b in edges[a] if reaches(b, a, set()))
    assert cycles == [], f"modules of models/ that import each other: {cycles}"


# a model's own submodules, or an attention module's parameters, reached from outside
PRIVATE = re.compile(
    r"\bmodel\.(decoder_layers|encoder|decoder_norm|src_embed|tgt_embed|embed|output|attention|rnn)\b"
    r"|\.(in_proj_weight|in_proj_bias|self_attn|cross_attn)\b|hasattr\(model"
)


def test_only_models_touch_a_models_layers():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in ("models", "attention"):
            continue
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = re.sub(r"\"[^\"]*\"|'[^']*'", '""', line.split("#")[0])  # names inside strings are not access
            if PRIVATE.search(code):
                offenders.append(f"{rel}:{i}: {line.strip()}")
    assert offenders == []


def test_no_function_runs_over_eighty_lines():
    """A function reads on one screen: none in the package is longer than 80 lines (its docstring included)."""
    long = [
        f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > 80
    ]
    assert not long, long
