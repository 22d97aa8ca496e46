// Checks deploy/kubernetes: every overlay (and the submit Job) renders with
// `kubectl kustomize`, and every object it renders is valid against the
// Kubernetes and Prometheus Operator schemas of kubernetes-models.
//
//   node validate.mjs overlays     render and validate every kustomization
//   node validate.mjs rules        PrometheusRule == dashboards/rules/*.yaml
//   node validate.mjs broken       a broken object is caught, not passed
//   node validate.mjs --write-rules   regenerate the PrometheusRule
//
// KUBECTL names the kubectl to use (default: kubectl on PATH), to check the
// manifests with more than one kustomize. Exits 1 on any problem, printing
// each; never skips.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { isDeepStrictEqual } from "node:util";

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "..", "..", "..");
const kubernetesDir = join(repo, "deploy", "kubernetes");
const ruleFiles = ["recording.yaml", "alerts.yaml"].map((f) => join(repo, "dashboards", "rules", f));
const generatedRule = join(kubernetesDir, "monitoring", "prometheus-rule.yaml");
const kubectl = process.env.KUBECTL || "kubectl";
const shown = (path) => relative(repo, path);

function fail(message) {
  console.error(`FAIL: ${message}`);
  process.exit(1);
}

if (!existsSync(join(here, "node_modules"))) {
  fail(`${shown(join(here, "node_modules"))} is missing: run scripts/install-deps`);
}
const require = createRequire(import.meta.url);
const YAML = require("yaml");

// Every kustomization a user applies: each overlay, and the submit Job.
function kustomizations() {
  const overlays = readdirSync(join(kubernetesDir, "overlays")).map((o) => join("overlays", o));
  return [...overlays, "submit"].map((d) => join(kubernetesDir, d));
}

function render(dir) {
  const result = spawnSync(kubectl, ["kustomize", dir], { encoding: "utf8", maxBuffer: 64 << 20 });
  if (result.error?.code === "ENOENT") fail(`${kubectl} not found: run scripts/install-deps`);
  if (result.status !== 0) return { error: `kubectl kustomize failed:\n${result.stderr}` };
  const documents = YAML.parseAllDocuments(result.stdout);
  const unreadable = documents.flatMap((d) => d.errors);
  if (unreadable.length) return { error: `unreadable output: ${unreadable[0].message}` };
  return { objects: documents.map((d) => d.toJS()).filter(Boolean) };
}

// The kubernetes-models class for an object; undefined for a kind neither
// package knows, which is an error: a typo in apiVersion or kind would
// otherwise go unchecked.
function modelOf({ apiVersion, kind }) {
  if (typeof apiVersion !== "string" || typeof kind !== "string") return undefined;
  const pkg = apiVersion.startsWith("monitoring.coreos.com/")
    ? "@kubernetes-models/prometheus-operator"
    : "kubernetes-models";
  try {
    return require(`${pkg}/${apiVersion}`)[kind];
  } catch {
    return undefined;
  }
}

function validate(object) {
  const Model = modelOf(object);
  if (!Model) return `unknown apiVersion/kind ${object.apiVersion}/${object.kind}`;
  try {
    new Model(object).validate();
    return undefined;
  } catch (error) {
    return error.message;
  }
}

// Secrets, ConfigMaps and volume claims that pods refer to. The names must
// match what kustomize rendered, hash suffixes included.
function references(object) {
  const found = [];
  (function walk(node) {
    if (Array.isArray(node)) return node.forEach(walk);
    if (!node || typeof node !== "object") return;
    if (node.secretKeyRef) found.push(["Secret", node.secretKeyRef.name]);
    if (node.secretRef) found.push(["Secret", node.secretRef.name]);
    if (node.configMapKeyRef) found.push(["ConfigMap", node.configMapKeyRef.name]);
    if (node.configMapRef) found.push(["ConfigMap", node.configMapRef.name]);
    if (node.configMap?.name) found.push(["ConfigMap", node.configMap.name]);
    if (node.persistentVolumeClaim) found.push(["PersistentVolumeClaim", node.persistentVolumeClaim.claimName]);
    Object.values(node).forEach(walk);
  })(object.spec);
  return found;
}

// The tokens Secret is the user's own where no overlay generates it
// (overlays/gpu), and the submit Job joins a cluster deployed separately.
const external = new Set(["Secret/chimera-tokens"]);

function problemsOf(dir) {
  const { objects, error } = render(dir);
  if (error) return [error];
  if (objects.length === 0) return ["renders no object"];
  const problems = [];
  const names = new Set(objects.map((o) => `${o.kind}/${o.metadata?.name}`));
  for (const object of objects) {
    const what = `${object.kind}/${object.metadata?.name}`;
    const invalid = validate(object);
    if (invalid) problems.push(`${what}: ${invalid}`);
    for (const [kind, name] of references(object)) {
      const ref = `${kind}/${name}`;
      if (!names.has(ref) && !external.has(ref)) problems.push(`${what}: refers to ${ref}, which is not rendered`);
    }
  }
  return problems;
}

