// OpenAPI schema validation of rendered Kubernetes manifests.
//
// Usage: node deploy/schema/validate.mjs FILE...   (multi-document YAML)
//
// Every object is validated with the kubernetes-models class of its
// apiVersion/kind (the Kubernetes OpenAPI schema, compiled to ajv). The
// LeaderWorkerSet CRD (leaderworkerset.x-k8s.io/v1) has no model there: its
// metadata is validated as ObjectMeta, its leaderTemplate/workerTemplate as
// core/v1 PodTemplateSpec, and its remaining spec fields are checked here
// against the LWS v1 API (known fields, types, enums). Any other apiVersion
// or kind is an error. ServiceMonitor (prometheus-operator) is checked
// field by field likewise.
//
// The OpenAPI schema does not forbid unknown fields; check_manifests.py
// rejects unknown pod and container fields.
//
// YAML is parsed as YAML 1.1, like kubectl (`yes`/`on` are booleans, `0755`
// is octal), with duplicate keys rejected.
//
// Exit: 0 every object valid, 1 a problem found, 2 usage.

import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import { PodTemplateSpec } from "kubernetes-models/v1/PodTemplateSpec";
import { ObjectMeta } from "@kubernetes-models/apimachinery/apis/meta/v1/ObjectMeta";

// instancePath "/spec/template/spec/containers/0/ports/0" -> "spec.template.spec.containers[0].ports[0]"
function fieldPath(prefix, pointer) {
  let out = prefix;
  for (const raw of pointer.split("/").slice(1)) {
    const seg = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (/^\d+$/.test(seg)) out += `[${seg}]`;
    else out += (out ? "." : "") + seg;
  }
  return out || "(object)";
}

function valueAt(obj, pointer) {
  let v = obj;
  for (const raw of pointer.split("/").slice(1)) {
    if (v === null || typeof v !== "object") return undefined;
    v = v[raw.replace(/~1/g, "/").replace(/~0/g, "~")];
  }
  return v;
}

// Runs model.validate(); returns "field: message (got value)" strings.
function modelErrors(model, data, prefix) {
  try {
    model.validate();
    return [];
  } catch (e) {
    if (!Array.isArray(e.errors)) return [`${prefix || "(object)"}: ${e.message}`];
    const seen = new Set();
    const out = [];
    for (const err of e.errors) {
      let path = err.instancePath || "";
      let msg = err.message;
      if (err.keyword === "required") {
        path += `/${err.params.missingProperty}`;
        msg = "required field missing";
      } else if (err.keyword === "enum") {
        msg += ` (${err.params.allowedValues.map((v) => JSON.stringify(v)).join(", ")})`;
      }
      const got = valueAt(data, err.instancePath || "");
      const gotText = err.keyword === "required" || got === undefined || typeof got === "object"
        ? "" : ` (got ${JSON.stringify(got)})`;
      const line = `${fieldPath(prefix, path)}: ${msg}${gotText}`;
      if (!seen.has(line)) { seen.add(line); out.push(line); }
    }
    return out;
  }
}

const isInt = (v) => Number.isInteger(v);
const isObj = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

function unknownKeys(obj, known, prefix, errs) {
  for (const k of Object.keys(obj)) if (!known.includes(k)) errs.push(`${prefix}.${k}: unknown field`);
}

