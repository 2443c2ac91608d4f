#!/usr/bin/env python3
"""Structural check of rendered Kubernetes manifests (multi-document YAML on
stdin or in files). Not the full OpenAPI schema: it checks, per kind, the
fields seam's deployment depends on and the restricted Pod Security
Standard, and exits 1 listing every problem found."""
import re
import sys

import yaml

KNOWN = {
    ("v1", "Namespace"), ("v1", "Service"), ("v1", "ConfigMap"),
    ("v1", "PersistentVolumeClaim"), ("v1", "ServiceAccount"),
    ("apps/v1", "StatefulSet"), ("apps/v1", "Deployment"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
}
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
CONTAINER_KEYS = {
    "name", "image", "command", "args", "workingDir", "ports", "envFrom", "env", "resources",
    "resizePolicy", "restartPolicy", "volumeMounts", "volumeDevices", "livenessProbe",
    "readinessProbe", "startupProbe", "lifecycle", "terminationMessagePath",
    "terminationMessagePolicy", "imagePullPolicy", "securityContext", "stdin", "stdinOnce", "tty",
}
POD_KEYS = {
    "volumes", "initContainers", "containers", "ephemeralContainers", "restartPolicy",
    "terminationGracePeriodSeconds", "activeDeadlineSeconds", "dnsPolicy", "nodeSelector",
    "serviceAccountName", "serviceAccount", "automountServiceAccountToken", "nodeName",
    "hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace", "securityContext",
    "imagePullSecrets", "hostname", "subdomain", "affinity", "schedulerName", "tolerations",
    "hostAliases", "priorityClassName", "priority", "dnsConfig", "readinessGates",
    "runtimeClassName", "enableServiceLinks", "preemptionPolicy", "overhead",
    "topologySpreadConstraints", "setHostnameAsFQDN", "os", "hostUsers", "schedulingGates",
    "resourceClaims",
}
PROBE_HANDLERS = {"exec", "httpGet", "tcpSocket", "grpc"}


class Checker:
    def __init__(self):
        self.errors = []

    def err(self, where, msg):
        self.errors.append(f"{where}: {msg}")

    def obj(self, doc, src):
        if not isinstance(doc, dict):
            self.err(src, "document is not a mapping")
            return
        api, kind = doc.get("apiVersion"), doc.get("kind")
        name = (doc.get("metadata") or {}).get("name")
        where = f"{src}: {kind or '?'}/{name or '?'}"
        if (api, kind) not in KNOWN:
            self.err(where, f"unknown apiVersion/kind {api}/{kind}")
            return
        if not isinstance(name, str) or not DNS1123.match(name) or len(name) > 253:
            self.err(where, "metadata.name missing or not a DNS-1123 name")
        spec = doc.get("spec")
        if kind in ("Service", "StatefulSet", "Deployment", "NetworkPolicy", "LeaderWorkerSet",
                    "PersistentVolumeClaim", "ServiceMonitor") and not isinstance(spec, dict):
            self.err(where, "spec missing")
            return
        getattr(self, "k_" + kind, lambda *a: None)(doc, spec, where)

    def k_Namespace(self, doc, spec, where):
        labels = (doc.get("metadata") or {}).get("labels") or {}
        if labels.get("pod-security.kubernetes.io/enforce") != "restricted":
            self.err(where, "namespace does not enforce the restricted Pod Security Standard")

    def k_ConfigMap(self, doc, spec, where):
        for k, v in (doc.get("data") or {}).items():
            if not isinstance(v, str):
                self.err(where, f"data.{k} is not a string")

    def k_Service(self, doc, spec, where):
        ports = spec.get("ports")
        if not ports:
            self.err(where, "spec.ports empty")
        for p in ports or []:
            self.port(p.get("port"), where, "spec.ports[].port")
        if not spec.get("selector"):
            self.err(where, "spec.selector missing")

    def workload(self, spec, where, template_path="spec.template"):
        sel = ((spec.get("selector") or {}).get("matchLabels")) or {}
        tmpl = spec.get("template") or {}
        labels = (tmpl.get("metadata") or {}).get("labels") or {}
        if not sel:
            self.err(where, "spec.selector.matchLabels missing")
        for k, v in sel.items():
            if labels.get(k) != v:
                self.err(where, f"selector {k}={v} does not match {template_path}.metadata.labels")
        self.pod(tmpl.get("spec"), f"{where} {template_path}.spec")

    def k_Deployment(self, doc, spec, where):
        self.workload(spec, where)

    def k_StatefulSet(self, doc, spec, where):
        if not spec.get("serviceName"):
            self.err(where, "spec.serviceName missing")
        self.workload(spec, where)

    def k_LeaderWorkerSet(self, doc, spec, where):
        lwt = spec.get("leaderWorkerTemplate") or {}
        size = lwt.get("size")
        if not isinstance(size, int) or size < 2:
            self.err(where, "leaderWorkerTemplate.size must be an integer >= 2")
        if "workerTemplate" not in lwt:
            self.err(where, "leaderWorkerTemplate.workerTemplate missing")
        for t in ("leaderTemplate", "workerTemplate"):
            if t in lwt:
                self.pod((lwt[t] or {}).get("spec"), f"{where} leaderWorkerTemplate.{t}.spec")

    def k_NetworkPolicy(self, doc, spec, where):
        if "podSelector" not in spec:
            self.err(where, "spec.podSelector missing")
        for rule in spec.get("ingress") or []:
            for p in rule.get("ports") or []:
                self.port(p.get("port"), where, "ingress.ports[].port", named_ok=True)
                if "endPort" in p:
                    self.port(p["endPort"], where, "ingress.ports[].endPort")
                    if isinstance(p.get("port"), int) and p["endPort"] < p["port"]:
                        self.err(where, "endPort below port")

    def port(self, v, where, what, named_ok=False):
        if isinstance(v, int) and 1 <= v <= 65535:
            return
        if named_ok and isinstance(v, str) and re.match(r"^[a-z0-9-]{1,15}$", v):
            return
        self.err(where, f"{what} {v!r} is not a valid port")

    def pod(self, pod, where):
        if not isinstance(pod, dict):
            self.err(where, "pod spec missing")
            return
        for k in pod:
            if k not in POD_KEYS:
                self.err(where, f"unknown pod spec field {k}")
        for k in ("hostNetwork", "hostPID", "hostIPC"):
            if pod.get(k):
                self.err(where, f"{k} is not allowed (restricted)")
        psc = pod.get("securityContext") or {}
        volumes = {v.get("name"): v for v in pod.get("volumes") or []}
        for name, v in volumes.items():
            if "hostPath" in v:
                self.err(where, f"volume {name}: hostPath is not allowed (restricted)")
        containers = pod.get("containers")
        if not containers:
            self.err(where, "containers empty")
        for c in (pod.get("initContainers") or []) + (containers or []):
            self.container(c, psc, volumes, f"{where} container {c.get('name', '?')}")

    def container(self, c, psc, volumes, where):
        for k in c:
            if k not in CONTAINER_KEYS:
                self.err(where, f"unknown container field {k}")
        if not c.get("name"):
            self.err(where, "name missing")
        if not c.get("image"):
            self.err(where, "image missing")
        sc = c.get("securityContext") or {}

        def eff(key):
            return sc.get(key, psc.get(key))
        if eff("runAsNonRoot") is not True:
            self.err(where, "runAsNonRoot must be true")
        if eff("runAsUser") == 0:
            self.err(where, "runAsUser 0")
        if sc.get("allowPrivilegeEscalation") is not False:
            self.err(where, "allowPrivilegeEscalation must be false")
        if sc.get("privileged"):
            self.err(where, "privileged")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            self.err(where, "capabilities.drop must contain ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            self.err(where, f"capabilities.add {caps.get('add')} not allowed")
        seccomp = (eff("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            self.err(where, "seccompProfile.type must be RuntimeDefault or Localhost")
        res = c.get("resources") or {}
        if not res.get("requests"):
            self.err(where, "resources.requests missing")
        for k, v in (res.get("limits") or {}).items():
            if k.endswith("/gpu") and str((res.get("requests") or {}).get(k, v)) != str(v):
                self.err(where, f"{k} requests differ from limits")
        for p in c.get("ports") or []:
            self.port(p.get("containerPort"), where, "ports[].containerPort")
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            pr = c.get(probe)
            if pr is None:
                continue
            handlers = PROBE_HANDLERS & set(pr)
            if len(handlers) != 1:
                self.err(where, f"{probe} needs exactly one handler")
            elif "grpc" in handlers:
                self.port((pr["grpc"] or {}).get("port"), where, f"{probe}.grpc.port")
        for m in c.get("volumeMounts") or []:
            if m.get("name") not in volumes:
                self.err(where, f"volumeMount {m.get('name')} has no volume")
            if not str(m.get("mountPath", "")).startswith("/"):
                self.err(where, f"volumeMount {m.get('name')} mountPath not absolute")
        for e in c.get("env") or []:
            if not e.get("name") or ("value" in e and not isinstance(e["value"], str)):
                self.err(where, f"env {e.get('name')!r}: name missing or value not a string")


def pipeline(self, docs, src):
    """Cross-object: stage pods (StatefulSet replicas, LeaderWorkerSet
    size - 1) must equal the PP of the seam-config ConfigMap."""
    pp = None
    for d in docs:
        if isinstance(d, dict) and d.get("kind") == "ConfigMap" and \
                str((d.get("metadata") or {}).get("name", "")).startswith("seam-config"):
            pp = (d.get("data") or {}).get("PP")
    if pp is None:
        return
    for d in docs:
        if not isinstance(d, dict):
            continue
        spec = d.get("spec") or {}
        if d.get("kind") == "StatefulSet":
            n = spec.get("replicas", 1)
        elif d.get("kind") == "LeaderWorkerSet":
            n = (spec.get("leaderWorkerTemplate") or {}).get("size", 1) - 1
        else:
            continue
        if str(n) != str(pp):
            self.err(f"{src}: {d['kind']}/{d['metadata'].get('name')}", f"{n} stage pods but PP={pp}")


Checker.pipeline = pipeline


def main(argv):
    c = Checker()
    sources = [(a, open(a, encoding="utf-8")) for a in argv[1:]] or [("<stdin>", sys.stdin)]
    count = 0
    for src, f in sources:
        try:
            docs = [d for d in yaml.safe_load_all(f) if d is not None]
        except yaml.YAMLError as e:
            c.err(src, f"YAML: {e}")
            continue
        for d in docs:
            count += 1
            c.obj(d, src)
        c.pipeline(docs, src)
    for e in c.errors:
        print("check_manifests:", e, file=sys.stderr)
    if count == 0:
        print("check_manifests: no objects", file=sys.stderr)
        return 1
    print(f"check_manifests: {count} objects, {len(c.errors)} problems")
    return 1 if c.errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
