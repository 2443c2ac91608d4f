"""Installs the seam Python client. The wire modules (seam/v1/*_pb2*.py) are
generated from the repository's proto/ at build time (generate_stubs.py), so
install from a checkout:

    python3 -m pip install --no-deps --no-build-isolation clients/python

Metadata is in pyproject.toml; this file only adds the generation step.
"""
import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generate_stubs  # noqa: E402


class BuildPyWithStubs(build_py):
    def run(self):
        super().run()
        try:
            generate_stubs.generate(self.build_lib)
        except generate_stubs.GenerationError as e:
            raise SystemExit("seam-client: %s" % e)


setup(cmdclass={"build_py": BuildPyWithStubs})
