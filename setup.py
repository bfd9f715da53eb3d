"""The package layout, which pyproject.toml cannot express: ``rlmem.agents`` lives in the
top-level ``agents/`` folder and ``rlmem.envs`` in ``envs/``; every subpackage under each is
found, so a new one is installed (and in a built wheel) without being listed anywhere."""

from setuptools import find_packages, setup

PACKAGE_DIR = {"rlmem": "rlmem", "rlmem.agents": "agents", "rlmem.envs": "envs"}
"""Each top-level package of the distribution and the folder it lives in."""

setup(
    package_dir=PACKAGE_DIR,
    packages=sorted({*PACKAGE_DIR, *(f"{package}.{sub}" for package, folder in PACKAGE_DIR.items()
                                     for sub in find_packages(folder))}),
)
