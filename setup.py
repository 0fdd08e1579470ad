"""The build's one addition to pyproject.toml: the files the explorer reads beside its code in a checkout
(app.py, lessons/, .streamlit/config.toml, the page icon app.py finds beside it) travel in the wheel as viz_explorer/_root/, where
viz_explorer/launch.py finds them once installed. A checkout (and `pip install -e .`) reads the originals."""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
BESIDE = ("app.py", "lessons", ".streamlit/config.toml", "viz_explorer/icon.png")   # the checkout's layout, kept


class BuildPy(build_py):
    def run(self):
        if not self.editable_mode:         # a module deleted since the last build must not ship from build/lib
            for package in ("viz_transformer", "viz_explorer"):
                shutil.rmtree(Path(self.build_lib) / package, ignore_errors=True)
        super().run()
        if self.editable_mode:             # an editable install reads the checkout itself
            return
        root = Path(self.build_lib) / "viz_explorer" / "_root"
        for name in BESIDE:
            src, dst = HERE / name, root / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(src, dst)


setup(cmdclass={"build_py": BuildPy})