function checkOverlays() {
  let failed = 0;
  for (const dir of kustomizations()) {
    const problems = problemsOf(dir);
    const name = shown(dir);
    if (problems.length === 0) {
      console.log(`ok: ${name}`);
    } else {
      failed++;
      for (const p of problems) console.error(`FAIL: ${name}: ${p}`);
    }
  }
  if (failed) process.exit(1);
}

function ruleGroups() {
  return ruleFiles.flatMap((f) => YAML.parse(readFileSync(f, "utf8")).groups);
}

// Every PrometheusRule rendered must carry exactly the groups of
// dashboards/rules/, the files that promtool checks and tests.
function checkRules() {
  const expected = ruleGroups();
  let seen = 0;
  for (const dir of kustomizations()) {
    const { objects, error } = render(dir);
    if (error) fail(`${shown(dir)}: ${error}`);
    for (const rule of objects.filter((o) => o.kind === "PrometheusRule")) {
      seen++;
      if (!isDeepStrictEqual(rule.spec?.groups, expected)) {
        fail(`${shown(dir)}: PrometheusRule/${rule.metadata.name} differs from dashboards/rules/*.yaml; ` +
             `run: node tests/deploy/manifests/validate.mjs --write-rules`);
      }
    }
  }
  if (seen === 0) fail("no overlay renders a PrometheusRule");
  console.log(`ok: ${seen} PrometheusRule(s) match dashboards/rules/*.yaml`);
}

function writeRules() {
  const rule = new YAML.Document({
    apiVersion: "monitoring.coreos.com/v1",
    kind: "PrometheusRule",
    metadata: { name: "chimera", labels: { "app.kubernetes.io/name": "chimera" } },
    spec: { groups: [] },
  });
  const groups = rule.getIn(["spec", "groups"], true);
  for (const f of ruleFiles) {
    // Moving the parsed nodes keeps the rules' comments and block scalars.
    groups.items.push(...YAML.parseDocument(readFileSync(f, "utf8")).get("groups", true).items);
  }
  rule.commentBefore =
    " The groups of dashboards/rules/recording.yaml and alerts.yaml, generated by\n" +
    " `node tests/deploy/manifests/validate.mjs --write-rules`: edit those files,\n" +
    " not this one. DeployManifestsTest fails when the two drift apart.";
  writeFileSync(generatedRule, rule.toString({ lineWidth: 0 }));
  console.log(`wrote ${shown(generatedRule)}`);
}

// The checks above prove nothing unless a broken object fails them: render
// an overlay with broken objects added and expect each to be reported.
function checkBroken() {
  const dir = mkdtempSync(join(tmpdir(), "chimera-broken-overlay-"));
  try {
    // Relative: kustomize 5 refuses an absolute base.
    const base = relative(dir, join(kubernetesDir, "overlays", "cpu"));
    writeFileSync(join(dir, "kustomization.yaml"), `bases:\n  - ${base}\nresources:\n  - broken.yaml\n`);
    writeFileSync(join(dir, "broken.yaml"), `
apiVersion: apps/v1
kind: Deployment
metadata: {name: no-selector}
spec:
  template:
    spec:
      containers: [{name: c, image: chimera}]
---
apiVersion: v1
kind: Pod
metadata: {name: string-port}
spec:
  containers: [{name: c, image: chimera, ports: [{containerPort: "9400"}]}]
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: unknown-kind}
`);
    const problems = problemsOf(dir);
    const expected = {
      "missing required field": (p) => p.startsWith("Deployment/no-selector:") && p.includes("selector"),
      "string where an integer belongs": (p) => p.startsWith("Pod/string-port:") && p.includes("containerPort"),
      "unknown kind": (p) => p.startsWith("Widget/unknown-kind:"),
    };
    let missed = 0;
    for (const [what, matches] of Object.entries(expected)) {
      const caught = problems.find(matches);
      if (caught) {
        console.log(`ok: caught ${what}: ${caught}`);
      } else {
        missed++;
        console.error(`FAIL: validation passed a ${what}`);
      }
    }
    const unexpected = problems.filter((p) => !Object.values(expected).some((m) => m(p)));
    for (const p of unexpected) console.error(`FAIL: unexpected problem: ${p}`);
    if (missed || unexpected.length) process.exit(1);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const checks = { overlays: checkOverlays, rules: checkRules, broken: checkBroken, "--write-rules": writeRules };
const wanted = process.argv.slice(2);
if (wanted.length === 0) wanted.push("overlays", "rules", "broken");
for (const name of wanted) {
  if (!checks[name]) fail(`unknown check ${name}; one of: ${Object.keys(checks).join(", ")}`);
  checks[name]();
}