// LeaderWorkerSet leaderworkerset.x-k8s.io/v1 (sigs.k8s.io/lws api/leaderworkerset/v1).
function leaderWorkerSetErrors(doc) {
  const errs = [];
  unknownKeys(doc, ["apiVersion", "kind", "metadata", "spec", "status"], "", errs);
  errs.push(...modelErrors(new ObjectMeta(doc.metadata ?? {}), doc.metadata ?? {}, "metadata"));
  const spec = doc.spec;
  if (!isObj(spec)) return [...errs, "spec: required object missing"];
  unknownKeys(spec, ["replicas", "leaderWorkerTemplate", "rolloutStrategy", "startupPolicy", "networkConfig"],
    "spec", errs);
  if ("replicas" in spec && !(isInt(spec.replicas) && spec.replicas >= 0))
    errs.push(`spec.replicas: must be an integer >= 0 (got ${JSON.stringify(spec.replicas)})`);
  if ("startupPolicy" in spec && !["LeaderCreated", "LeaderReady"].includes(spec.startupPolicy))
    errs.push(`spec.startupPolicy: must be LeaderCreated or LeaderReady (got ${JSON.stringify(spec.startupPolicy)})`);
  if ("rolloutStrategy" in spec && !isObj(spec.rolloutStrategy)) errs.push("spec.rolloutStrategy: must be an object");
  if ("networkConfig" in spec) {
    const sp = spec.networkConfig?.subdomainPolicy;
    if (!isObj(spec.networkConfig)) errs.push("spec.networkConfig: must be an object");
    else if (sp !== undefined && !["Shared", "UniquePerReplica"].includes(sp))
      errs.push(`spec.networkConfig.subdomainPolicy: must be Shared or UniquePerReplica (got ${JSON.stringify(sp)})`);
  }
  const lwt = spec.leaderWorkerTemplate;
  const p = "spec.leaderWorkerTemplate";
  if (!isObj(lwt)) return [...errs, `${p}: required object missing`];
  unknownKeys(lwt, ["leaderTemplate", "workerTemplate", "size", "restartPolicy", "subGroupPolicy"], p, errs);
  if ("size" in lwt && !(isInt(lwt.size) && lwt.size >= 1))
    errs.push(`${p}.size: must be an integer >= 1 (got ${JSON.stringify(lwt.size)})`);
  const policies = ["RecreateGroupOnPodRestart", "RecreateGroupAfterStart", "None"];
  if ("restartPolicy" in lwt && !policies.includes(lwt.restartPolicy))
    errs.push(`${p}.restartPolicy: must be one of ${policies.join(", ")} (got ${JSON.stringify(lwt.restartPolicy)})`);
  if ("subGroupPolicy" in lwt && !isObj(lwt.subGroupPolicy)) errs.push(`${p}.subGroupPolicy: must be an object`);
  if (!("workerTemplate" in lwt)) errs.push(`${p}.workerTemplate: required field missing`);
  for (const t of ["leaderTemplate", "workerTemplate"]) {
    if (!(t in lwt)) continue;
    if (!isObj(lwt[t])) { errs.push(`${p}.${t}: must be an object`); continue; }
    errs.push(...modelErrors(new PodTemplateSpec(lwt[t]), lwt[t], `${p}.${t}`));
  }
  return errs;
}

// ServiceMonitor monitoring.coreos.com/v1 (prometheus-operator): the fields
// seam's component uses, checked by name and type; anything else is unknown.
function serviceMonitorErrors(doc) {
  const errs = [];
  unknownKeys(doc, ["apiVersion", "kind", "metadata", "spec"], "", errs);
  errs.push(...modelErrors(new ObjectMeta(doc.metadata ?? {}), doc.metadata ?? {}, "metadata"));
  const spec = doc.spec;
  if (!isObj(spec)) return [...errs, "spec: required object missing"];
  unknownKeys(spec, ["selector", "endpoints", "namespaceSelector", "jobLabel", "targetLabels", "podTargetLabels"],
    "spec", errs);
  if (!isObj(spec.selector)) errs.push("spec.selector: required object missing");
  else unknownKeys(spec.selector, ["matchLabels", "matchExpressions"], "spec.selector", errs);
  if (!Array.isArray(spec.endpoints) || spec.endpoints.length === 0)
    return [...errs, "spec.endpoints: required non-empty list missing"];
  spec.endpoints.forEach((e, i) => {
    const p = `spec.endpoints[${i}]`;
    if (!isObj(e)) { errs.push(`${p}: must be an object`); return; }
    unknownKeys(e, ["port", "targetPort", "path", "scheme", "interval", "scrapeTimeout", "tlsConfig",
      "bearerTokenSecret", "honorLabels", "relabelings", "metricRelabelings"], p, errs);
    if (typeof e.port !== "string" && !("targetPort" in e)) errs.push(`${p}.port: a port name is required`);
    if ("scheme" in e && !["http", "https"].includes(e.scheme))
      errs.push(`${p}.scheme: must be http or https (got ${JSON.stringify(e.scheme)})`);
    for (const d of ["interval", "scrapeTimeout"])
      if (d in e && !/^(0|([0-9]+(ms|s|m|h))+)$/.test(e[d])) errs.push(`${p}.${d}: not a duration (${e[d]})`);
    if ("tlsConfig" in e) {
      const t = e.tlsConfig;
      if (!isObj(t)) { errs.push(`${p}.tlsConfig: must be an object`); return; }
      unknownKeys(t, ["ca", "cert", "keySecret", "serverName", "insecureSkipVerify"], `${p}.tlsConfig`, errs);
      if (isObj(t.ca) && !(isObj(t.ca.secret) && typeof t.ca.secret.name === "string" &&
                           typeof t.ca.secret.key === "string"))
        errs.push(`${p}.tlsConfig.ca: expected secret {name, key}`);
    }
  });
  return errs;
}

