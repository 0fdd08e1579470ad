"""The command `viz-transformer` (pyproject.toml): `viz-transformer app` starts the explorer from any folder;
`viz-transformer texts` shows or empties the texts stored behind shared links (viz_explorer/server/texts_cli.py);
every other command is the library's CLI (`python -m viz_transformer ...`, viz_transformer/cli.py).

The explorer reads files that live beside its code in a checkout: app.py, lessons/ and the Streamlit settings
in .streamlit/config.toml (which Streamlit reads from the working folder only, so they go in as flags). A wheel
carries copies of them in viz_explorer/_root/ (setup.py); a checkout or an editable install reads the originals.
Checkpoints are not in the wheel (89 MB that change with every training run): an installed explorer needs
--checkpoints or VIZ_CHECKPOINTS; a checkout uses its checkpoints/ folder as before.
"""
from __future__ import annotations

import argparse
import os
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHIPPED = HERE / "_root"                # what setup.py copies into a wheel
CHECKOUT = HERE.parent                  # the repository, when running from one
USAGE = "viz-transformer app [--checkpoints DIR ...] [streamlit flags, e.g. --server.port 8502]"
TEXTS_USAGE = "viz-transformer texts [--purge [--older-than DAYS]]"


def root() -> Path:
    """The folder holding app.py, lessons/ and .streamlit/: the wheel's copies, else the checkout."""
    return SHIPPED if (SHIPPED / "app.py").is_file() else CHECKOUT


def installed() -> bool:
    """True when running from a wheel (no checkout, and no checkpoints/ folder beside the code)."""
    return root() == SHIPPED


def settings_flags(config: Path) -> list[str]:
    """A Streamlit config.toml as `streamlit run` flags: [server] maxUploadSize = 1 -> --server.maxUploadSize=1."""
    if not config.is_file():
        return []
    flags = []
    for section, values in tomllib.loads(config.read_text(encoding="utf-8")).items():
        for key, value in values.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            flags.append(f"--{section}.{key}={text}")
    return flags


def app_command(argv: list[str], environ: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The `streamlit run` command line and environment for `viz-transformer app ARGV`. SystemExit(2) for a
    wheel install told of no checkpoints. Flags not ours go to streamlit, after the settings, so they win."""
    p = argparse.ArgumentParser(prog="viz-transformer app", usage=USAGE,
                                description="Start the explorer (Streamlit) from any folder.")
    p.add_argument("--checkpoints", action="extend", nargs="+", metavar="DIR", default=[],
                   help="checkpoint folders' roots, passed as VIZ_CHECKPOINTS (joined with os.pathsep)")
    args, streamlit_flags = p.parse_known_args(argv)
    base = root()
    env = dict(environ)
    if args.checkpoints:
        env["VIZ_CHECKPOINTS"] = os.pathsep.join(str(Path(d).resolve()) for d in args.checkpoints)
    elif installed() and not env.get("VIZ_CHECKPOINTS"):
        p.error("an installed explorer ships no checkpoints: pass --checkpoints DIR (e.g. the checkpoints/ "
                "folder of a clone of the repository) or set VIZ_CHECKPOINTS")
    env.setdefault("VIZ_LESSONS", str(base / "lessons"))
    if installed():        # the database of links and classes: not inside site-packages
        data_home = Path(env.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
        env.setdefault("VIZ_DATA", str(data_home / "viz-transformer"))
    cmd = [sys.executable, "-m", "streamlit", "run", str(base / "app.py"),
           *settings_flags(base / ".streamlit" / "config.toml"), *streamlit_flags]
    return cmd, env


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["app"]:
        cmd, env = app_command(argv[1:], dict(os.environ))
        os.execve(cmd[0], cmd, env)          # the server replaces this process: one pid, signals reach it
    if argv[:1] == ["texts"]:
        from viz_explorer.server import texts_cli
        return texts_cli.main(argv[1:])
    from viz_transformer.cli import main as cli_main
    return cli_main(argv, prog="viz-transformer", epilog=f"and: {USAGE}; {TEXTS_USAGE}")


if __name__ == "__main__":
    sys.exit(main())
