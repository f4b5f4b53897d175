"""Installable package for sparsetir: a staged sparse-tensor compiler on the stock Apache TVM wheel."""
from setuptools import find_packages, setup

setup(
    name="sparsetir",
    version="0.1.0",
    description="Sparse tensor compiler (SparseTIR's three stages) on unmodified Apache TVM",
    package_dir={"": "python"},
    packages=find_packages("python"),
    package_data={"sparsetir": ["data/*.npz", "data/*.json", "data/README.md", "runtime/*.c"]},
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
