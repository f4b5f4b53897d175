"""Installable package for sparsetir: a staged sparse-tensor compiler on the stock Apache TVM wheel.

The C sources under ``src/`` (the libcuda stand-in that lets CUDA kernels compile on machines
without a driver) are shipped inside the package as ``sparsetir/native/``, so a plain
``pip install .`` or a wheel from ``python -m build`` has them; the library is compiled on first
use (see ``sparsetir.backend.target``). The kernels ``make prebuilt`` compiled into
``python/sparsetir/prebuilt/`` (``sparsetir.prebuild``; absent in a plain checkout) are
package data: ``make package-test`` makes them before it builds the wheel.
"""
import re
import shutil
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPyWithNativeSources(build_py):
    """``build_py`` that also copies ``src/**/*.c`` into ``sparsetir/native/``."""

    def run(self):
        super().run()
        target = Path(self.build_lib) / "sparsetir" / "native"
        target.mkdir(parents=True, exist_ok=True)
        for source in sorted((ROOT / "src").rglob("*.c")):
            shutil.copy2(source, target / source.name)


setup(
    name="sparsetir",
    version=re.search(r'__version__ = "(.+)"',
                      (ROOT / "python/sparsetir/__init__.py").read_text()).group(1),
    description="Sparse tensor compiler (SparseTIR's three stages) on unmodified Apache TVM",
    package_dir={"": "python"},
    packages=find_packages("python"),
    package_data={"sparsetir": ["data/*.npz", "data/*.json", "data/README.md",
                                "prebuilt/manifest.json", "prebuilt/files/*"]},
    cmdclass={"build_py": BuildPyWithNativeSources},
    python_requires=">=3.10",
    install_requires=[
        "apache-tvm==0.27.0.post1",
        "apache-tvm-ffi==0.1.14.post1",
        "numpy",
        "scipy",
    ],
    extras_require={
        "torch": ["torch==2.13.0"],
        "bench": ["torch==2.13.0", "dgl==1.1.3", "packaging"],
        "test": ["pytest", "pytest-xdist", "torch==2.13.0"],
    },
)
