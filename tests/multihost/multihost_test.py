#!/usr/bin/env python3
"""Multi-host pipeline test over Linux network namespaces.

One namespace per "pod": seam-stage-0 .. seam-stage-(PP-1) and the
coordinator, each with its own eth0 and IP address on a bridge that lives in
a switch namespace of its own (so the root namespace's firewall never sees
the traffic). Every process is started the way deploy/ starts its pod:

- stages: the StatefulSet's command and args, SEAM_STAGE_RANK from the
  ordinal, UCX_TLS and UCX_TCP_PORT_RANGE as the manifests set them;
- coordinator: the Deployment's shell script itself, with the ConfigMap
  (base + overlays/cpu-dev) as environment and POD_NAMESPACE; the stage DNS
  names seam-stage-N.seam-stage.<ns>.svc resolve through
  /etc/netns/<netns>/hosts, which `ip netns exec` mounts over /etc/hosts;
- model: the cpu-dev init container's `seam model init` arguments.

Checks: greedy tokens through the namespaces equal the single-process run
(`seam run --pp 1`, which checks itself against StageGroup + Generator);
cutting one stage's link ends in-flight streaming calls with UNAVAILABLE
within 10 s and turns the coordinator's health NOT_SERVING; after the link
returns, new calls succeed again and the health is SERVING again.

Exit 0: pass, 1: fail, 77: skipped (network namespaces cannot be created).
Every wait has a deadline; namespaces and processes are removed on exit.
"""
import argparse
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPLOY = os.path.join(REPO, "deploy")
K8S_NAMESPACE = "seam-dev"  # the cpu-dev overlay's namespace: part of the stage DNS names
SUBNET = "10.77.0"          # private to this run's bridge; the root namespace has no route to it
PROMPTS = ["3 14 15 92 65", "27 18 28 18 28 45 90 45", "11 200 7"]  # `seam run --prompts 3`


def die_with_parent():
    """Child side of spawn(): SIGKILL when this test process dies, even by SIGKILL (ctest timeout)."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def log(msg):
    print(f"[multihost {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Fail(Exception):
    pass


def run(cmd, timeout=30, check=True, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise Fail(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
    return p


# ---------------------------------------------------------------- manifests

def read(path):
    with open(os.path.join(DEPLOY, path)) as f:
        return f.read()


def config_map(overlay):
    """seam-config literals of base merged with the overlay's (KEY=VALUE lines)."""
    values = {}
    for path in ("base/kustomization.yaml", f"overlays/{overlay}/kustomization.yaml"):
        for m in re.finditer(r"^\s*-\s*([A-Z_]+)=(\S*)", read(path), re.M):
            values[m.group(1)] = m.group(2)
    return values


