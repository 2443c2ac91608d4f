"""Generates the Python modules of seam's wire API (seam/v1/*_pb2.py and
*_pb2_grpc.py) from proto/seam/v1/*.proto. Used by setup.py at install time
and by the ctest test; the generated modules are never committed.

Generator, first found wins:
  1. protoc (Debian protobuf-compiler) with grpc_python_plugin (Debian
     protobuf-compiler-grpc): the same versions as Debian's python3-protobuf
     and python3-grpcio, and already build dependencies of the C++ code.
  2. python3 -m grpc_tools.protoc (Debian python3-grpc-tools): its bundled
     protoc is older (grpcio-tools 1.14) but its output still loads.

Usage: python3 generate_stubs.py [--proto-dir DIR] OUT_DIR
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The repository's proto/ directory, seen from clients/python.
DEFAULT_PROTO_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "proto"))


class GenerationError(RuntimeError):
    pass


def _generator_command(proto_dir, out_dir):
    protoc = shutil.which("protoc")
    plugin = shutil.which("grpc_python_plugin")
    if protoc and plugin:
        return [protoc, "-I" + proto_dir, "--python_out=" + out_dir, "--grpc_out=" + out_dir,
                "--plugin=protoc-gen-grpc=" + plugin]
    try:
        import grpc_tools.protoc  # noqa: F401
    except ImportError:
        raise GenerationError(
            "no Python gRPC generator: install Debian's protobuf-compiler and protobuf-compiler-grpc "
            "(protoc, grpc_python_plugin) or python3-grpc-tools (scripts/install-deps.sh does)") from None
    return [sys.executable, "-m", "grpc_tools.protoc", "-I" + proto_dir, "--python_out=" + out_dir,
            "--grpc_python_out=" + out_dir]


def generate(out_dir, proto_dir=None):
    """Writes out_dir/seam/v1/{*_pb2.py, *_pb2_grpc.py, __init__.py}; returns
    the generated package directory. Raises GenerationError."""
    proto_dir = proto_dir or os.environ.get("SEAM_PROTO_DIR") or DEFAULT_PROTO_DIR
    protos = sorted(glob.glob(os.path.join(proto_dir, "seam", "v1", "*.proto")))
    if not protos:
        raise GenerationError(
            "no seam/v1/*.proto under %s: install from a checkout of the repository "
            "(or set SEAM_PROTO_DIR to its proto/ directory)" % proto_dir)
    os.makedirs(out_dir, exist_ok=True)
    command = _generator_command(proto_dir, out_dir) + protos
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        raise GenerationError("%s failed (exit %d):\n%s" % (command[0], done.returncode, done.stdout))
    package = os.path.join(out_dir, "seam", "v1")
    open(os.path.join(package, "__init__.py"), "a").close()
    return package


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--proto-dir", default=None)
    parser.add_argument("out_dir")
    args = parser.parse_args()
    try:
        print(generate(args.out_dir, args.proto_dir))
    except GenerationError as e:
        sys.exit("generate_stubs: %s" % e)


if __name__ == "__main__":
    main()