const crds = {
  "leaderworkerset.x-k8s.io/v1/LeaderWorkerSet": leaderWorkerSetErrors,
  "monitoring.coreos.com/v1/ServiceMonitor": serviceMonitorErrors,
};

// kubernetes-models/<group>/<version>/<Kind> for a built-in apiVersion ("v1"
// is core); one module per kind keeps start-up short.
async function modelClass(apiVersion, kind) {
  if (!/^([a-z0-9.-]+\/)?v[0-9]+((alpha|beta)[0-9]+)?$/.test(apiVersion) || !/^[A-Z][A-Za-z0-9]*$/.test(kind))
    return null;
  let mod;
  try {
    mod = await import(`kubernetes-models/${apiVersion}/${kind}`);
  } catch (e) {
    if (e.code === "ERR_PACKAGE_PATH_NOT_EXPORTED" || e.code === "ERR_MODULE_NOT_FOUND") return null;
    throw e;
  }
  const cls = mod[kind];
  // Only top-level resources carry apiVersion/kind (not e.g. DeploymentSpec).
  return cls && cls.apiVersion === apiVersion && cls.kind === kind ? cls : null;
}

async function main(files) {
  if (files.length === 0) {
    console.error("usage: node validate.mjs FILE...");
    return 2;
  }
  let bad = 0;
  let count = 0;
  for (const file of files) {
    const docs = parseAllDocuments(readFileSync(file, "utf8"), { version: "1.1", uniqueKeys: true });
    for (const [i, ydoc] of docs.entries()) {
      if (ydoc.errors.length) {
        for (const e of ydoc.errors) console.log(`schema: FAIL: ${file}: document ${i + 1}: YAML: ${e.message}`);
        bad++;
        continue;
      }
      const doc = ydoc.toJS({ maxAliasCount: 100 });
      if (doc === null || doc === undefined) continue;
      count++;
      let errs;
      let what = `document ${i + 1}`;
      if (!isObj(doc) || typeof doc.apiVersion !== "string" || typeof doc.kind !== "string") {
        errs = ["apiVersion and kind must be strings"];
      } else {
        const ns = doc.metadata?.namespace ? `${doc.metadata.namespace}/` : "";
        what = `${doc.kind} ${ns}${doc.metadata?.name ?? "(no name)"} (${doc.apiVersion})`;
        const crd = crds[`${doc.apiVersion}/${doc.kind}`];
        const cls = crd ? null : await modelClass(doc.apiVersion, doc.kind);
        if (crd) errs = crd(doc);
        else if (cls) errs = modelErrors(new cls(doc), doc, "");
        else errs = [`unknown apiVersion/kind: no schema for ${doc.apiVersion} ${doc.kind}`];
      }
      if (errs.length) {
        bad++;
        for (const e of errs) console.log(`schema: FAIL: ${file}: ${what}: ${e}`);
      }
    }
  }
  if (bad) console.log(`schema: ${bad} of ${count} objects invalid`);
  else console.log(`schema: ${count} objects valid`);
  return bad ? 1 : 0;
}

process.exitCode = await main(process.argv.slice(2));
