// Dockerfile lint: syntax and semantics from dockerfile-utils (the validator
// of the Dockerfile language server: unknown instructions, bad flags and
// arguments, invalid ports and durations, several CMDs in a stage, ...), every
// diagnostic counted as a failure (its CLI exits 0 on warnings), plus a few
// hadolint-style rules that need no binary:
//   latest-tag        FROM names an explicit tag or digest, not :latest (DL3006/DL3007)
//   root-user         the final stage ends with a USER that is not root (DL3002)
//   apt-y             apt-get install has -y (DL3014)
//   apt-recommends    apt-get install has --no-install-recommends (DL3015)
//   apt-lists         a RUN with apt-get install removes /var/lib/apt/lists (DL3009)
//   no-sudo           no sudo in RUN (DL3004)
//
// Usage: node deploy/schema/dockerfile-lint.mjs FILE...   Exit: 0 clean, 1 problems, 2 usage.

import { readFileSync } from "node:fs";
import dockerfileUtils from "dockerfile-utils";

const { validate, ValidationSeverity } = dockerfileUtils;
const asError = ValidationSeverity.ERROR;
const settings = {
  deprecatedMaintainer: asError,
  directiveCasing: asError,
  emptyContinuationLine: asError,
  instructionCasing: asError,
  instructionCmdMultiple: asError,
  instructionEntrypointMultiple: asError,
  instructionHealthcheckMultiple: asError,
  instructionJSONInSingleQuotes: asError,
  instructionWorkdirRelative: asError,
};

// Logical instructions: comments dropped, backslash continuations joined.
function instructions(text) {
  const out = [];
  let cur = null;
  text.split("\n").forEach((line, i) => {
    if (cur === null && /^\s*(#.*)?$/.test(line)) return;
    if (cur !== null && /^\s*#/.test(line)) return;
    const cont = /\\\s*$/.test(line);
    const part = line.replace(/\\\s*$/, " ");
    if (cur === null) cur = { line: i + 1, text: part };
    else cur.text += part;
    if (!cont) {
      const m = /^\s*(\S+)\s*(.*)$/s.exec(cur.text);
      out.push({ line: cur.line, op: m[1].toUpperCase(), args: m[2].trim() });
      cur = null;
    }
  });
  return out;
}

function rules(text) {
  const problems = [];
  const add = (line, rule, msg) => problems.push({ line, msg: `${msg} [${rule}]` });
  const stageNames = new Set();
  let lastUser = null;
  for (const ins of instructions(text)) {
    if (ins.op === "FROM") {
      const words = ins.args.split(/\s+/).filter((w) => !w.startsWith("--"));
      const image = words[0] ?? "";
      const name = /^as$/i.test(words[1] ?? "") ? words[2] : null;
      if (image !== "scratch" && !stageNames.has(image) && !image.includes("$")) {
        const tag = image.includes("@") ? "digest" : (/:([^/:]+)$/.exec(image)?.[1] ?? null);
        if (tag === null || tag === "latest")
          add(ins.line, "latest-tag", `FROM ${image}: name an explicit tag or digest`);
      }
      if (name) stageNames.add(name);
      lastUser = null;
    } else if (ins.op === "USER") {
      lastUser = { line: ins.line, user: ins.args.split(":")[0] };
    } else if (ins.op === "RUN") {
      if (/(^|[\s;&|(])sudo\s/.test(ins.args)) add(ins.line, "no-sudo", "RUN uses sudo");
      if (/apt-get\s+(\S+\s+)*install\b/.test(ins.args)) {
        if (!/(\s-[a-zA-Z]*y\b|--yes\b|--assume-yes\b)/.test(ins.args))
          add(ins.line, "apt-y", "apt-get install without -y");
        if (!/--no-install-recommends\b/.test(ins.args))
          add(ins.line, "apt-recommends", "apt-get install without --no-install-recommends");
        if (!/rm\s+-[a-z]*r[a-z]*f?\s+\/var\/lib\/apt\/lists/.test(ins.args))
          add(ins.line, "apt-lists", "apt-get install without rm -rf /var/lib/apt/lists/* in the same RUN");
      }
    }
  }
  if (lastUser === null) add(1, "root-user", "the final stage has no USER: it runs as root");
  else if (["root", "0"].includes(lastUser.user))
    add(lastUser.line, "root-user", `the final stage runs as ${lastUser.user}`);
  return problems;
}

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node dockerfile-lint.mjs FILE...");
  process.exit(2);
}
let bad = 0;
for (const file of files) {
  const text = readFileSync(file, "utf8");
  const problems = [
    ...validate(text, settings).map((d) => ({ line: d.range.start.line + 1, msg: d.message })),
    ...rules(text),
  ].sort((a, b) => a.line - b.line);
  for (const p of problems) console.log(`dockerfile-lint: FAIL: ${file}:${p.line}: ${p.msg}`);
  if (problems.length) bad++;
  else console.log(`dockerfile-lint: ok: ${file}`);
}
process.exitCode = bad ? 1 : 0;
