#!/usr/bin/env python3
"""Checks that every folder includes only the folders below it.

The layers, lowest first: core -> kernels -> comm -> boundary -> models ->
runtime -> stage_server / coordinator -> cli (weights beside boundary, under
models; proto beside core; tokenizer and security beside the layers that use
them; testing is linked by tests only). For each product source file (tests
and fuzz targets are exempt: they may use test support), every
`#include "seam/<folder>/..."` must name a folder its own folder may use, and
boundary/ and models/ must not include gRPC or UCX. Host-only folders (the
coordinator and what it links) must neither include core's CUDA headers
(core/cuda: cuda_check.h, cuda_graph.h) nor link a CUDA-side target in
their CMakeLists (seam_core_cuda, kernels and above, CUDA::), so that the
coordinator cannot link CUDA. Exits 1 listing every violation, 0 when there
is none.
"""
import os
import re
import sys

# folder -> include roots (`seam/<root>/`) it may use, besides its own.
BASE = {"core"}
ALLOWED = {
    "core": BASE,
    "core/cuda": BASE,  # core's CUDA side (seam_core_cuda), under core's include root
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
# Folders whose targets the coordinator links: nothing of CUDA may reach them.
HOST_ONLY = {"core", "weights", "tokenizer", "chat_template", "security", "metrics", "coordinator", "proto"}
CUDA_HEADERS = {"seam/core/cuda_check.h", "seam/core/cuda_graph.h"}
CUDA_TARGETS = re.compile(r"\b(seam_core_cuda|seam::core_cuda|seam_kernels|seam::kernels|seam_comm|seam::comm|"
                          r"seam_runtime|seam::runtime|CUDA::\w+|seam::nccl)\b")
LINK = re.compile(r"target_link_libraries\(\s*(seam_\w+|seam-coordinator)\b(.*?)\)", re.DOTALL)
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
EXEMPT_DIRS = {"tests", "fuzz"}


def folder_of(path):
    parts = path.split(os.sep)
    if parts[0] == "stage_server" and len(parts) > 1:
        return "/".join(parts[:2])
    if parts[0] == "core" and len(parts) > 1 and parts[1] == "cuda":
        return "core/cuda"
    return parts[0]


def host_only_links(root):
    """Link lines of host-only folders' product targets that name a CUDA-side target."""
    bad = []
    for folder in sorted(HOST_ONLY):
        path = os.path.join(root, folder, "CMakeLists.txt")
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for m in LINK.finditer(text):
            target, libs = m.group(1), m.group(2)
            if target.endswith("_test") or "fuzz" in target:
                continue
            for hit in CUDA_TARGETS.findall(libs):
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{folder}/CMakeLists.txt:{line}: {target} links {hit} (host-only: no CUDA)")
    return bad


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
                if folder_of(rel) != folder:
                    continue  # a folder of its own inside this one (core/cuda)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = m.group(1)
                        if folder in HOST_ONLY and target in CUDA_HEADERS:
                            bad.append(f"{rel}:{number}: {folder} includes {target} (host-only: no CUDA)")
                        if folder.split("/")[0] in NO_NETWORK and (target.startswith("grpc") or
                                                                   target.startswith("ucp/") or
                                                                   target.startswith("uct/")):
                            bad.append(f"{rel}:{number}: {folder} includes {target} (no gRPC or UCX here)")
                        if allowed is None or not target.startswith("seam/"):
                            continue
                        used = target.split("/")[1]
                        if used not in allowed:
                            bad.append(f"{rel}:{number}: {folder} includes {target}, a folder it may not use")
    bad += host_only_links(root)
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
            "coordinator/src/e.cc": '#include "seam/core/cuda_graph.h"\n',
            "weights/CMakeLists.txt": "target_link_libraries(seam_weights PUBLIC seam::core CUDA::cudart)\n",
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
            "boundary/src/c.cc" in caught and "runtime/tests" not in caught and \
            "coordinator/src/e.cc" in caught and "seam_weights links CUDA::cudart" in caught
        print("check_layers self-test:", "ok" if ok else "FAILED\n" + caught)
        return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
        sys.exit(self_test())
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")))