def list_after(text, key):
    """The `- item` lines (one indentation level) following `key:`."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == f"{key}:":
            indent = len(line) - len(line.lstrip())
            items = []
            for nxt in lines[i + 1:]:
                stripped = nxt.strip()
                if not stripped.startswith("- ") or len(nxt) - len(nxt.lstrip()) < indent:
                    break
                items.append(stripped[2:].strip())
            return items
    raise Fail(f"no '{key}:' list")


def stage_command():
    text = read("base/stage-statefulset.yaml")
    command = json.loads(re.search(r"^\s*command:\s*(\[.*\])", text, re.M).group(1))
    return command + list_after(text, "args")


def coordinator_script():
    """The literal block after `args:` / `- |` in the coordinator Deployment."""
    lines = read("base/coordinator-deployment.yaml").splitlines()
    start = next(i for i, l in enumerate(lines) if l.strip() == "- |")
    body = []
    indent = None
    for line in lines[start + 1:]:
        if line.strip() and indent is None:
            indent = len(line) - len(line.lstrip())
        if line.strip() and len(line) - len(line.lstrip()) < indent:
            break
        body.append(line[indent:] if line.strip() else "")
    return "\n".join(body) + "\n"


def model_init_args(overlay):
    text = read(f"overlays/{overlay}/tiny-model.yaml")
    m = re.search(r"command:\s*(\[.*?\])\s*args:\s*(\[.*?\])", text, re.S)
    return json.loads(m.group(1)) + json.loads(m.group(2))


# ---------------------------------------------------------------- namespaces

class Hosts:
    """A switch namespace holding a bridge and one namespace per host."""

    def __init__(self, tag):
        self.tag = tag
        self.switch = f"{tag}-sw"
        self.names = []  # host namespaces
        self.ips = {}
        self.procs = []
        self.bridge = "br0"

    def create_switch(self):
        run(["ip", "netns", "add", self.switch])
        self.names_created = [self.switch]
        self.ns(self.switch, ["ip", "link", "set", "lo", "up"])
        self.ns(self.switch, ["ip", "link", "add", self.bridge, "type", "bridge"])
        self.ns(self.switch, ["ip", "link", "set", self.bridge, "up"])

    def add_host(self, name, index):
        ns = f"{self.tag}-{name}"
        run(["ip", "netns", "add", ns])
        self.names_created.append(ns)
        ip = f"{SUBNET}.{10 + index}"
        port = f"p{index}"
        # The pair is created in the switch namespace: eth0 moves to the host.
        self.ns(self.switch, ["ip", "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns])
        self.ns(self.switch, ["ip", "link", "set", port, "master", self.bridge])
        self.ns(self.switch, ["ip", "link", "set", port, "up"])
        self.ns(ns, ["ip", "link", "set", "lo", "up"])
        self.ns(ns, ["ip", "addr", "add", f"{ip}/24", "dev", "eth0"])
        self.ns(ns, ["ip", "link", "set", "eth0", "up"])
        self.names.append(ns)
        self.ips[ns] = ip
        return ns

    @staticmethod
    def ns(ns, cmd, timeout=30, check=True):
        return run(["ip", "netns", "exec", ns] + cmd, timeout=timeout, check=check)

    def spawn(self, ns, cmd, env, log_path):
        out = open(log_path, "w")
        p = subprocess.Popen(["ip", "netns", "exec", ns] + cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True, preexec_fn=die_with_parent)
        self.procs.append((p, log_path))
        return p

    def cleanup(self):
        for p, _ in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 10
        for p, _ in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=5)
        for ns in reversed(getattr(self, "names_created", [])):
            run(["ip", "netns", "delete", ns], check=False)
            shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)


def sweep_leftovers():
    """Namespaces of earlier runs whose process is gone (killed before its clean-up)."""
    p = run(["ip", "netns", "list"], check=False)
    for m in re.finditer(r"^(seam-mh-(\d+)-\S+)", p.stdout, re.M):
        if not os.path.exists(f"/proc/{m.group(2)}"):
            run(["ip", "netns", "delete", m.group(1)], check=False)
            shutil.rmtree(f"/etc/netns/{m.group(1)}", ignore_errors=True)


def log_tails(hosts, lines=15):
    out = []
    for _, path in hosts.procs:
        try:
            with open(path) as f:
                tail = f.read().splitlines()[-lines:]
        except OSError:
            tail = []
        out.append(f"--- {path} ---\n" + "\n".join(tail))
    return "\n".join(out)


# ---------------------------------------------------------------- client

def generate(hosts, ns, seam, addr, prompts, max_new_tokens, timeout, stream=False):
    cmd = [seam, "generate", "--addr", addr, "--max-new-tokens", str(max_new_tokens), "--json",
           "--timeout", str(timeout)]
    if stream:
        cmd.append("--stream")
    for p in prompts:
        cmd += ["--prompt", p]
    return Hosts.ns(ns, cmd, timeout=timeout + 10, check=False)


def wait_serving(hosts, ns, seam, addr, deadline_s, what):
    deadline = time.monotonic() + deadline_s
    last = ""
    while time.monotonic() < deadline:
        p = Hosts.ns(ns, [seam, "status", "--addr", addr, "--json", "--timeout", "2"], timeout=15, check=False)
        if p.returncode == 0:
            return json.loads(p.stdout)
        last = (p.stderr or p.stdout).strip()
        time.sleep(0.5)
    raise Fail(f"{what}: coordinator at {addr} not serving within {deadline_s} s: {last}\n{log_tails(hosts)}")


def wait_health(hosts, ns, seam, addr, want, within_s, what):
    """The coordinator's grpc.health.v1 status ("" service) as `seam status`
    reports it; waits up to within_s for `want`."""
    deadline = time.monotonic() + within_s
    health = ""
    while True:
        p = Hosts.ns(ns, [seam, "status", "--addr", addr, "--json", "--timeout", "2"], timeout=15, check=False)
        try:
            health = json.loads(p.stdout)["health"]
        except (ValueError, KeyError):
            health = (p.stderr or p.stdout).strip()
        if health == want:
            log(f"{what}: coordinator health {health}")
            return
        if time.monotonic() >= deadline:
            raise Fail(f"{what}: coordinator health {health!r}, expected {want} within {within_s} s\n"
                       f"{log_tails(hosts)}")
        time.sleep(0.2)


def reference_tokens(seam, model_dir, tp, attn_dp, max_new_tokens, work):
    p = run([seam, "run", "--model", model_dir, "--pp", "1", "--tp", str(tp), "--attn-dp", str(attn_dp),
             "--max-new-tokens", str(max_new_tokens), "--prompts", str(len(PROMPTS))], timeout=120, check=False,
            cwd=work)
    if p.returncode != 0 or "tokens match the single-process run" not in p.stdout:
        raise Fail(f"single-process reference (seam run --pp 1) failed:\n{p.stdout}\n{p.stderr}")
    tokens = [[int(t) for t in m.group(1).split()] for m in re.finditer(r"^prompt \d+ \[.*?\] -> \[(.*)\]$",
                                                                        p.stdout, re.M)]
    if len(tokens) != len(PROMPTS):
        raise Fail(f"cannot read the reference tokens from:\n{p.stdout}")
    return tokens


# ---------------------------------------------------------------- test

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", required=True, help="directory holding seam, seam-stage, seam-coordinator")
    ap.add_argument("--overlay", default="cpu-dev")
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--cut-stage", type=int, default=1, help="pipeline rank whose link is cut")
    ap.add_argument("--cut-seconds", type=float, default=3.0, help="how long the link stays down")
    ap.add_argument("--unavailable-within", type=float, default=10.0)
    ap.add_argument("--recover-within", type=float, default=90.0)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()

    args.bin_dir = os.path.abspath(args.bin_dir)
    seam = os.path.join(args.bin_dir, "seam")
    stage_bin = os.path.join(args.bin_dir, "seam-stage")
    coordinator_bin = os.path.join(args.bin_dir, "seam-coordinator")
    for b in (seam, stage_bin, coordinator_bin):
        if not os.access(b, os.X_OK):
            print(f"FAIL: {b} is not built", flush=True)
            return 1

    def on_signal(signum, _):  # SIGTERM / SIGINT: clean up like a failure
        raise Fail(f"stopped by signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    tag = f"seam-mh-{os.getpid()}"
    hosts = Hosts(tag)
    try:
        sweep_leftovers()
        hosts.create_switch()
    except (Fail, OSError, subprocess.SubprocessError) as e:
        hosts.cleanup()
        print(f"skipped: cannot create network namespaces (needs root and CAP_SYS_ADMIN): {e}", flush=True)
        return SKIP

    work = tempfile.mkdtemp(prefix="seam-multihost-")
    ok = False
    try:
        ok = body(args, hosts, work, seam, stage_bin, coordinator_bin)
    except Fail as e:
        print(f"FAIL: {e}", flush=True)
    except subprocess.TimeoutExpired as e:
        print(f"FAIL: timed out: {e}\n{log_tails(hosts)}", flush=True)
    except OSError as e:
        print(f"FAIL: {e}", flush=True)
    finally:
        hosts.cleanup()
        if ok and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"logs kept in {work}")
    return 0 if ok else 1


def body(args, hosts, work, seam, stage_bin, coordinator_bin):
    cfg = config_map(args.overlay)
    pp, tp, attn_dp = int(cfg["PP"]), int(cfg["TP"]), int(cfg["ATTN_DP"])
    stage_port, client_port = cfg["STAGE_PORT"], cfg["CLIENT_PORT"]
    log(f"config ({args.overlay}): PP {pp} TP {tp} ATTN_DP {attn_dp} STAGE_TIMEOUT {cfg['STAGE_TIMEOUT']} "
        f"UCX_TCP_PORT_RANGE {cfg['UCX_TCP_PORT_RANGE']}")

    # The model every pod writes (init container); one shared copy here.
    models = os.path.join(work, "models")
    init = [a.replace("/usr/local/bin/seam", seam).replace("/models", models) for a in model_init_args(args.overlay)]
    run(init, timeout=60)
    model_dir = cfg["MODEL_DIR"].replace("/models", models)

    stage_ns = [hosts.add_host(f"stage{k}", k) for k in range(pp)]
    coord_ns = hosts.add_host("coordinator", pp)
    log("namespaces: " + ", ".join(f"{ns}={hosts.ips[ns]}" for ns in hosts.names))

    base_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": work, "TMPDIR": work}
    # Stages: StatefulSet command and args; env as in the pod spec.
    # Plaintext between the namespaces: the Secrets' certificates are not here,
    # so the TLS flags give way to --insecure (the manifests' TLS is checked by
    # deploy/validate.sh, the TLS code by the security and auth tests).
    command = [a.replace("/usr/local/bin/seam-stage", stage_bin) for a in stage_command()
               if not a.startswith("--tls-")] + ["--insecure"]
    for k, ns in enumerate(stage_ns):
        env = dict(base_env, SEAM_STAGE_RANK=str(k), UCX_TLS="tcp", UCX_TCP_PORT_RANGE=cfg["UCX_TCP_PORT_RANGE"])
        hosts.spawn(ns, command, env, os.path.join(work, f"seam-stage-{k}.log"))

    # Coordinator: the Deployment's script, ConfigMap as env, stage names in its hosts file.
    hosts_dir = f"/etc/netns/{coord_ns}"
    os.makedirs(hosts_dir, exist_ok=True)
    with open(os.path.join(hosts_dir, "hosts"), "w") as f:
        f.write("127.0.0.1 localhost\n")
        for k, ns in enumerate(stage_ns):
            f.write(f"{hosts.ips[ns]} seam-stage-{k}.seam-stage.{K8S_NAMESPACE}.svc\n")
    script = coordinator_script().replace("/usr/local/bin/seam-coordinator", coordinator_bin)
    env = dict(base_env, POD_NAMESPACE=K8S_NAMESPACE, MODEL_DIR=model_dir, SEAM_INSECURE="1")
    for key in ("PP", "TP", "ATTN_DP", "LAYERS", "STAGE_PORT", "CLIENT_PORT", "STARTUP_TIMEOUT", "STAGE_TIMEOUT",
                "UCX_TCP_PORT_RANGE"):
        env[key] = cfg[key]
    hosts.spawn(coord_ns, ["/bin/sh", "-c", script], env, os.path.join(work, "seam-coordinator.log"))
    addr = f"{hosts.ips[coord_ns]}:{client_port}"

    t0 = time.monotonic()
    status = wait_serving(hosts, coord_ns, seam, addr, 120, "start-up")
    log(f"coordinator serving at {addr} after {time.monotonic() - t0:.1f} s: "
        f"{[s.get('host') for s in status.get('topology', {}).get('stages', [])]}")

    # 1. Greedy tokens equal the single-process run.
    want = reference_tokens(seam, model_dir, tp, attn_dp, args.max_new_tokens, work)
    p = generate(hosts, coord_ns, seam, addr, PROMPTS, args.max_new_tokens, timeout=60)
    if p.returncode != 0:
        raise Fail(f"generate across namespaces failed: {p.stderr}\n{log_tails(hosts)}")
    got = [c["tokens"] for c in json.loads(p.stdout)["completions"]]
    for i, (g, w) in enumerate(zip(got, want)):
        log(f"prompt {i} [{PROMPTS[i]}] -> {g}")
        if g != w:
            raise Fail(f"prompt {i}: tokens {g} differ from the single-process run {w}")
    log("greedy tokens identical to the single-process run")

    # 2. Cut one stage's link while streaming calls are in flight.
    cut_ns = stage_ns[args.cut_stage]
    results = {}
    started = threading.Event()
    clients = []
    for i in range(3):
        def client(i=i):
            cmd = ["ip", "netns", "exec", coord_ns, seam, "generate", "--addr", addr, "--stream",
                   "--max-new-tokens", "4000", "--timeout", "90", "--prompt", PROMPTS[i]]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            first = proc.stdout.readline()  # the first streamed tokens: generation is under way
            if first:
                started.set()
            try:
                out, err = proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            results[i] = (proc.returncode, first + out, err, time.monotonic())
        t = threading.Thread(target=client, daemon=True)
        t.start()
        clients.append(t)
    if not started.wait(30):
        raise Fail(f"no streamed tokens within 30 s\n{log_tails(hosts)}")
    time.sleep(0.5)
    cut = time.monotonic()
    Hosts.ns(cut_ns, ["ip", "link", "set", "eth0", "down"])
    log(f"cut the link of seam-stage-{args.cut_stage} ({cut_ns} eth0 down)")
    for t in clients:
        t.join(timeout=max(0.1, cut + args.unavailable_within + 30 - time.monotonic()))
    try:
        if any(t.is_alive() for t in clients):
            raise Fail(f"in-flight calls still running {args.unavailable_within + 30:.0f} s after the cut")
        worst = 0.0
        for i in sorted(results):
            rc, out, err, ended = results[i]
            elapsed = ended - cut
            worst = max(worst, elapsed)
            log(f"in-flight call {i}: exit {rc} after {elapsed:.2f} s: {err.strip()}")
            if rc == 0:
                raise Fail(f"in-flight call {i} succeeded although stage {args.cut_stage}'s link was cut")
            if "UNAVAILABLE" not in err:
                raise Fail(f"in-flight call {i} did not end UNAVAILABLE: {err.strip()}")
            if elapsed > args.unavailable_within:
                raise Fail(f"in-flight call {i} ended after {elapsed:.2f} s, more than {args.unavailable_within} s")
        log(f"every in-flight call ended UNAVAILABLE, the last {worst:.2f} s after the cut")
        wait_health(hosts, coord_ns, seam, addr, "NOT_SERVING", 2, "pipeline down")
        time.sleep(max(0.0, cut + args.cut_seconds - time.monotonic()))
    finally:
        Hosts.ns(cut_ns, ["ip", "link", "set", "eth0", "up"])
    back = time.monotonic()
    log(f"link of seam-stage-{args.cut_stage} restored after {back - cut:.1f} s")

    # 3. New calls succeed once the link is back.
    deadline = back + args.recover_within
    last = ""
    while time.monotonic() < deadline:
        p = generate(hosts, coord_ns, seam, addr, PROMPTS, args.max_new_tokens, timeout=20)
        if p.returncode == 0:
            got = [c["tokens"] for c in json.loads(p.stdout)["completions"]]
            if got != want:
                raise Fail(f"after recovery: tokens {got} differ from the single-process run {want}")
            log(f"new calls succeed {time.monotonic() - back:.1f} s after the link returned; tokens identical")
            wait_health(hosts, coord_ns, seam, addr, "SERVING", 2, "pipeline back")
            return True
        last = p.stderr.strip()
        time.sleep(1)
    raise Fail(f"no successful call within {args.recover_within} s of the link returning: {last}\n{log_tails(hosts)}")


if __name__ == "__main__":
    sys.exit(main())
