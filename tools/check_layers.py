#!/usr/bin/env python3
"""Checks that every folder includes only the folders below it.

The layers, lowest first: core -> kernels -> comm -> boundary -> models ->
runtime -> stage_server / coordinator -> cli (weights beside boundary, under
models; proto beside core; tokenizer and security beside the layers that use
them; testing is linked by tests only). For each product source file (tests
and fuzz targets are exempt: they may use test support), every
`#include "seam/<folder>/..."` must name a folder its own folder may use, and
boundary/ and models/ must not include gRPC or UCX. Exits 1 listing every
violation, 0 when there is none.
"""
import os
import re
import sys

# folder -> include roots (`seam/<root>/`) it may use, besides its own.
BASE = {"core"}
ALLOWED = {
    "core": BASE,
    "kernels": BASE | {"kernels"},
    "comm": BASE | {"kernels", "comm"},
    "boundary": BASE | {"kernels", "comm", "boundary"},
    "weights": BASE | {"weights"},
    "tokenizer": BASE | {"tokenizer"},
    "chat_template": BASE | {"chat_template"},
    "models": BASE | {"kernels", "boundary", "weights", "models"},  # no comm: models call their boundary
    "runtime": BASE | {"kernels", "comm", "boundary", "weights", "models", "runtime"},
    "security": BASE | {"security"},
    "http_server": BASE | {"security", "http_server"},
    "metrics": BASE | {"security", "http_server", "metrics"},
    "stage_server/handoff": BASE | {"v1", "handoff"},
    "stage_server/server": BASE | {"kernels", "comm", "boundary", "weights", "models", "runtime", "v1", "handoff",
                                   "server", "security", "metrics"},
    "coordinator": BASE | {"weights", "v1", "coordinator", "security", "tokenizer", "chat_template", "metrics",
                           "http_server"},
    "cli": None,  # the top: anything
    "bench": None,
}
NO_NETWORK = {"boundary", "models", "kernels", "comm", "core"}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
EXEMPT_DIRS = {"tests", "fuzz"}


def folder_of(path):
    parts = path.split(os.sep)
    if parts[0] == "stage_server" and len(parts) > 1:
        return "/".join(parts[:2])
    return parts[0]


def main(root):
    bad = []
    for folder, allowed in ALLOWED.items():
        top = os.path.join(root, folder)
        if not os.path.isdir(top):
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = [d for d in dirnames if d not in EXEMPT_DIRS and d != "node_modules"]
            for name in filenames:
                if not name.endswith((".h", ".cc", ".cu", ".cuh")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = m.group(1)
                        if folder.split("/")[0] in NO_NETWORK and (target.startswith("grpc") or
                                                                   target.startswith("ucp/") or
                                                                   target.startswith("uct/")):
                            bad.append(f"{rel}:{number}: {folder} includes {target} (no gRPC or UCX here)")
                        if allowed is None or not target.startswith("seam/"):
                            continue
                        used = target.split("/")[1]
                        if used not in allowed:
                            bad.append(f"{rel}:{number}: {folder} includes {target}, a folder it may not use")
    for line in bad:
        print(line)
    print(f"check_layers: {len(bad)} violation(s)")
    return 1 if bad else 0


def self_test():
    """An upward include, a collective in a model and gRPC in the boundary are each caught."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        files = {
            "kernels/src/a.cc": '#include "seam/boundary/plan.h"\n',
            "models/src/b.cc": '#include "seam/comm/communicator.h"\n',
            "boundary/src/c.cc": "#include <grpcpp/grpcpp.h>\n",
            "runtime/tests/d.cc": '#include "seam/cli/x.h"\n',  # tests are exempt
        }
        for rel, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        import contextlib
        import io
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = main(root)
        caught = out.getvalue()
        ok = rc == 1 and "kernels/src/a.cc" in caught and "models/src/b.cc" in caught and \
            "boundary/src/c.cc" in caught and "runtime/tests" not in caught
        print("check_layers self-test:", "ok" if ok else "FAILED\n" + caught)
        return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
        sys.exit(self_test())
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")))
