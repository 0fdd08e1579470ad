"""No module reads another module's private names: a name with a leading underscore is its own module's business.

An AST walk over the library and the app finds `from viz_transformer.x import _y` (relative imports too) and
`mod._y` where `mod` is bound to one of this project's modules by an import. What a module shares, it names
without the underscore. Dunders (`__file__`, `__version__`) are public by convention.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("viz_transformer", "viz_explorer")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(dotted: str) -> bool:
    """A module or package of this project (not a name defined inside one)."""
    base = ROOT.joinpath(*dotted.split("."))
    return dotted.split(".")[0] in PACKAGES and (base.with_suffix(".py").is_file() or (base / "__init__.py").is_file())


def _absolute(node: ast.ImportFrom, here: str, is_package: bool) -> str:
    """The module an ImportFrom reads from, relative imports resolved against `here`."""
    if not node.level:
        return node.module or ""
    parts = here.split(".")
    keep = len(parts) - node.level + (1 if is_package else 0)
    return ".".join(parts[:keep] + ([node.module] if node.module else []))


def _dotted(node: ast.AST):
    """'a.b.c' for a chain of attributes on a name, else None."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(names)])
    return None


def private_reads(source: str, here: str, is_package: bool = False, where: str = "") -> list[str]:
    """Every read of another project module's private name in one module's source (module `here`), as
    'where:line: what'."""
    tree = ast.parse(source, filename=where or here)
    found, modules = [], {}                      # local name -> the project module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in PACKAGES:
                    modules[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(node, here, is_package)
            if source.split(".")[0] not in PACKAGES:
                continue
            for a in node.names:
                if _private(a.name) and source != here:
                    found.append(f"{where}:{node.lineno}: from {source} import {a.name}")
                elif _is_module(f"{source}.{a.name}"):
                    modules[a.asname or a.name] = f"{source}.{a.name}"
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _private(node.attr):
            continue
        chain = _dotted(node.value)
        if chain is None:
            continue
        head, _, rest = chain.partition(".")
        if head not in modules:
            continue
        target = ".".join(x for x in (modules[head], rest) if x)
        if _is_module(target) and target != here:
            found.append(f"{where}:{node.lineno}: {chain}.{node.attr}")
    return found


def test_no_module_reads_another_modules_private_names():
    files = sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))
    assert files
    found = [line for f in files for line in private_reads(f.read_text(encoding="utf-8"), _module_name(f),
                                                            f.name == "__init__.py", str(f.relative_to(ROOT)))]
    assert not found, "private names read from another module (make them public or keep them inside):\n" + \
        "\n".join(found)


def test_the_walk_sees_both_kinds_of_read():
    """The checker itself: both forms are caught; a module's own private names, dunders, public names and
    third-party modules are not."""
    src = ("from viz_transformer.core import checkpoint_files as cf\n"
           "from viz_transformer.core.checkpoint_files import _sniff\n"
           "from . import config\n"
           "import viz_transformer.core.hooks as hk\n"
           "import viz_transformer\n"
           "import torch\n"
           "from .checkpoint import _own\n"
           "cf._read_json; config._private; hk.__name__; cf.CheckpointError; torch._C; _own\n"
           "viz_transformer.core.masks._x\n")
    found = private_reads(src, "viz_transformer.core.checkpoint")
    assert [line.split(": ", 1)[1] for line in found] == [
        "from viz_transformer.core.checkpoint_files import _sniff", "cf._read_json", "config._private",
        "viz_transformer.core.masks._x"]
