// Offline validation of the deployment files (docker-compose.yml, deploy/**).
// Run through scripts/validate-deploy.sh. Needs no network, no Docker, no cluster:
//   - Kubernetes manifests: JSON-schema validation with the schemas bundled in kubernetes-models
//     (Kubernetes 1.27) and @kubernetes-models/prometheus-operator, plus a TypeScript
//     excess-property check against the same packages' types (catches misspelled fields, which
//     the schemas allow), plus cross-references (selectors, ConfigMap/Secret names, probe ports),
//     and the relay's containers keep the image's ENTRYPOINT and its V8 flag (args, no command).
//   - PromQL in alert rules and in the dashboard: parsed with @prometheus-io/lezer-promql;
//     every metric name, label name and enumerated label value checked against the metrics the
//     relay, the pruner and the webhooks command define (imported from src/, with prom-client's
//     default metrics).
//   - Alert rules: required alerts present, severity, summary/description, a runbook_url that is
//     <runbook base>/<AlertName>.md (runbooks.ts) with the page in docs/runbooks; the compose
//     Prometheus rules file equal to the PrometheusRule.
//   - Dashboard JSON, Prometheus config for compose, compose cross-checks (dclint does the
//     compose-spec schema separately, from validate-deploy.sh).
//   - Every relay variable set in compose or Kubernetes: an option of the relay (imported from
//     src/config/options.ts), with a value its own parser accepts, or a secret option's
//     <NAME>_FILE naming an absolute path.
//   - Secrets (secrets.ts): no secret option as an environment value (nor a Secret as env);
//     every file a workload's variables name is mounted read-only from a Secret (mode 0400/0440)
//     or a compose secret; each workload's configuration loads as the relay loads it, with the
//     example Secret's content in the files, and each component logs in as its own role.
// Options: --write-rules  rewrite deploy/prometheus/rules/outbox-relay.rules.yml from the PrometheusRule;
//          --runbook-base <url>  first set the PrometheusRule's runbook base and every runbook_url (with --write-rules: both files).
// Parsed YAML and JSON are walked untyped on purpose: the schemas above type them.
/* eslint-disable @typescript-eslint/no-explicit-any */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import { parser as promqlParser } from '@prometheus-io/lezer-promql';
import { collectDefaultMetrics, Registry } from 'prom-client';
import YAML from 'yaml';
import { OPTIONS } from '../../src/config/options.js';
import { createRelayMetrics, WAL_STATUSES } from '../../src/observe/metrics.js';
import { SEMI_SPACE_FLAG } from '../../src/observe/runtime-flags.js';
import { createPruneMetrics } from '../../src/prune/pruner.js';
import { RELAY_STATES } from '../../src/relay-state.js';
import { ATTEMPT_OUTCOMES, createWebhookMetrics } from '../../src/webhooks/metrics.js';
import { RUNBOOK_BASE_ANNOTATION, runbookBaseProblem, runbookUrl, RUNBOOKS_DIR, withRunbookBase } from './runbooks.js';
import { checkFileReferences, checkLoad, commandOf, composeFiles, plainSecretProblem, podFiles, SECRET_FILE_VARIABLES } from './secrets.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const K8S_DIR = join(ROOT, 'deploy/kubernetes');
const RULES_FILE = join(ROOT, 'deploy/prometheus/rules/outbox-relay.rules.yml');
const PROM_CONFIG = join(ROOT, 'deploy/prometheus/prometheus.yml');
const DASHBOARD = join(ROOT, 'deploy/grafana/outbox-relay.json');
const COMPOSE = join(ROOT, 'docker-compose.yml');
const COMPOSE_SECURED = join(ROOT, 'deploy/compose/secured.override.yml');
const PROMETHEUS_RULE = join(K8S_DIR, 'prometheusrule.yaml');
/** promtool's tests of the alerts: they compare annotations, runbook_url included. */
const ALERT_TESTS = join(ROOT, 'scripts/validate-deploy/alerts.test.yml');

/** Manifests under deploy/kubernetes that are applied on their own, not by kustomization.yaml. */
const STANDALONE_MANIFESTS = ['setup-job.yaml', 'webhooks-setup-job.yaml', 'cutover-job.yaml'];
/** The alerts operators rely on (more are fine). */
const REQUIRED_ALERTS = [
  'OutboxRelayNoActiveReader', 'OutboxRelaySlotInactive', 'OutboxRelaySlotLagHigh', 'OutboxRelayLagHigh',
  'OutboxRelaySlotWalUnreserved', 'OutboxRelaySlotLost', 'OutboxRelayDeadLetters', 'OutboxPruneNotSucceeding',
  'OutboxWebhooksDown', 'OutboxWebhookDeliveriesFailed', 'OutboxWebhookBacklogOld', 'OutboxWebhookStoreStale',
];
/** The Prometheus job of each long-running command's pods (PodMonitors, compose scrape jobs): the alerts select on them. */
const JOBS = ['outbox-relay', 'outbox-prune', 'outbox-webhooks'];
/** Labels a scrape adds to every series (compose: namespace/service by relabelling). */
const TARGET_LABELS = new Set(['job', 'instance', 'namespace', 'pod', 'container', 'endpoint', 'service', '__name__']);
/** Variables that are not the relay's own settings. */
const FOREIGN_ENV = ['NODE_OPTIONS', 'NODE_ENV'];

type Json = any;
const errors: string[] = [];
const notes: string[] = [];
const checked: string[] = [];
const fail = (where: string, message: string): void => {
  errors.push(`${where}: ${message}`);
};
const rel = (file: string): string => relative(ROOT, file);

// Before anything reads the manifests: an operator's runbook base, written into the PrometheusRule.
{
  const at = process.argv.indexOf('--runbook-base');
  if (at !== -1) {
    const base = process.argv[at + 1];
    const problem = runbookBaseProblem(base);
    if (problem) {
      console.error(`validate-deploy: --runbook-base: ${problem}`);
      process.exit(2);
    }
    for (const file of [PROMETHEUS_RULE, ALERT_TESTS]) writeFileSync(file, withRunbookBase(readFileSync(file, 'utf8'), base!));
    notes.push(`wrote ${rel(PROMETHEUS_RULE)} and ${rel(ALERT_TESTS)}: runbook base ${base}`);
  }
}

// ---------------------------------------------------------------- metrics contract

/** name -> { type, labels } for every series name a query may use. */
interface MetricSpec { type: string; labels: Record<string, readonly string[] | null> | null }
const METRICS = new Map<string, MetricSpec>();
function addMetric(name: string, spec: MetricSpec): void {
  METRICS.set(name, spec);
  if (spec.type === 'histogram') {
    METRICS.set(`${name}_bucket`, { ...spec, labels: { ...spec.labels, le: null } });
    METRICS.set(`${name}_sum`, spec);
    METRICS.set(`${name}_count`, spec);
  }
}
const webhookMetrics = createWebhookMetrics(new Registry());
/** The values of `label` that the code starts a counter's series at 0 with: every value it can take (src/webhooks/metrics.ts). */
async function zeroedValues(metric: { get(): Promise<{ values: { labels: Record<string, unknown> }[] }> }, label: string): Promise<string[]> {
  const values = [...new Set((await metric.get()).values.map((value) => String(value.labels[label])))];
  if (values.length === 0) throw new Error(`src/webhooks/metrics.ts no longer starts the series of ${label} at 0: list its values another way`);
  return values;
}
/** Label values a query may select on, where the relay knows them all (otherwise any value). */
const ENUMERATED: Record<string, Record<string, readonly string[]>> = {
  outbox_relay_slot_wal_status: { status: WAL_STATUSES },
  outbox_relay_state: { state: RELAY_STATES },
  outbox_webhook_deliveries_total: { outcome: await zeroedValues(webhookMetrics.deliveries, 'outcome') },
  outbox_webhook_attempts_total: { outcome: ATTEMPT_OUTCOMES },
  outbox_webhook_attempt_duration_seconds: { outcome: ATTEMPT_OUTCOMES },
  outbox_webhook_endpoints_disabled_total: { reason: await zeroedValues(webhookMetrics.endpointsDisabled, 'reason') },
};
// Prometheus's own series.
addMetric('up', { type: 'gauge', labels: {} });
// The exact default metrics of the prom-client version the relay ships.
const defaults = new Registry();
collectDefaultMetrics({ register: defaults });
const DEFAULT_NAMES = new Set<string>();
for (const metric of defaults.getMetricsAsArray()) {
  DEFAULT_NAMES.add(metric.name);
  addMetric(metric.name, { type: String(metric.type), labels: null });
}
/** The relay's, the pruner's and the webhooks command's own metrics, as their code defines them: deploy/ must use each. */
const CONTRACT_NAMES: string[] = [];
for (const { registry } of [createRelayMetrics(new Registry()), createPruneMetrics(new Registry()), webhookMetrics]) {
  for (const metric of registry.getMetricsAsArray()) {
    if (DEFAULT_NAMES.has(metric.name)) continue;
    // prom-client keeps a metric's labelNames (its own configuration) on it: fail loudly if that changes.
    if (!('labelNames' in metric) || !Array.isArray(metric.labelNames)) throw new Error(`prom-client: no labelNames on ${metric.name}; read the label names another way`);
    const labels = metric.labelNames.map((label: string) => [label, ENUMERATED[metric.name]?.[label] ?? null]);
    addMetric(metric.name, { type: String(metric.type), labels: Object.fromEntries(labels) });
    CONTRACT_NAMES.push(metric.name);
  }
}
for (const [name, labels] of Object.entries(ENUMERATED)) {
  for (const label of Object.keys(labels)) if (!(label in (METRICS.get(name)?.labels ?? {}))) fail('scripts/validate-deploy/validate.ts', `ENUMERATED names ${name}{${label}}, which the relay does not define`);
}
const usedMetrics = new Set<string>();

/** Grafana variables -> values that keep the query valid PromQL. */
function expandGrafana(expr: string): string {
  return expr
    .replace(/\$__rate_interval|\$__interval|\$\{__rate_interval\}|\$\{__interval\}|\$__range/g, '5m')
    .replace(/\$\{(\w+)(?::\w+)?\}|\$(\w+)/g, '.*');
}

/** Parses PromQL; reports syntax errors and metrics/labels outside the contract. */
function checkPromQL(where: string, expr: string): boolean {
  const tree = promqlParser.parse(expr);
  let ok = true;
  tree.iterate({
    enter(node) {
      if (node.type.isError) {
        ok = false;
        fail(where, `PromQL syntax error at offset ${node.from}: …${expr.slice(Math.max(0, node.from - 20), node.from + 20).replace(/\s+/g, ' ')}…`);
        return false;
      }
      if (node.name !== 'VectorSelector') return undefined;
      const cursor = node.node;
      const ident = cursor.getChild('Identifier');
      const matchers: { label: string; op: string; value: string }[] = [];
      const lm = cursor.getChild('LabelMatchers');
      if (lm) {
        for (let m = lm.firstChild; m; m = m.nextSibling) {
          const label = m.getChild('LabelName');
          const op = m.getChild('MatchOp');
          const value = m.getChild('StringLiteral');
          if (label && op && value) matchers.push({ label: expr.slice(label.from, label.to), op: expr.slice(op.from, op.to), value: JSON.parse(expr.slice(value.from, value.to).replace(/^'(.*)'$/s, '"$1"')) });
        }
      }
      const name = ident ? expr.slice(ident.from, ident.to) : matchers.find((m) => m.label === '__name__' && m.op === '=')?.value;
      if (!name) return undefined;
      const spec = METRICS.get(name);
      if (!spec) {
        fail(where, `unknown metric "${name}" (not defined in src/observe/metrics.ts, src/prune/pruner.ts or src/webhooks/metrics.ts, nor a prom-client default metric)`);
        return undefined;
      }
      usedMetrics.add(name.replace(/_(bucket|sum|count)$/, (s: string) => (METRICS.get(name.slice(0, -s.length))?.type === 'histogram' ? '' : s)));
      if (spec.labels === null) return undefined;
      for (const m of matchers) {
        if (TARGET_LABELS.has(m.label)) continue;
        if (!(m.label in spec.labels)) {
          fail(where, `metric ${name} has no label "${m.label}" (labels: ${Object.keys(spec.labels).join(', ') || 'none'})`);
          continue;
        }
        const allowed = spec.labels[m.label];
        if (allowed && m.op === '=' && !allowed.includes(m.value)) fail(where, `${name}{${m.label}="${m.value}"}: value is none of ${allowed.join('|')}`);
      }
      return undefined;
    },
  });
  return ok;
}

const DURATION = /^(0|(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?)$/;
function seconds(duration: unknown): number {
  const units: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400, w: 604800, y: 31536000 };
  let total = 0;
  for (const [, n, u] of String(duration).matchAll(/(\d+)(ms|s|m|h|d|w|y)/g)) total += Number(n) * (units[u ?? ''] ?? 0);
  return total;
}

// ---------------------------------------------------------------- environment variables

const OPTION_BY_ENV = new Map(Object.values(OPTIONS).map((option) => [option.env, option]));
/** Compose's ${VAR:-default}: the default, as `docker compose up` would pass it. */
const composeValue = (value: unknown): string => String(value).replace(/\$\{\w+:-([^}]*)\}/g, '$1');
/** Variables and their values as the process sees them (unset ones left out). */
const envValues = (env: Record<string, unknown>): Record<string, string> =>
  Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined && value !== null).map(([name, value]) => [name, composeValue(value)]));

/** A relay variable with a value the relay accepts, parsed by the relay's own parser; no secret as a value. */
function checkEnv(where: string, name: string, value: unknown): void {
  if (FOREIGN_ENV.includes(name)) return;
  // The demo's own settings (src/demo).
  if (name.startsWith('DEMO_')) return;
  const option = OPTION_BY_ENV.get(name);
  const secretFile = SECRET_FILE_VARIABLES.has(name);
  if (!option && !secretFile) {
    fail(where, `environment variable ${name} is not an option of the relay (src/config/options.ts)`);
    return;
  }
  // No value here: set from elsewhere (valueFrom), checked by the caller. A secret's file: the
  // caller checks that it is mounted (checkFileReferences).
  if (value === undefined || value === null || secretFile) return;
  const raw = composeValue(value);
  const exposed = plainSecretProblem(name, raw);
  if (exposed) fail(where, exposed);
  try {
    option!.parser.parse(raw);
  } catch (error) {
    fail(where, `${name}=${option!.secret ? '(redacted)' : JSON.stringify(raw)} ${(error as Error).message}; expected ${option!.parser.expected}`);
  }
}

/** OUTBOX_SHUTDOWN_TIMEOUT in seconds, as the relay reads it from `env` (its default when unset); null if invalid (checkEnv says so). */
function shutdownSeconds(env: Record<string, unknown>): number | null {
  const option = OPTIONS.shutdownTimeout;
  try {
    return option.parser.parse(String(env[option.env] ?? option.default)) / 1000;
  } catch {
    return null;
  }
}

/**
 * The image's ENTRYPOINT runs node with the relay's V8 flag: an entrypoint (compose) or command
 * (Kubernetes) that replaces it to run the CLI must pass the flag too. Other programs of the
 * image (the demo's services) are theirs to start.
 */
function droppedRuntimeFlag(entrypoint: unknown): string | null {
  const words = Array.isArray(entrypoint) ? entrypoint.map(String) : typeof entrypoint === 'string' ? entrypoint.split(/\s+/) : [];
  if (!words.some((word) => word.endsWith('dist/cli.js')) || words.includes(SEMI_SPACE_FLAG)) return null;
  return `${JSON.stringify(words)} replaces the image's ENTRYPOINT (node ${SEMI_SPACE_FLAG} dist/cli.js) without its flag: give the CLI's arguments alone, or keep the flag`;
}

// ---------------------------------------------------------------- Kubernetes

function loadYamlDocs(file: string): Json[] {
  // YAML 1.1, as kubectl reads it: `defaultMode: 0440` is octal.
  const docs = YAML.parseAllDocuments(readFileSync(file, 'utf8'), { prettyErrors: true, version: '1.1' });
  const out: Json[] = [];
  for (const doc of docs) {
    for (const e of doc.errors) fail(rel(file), `YAML: ${e.message}`);
    for (const w of doc.warnings) fail(rel(file), `YAML: ${w.message}`);
    const value = doc.toJS();
    if (value !== null && value !== undefined) out.push(value);
  }
  return out;
}

function modelModule(apiVersion: string, kind: string): string {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : [null, apiVersion];
  if (group === 'monitoring.coreos.com') return `@kubernetes-models/prometheus-operator/${apiVersion}/${kind}`;
  return group ? `kubernetes-models/${group}/${version}/${kind}` : `kubernetes-models/${version}/${kind}`;
}

const kustomization: Json = YAML.parse(readFileSync(join(K8S_DIR, 'kustomization.yaml'), 'utf8'));
const k8sFiles = readdirSync(K8S_DIR).filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml').sort();
for (const f of kustomization.resources ?? []) if (!existsSync(join(K8S_DIR, f))) fail('deploy/kubernetes/kustomization.yaml', `resource ${f} does not exist`);
for (const f of k8sFiles) {
  if (!(kustomization.resources ?? []).includes(f) && !STANDALONE_MANIFESTS.includes(f)) fail(`deploy/kubernetes/${f}`, 'not listed in kustomization.yaml resources (nor a known standalone manifest)');
}

/** { file, doc, module } for every manifest. */
const manifests: { file: string; where: string; doc: Json; module: string }[] = [];
for (const f of k8sFiles) {
  for (const doc of loadYamlDocs(join(K8S_DIR, f))) {
    const where = `deploy/kubernetes/${f} ${doc.kind ?? '?'}/${doc.metadata?.name ?? '?'}`;
    if (!doc.apiVersion || !doc.kind) {
      fail(where, 'apiVersion and kind are required');
      continue;
    }
    const module = modelModule(doc.apiVersion, doc.kind);
    let Model;
    try {
      Model = (await import(module))[doc.kind];
    } catch {
      fail(where, `no schema for ${doc.apiVersion} ${doc.kind} (${module})`);
      continue;
    }
    try {
      new Model(doc).validate();
    } catch (error) {
      fail(where, `schema: ${(error as Error).message}`);
    }
    manifests.push({ file: f, where, doc, module });
  }
}
checked.push(`${manifests.length} Kubernetes objects in ${k8sFiles.length} files (schema)`);

// Misspelled or misplaced fields: TypeScript's excess-property check against the models' types.
{
  const dir = join(ROOT, 'node_modules/.cache/validate-deploy');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const imports = new Map<string, string>();
  const lines: string[] = [];
  manifests.forEach(({ doc, module, where }, i) => {
    const alias = `T${imports.size}`;
    if (!imports.has(module)) imports.set(module, alias);
    lines.push(`// ${where}`, `export const m${i} = ${JSON.stringify(doc, null, 2)} satisfies ${imports.get(module)};`);
  });
  const head = [...imports].map(([module, alias]) => {
    const kind = module.split('/').pop() ?? '';
    return `import type { I${kind} as ${alias} } from '${module}';`;
  });
  writeFileSync(join(dir, 'manifests.ts'), [...head, ...lines, ''].join('\n'));
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { strict: true, noEmit: true, skipLibCheck: true, module: 'esnext', moduleResolution: 'bundler', target: 'es2022', types: [] },
    files: ['manifests.ts'],
  }));
  try {
    execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(dir, 'tsconfig.json')], { stdio: 'pipe', encoding: 'utf8' });
  } catch (error) {
    const source = readFileSync(join(dir, 'manifests.ts'), 'utf8').split('\n');
    for (const line of String((error as { stdout?: string }).stdout).split('\n').filter((l) => /error TS/.test(l))) {
      const lineNo = Number(/\((\d+),\d+\)/.exec(line)?.[1] ?? 0);
      const owner = source.slice(0, lineNo).reverse().find((l) => l.startsWith('// ')) ?? '';
      fail(owner.slice(3) || 'deploy/kubernetes', `fields: ${line.replace(/^.*error TS\d+: /, '')}`);
    }
  }
  checked.push('Kubernetes objects against their TypeScript types (unknown fields)');
}

const byKind = (kind: string) => manifests.filter((m) => m.doc.kind === kind);
const named = (kind: string, name: string) => manifests.find((m) => m.doc.kind === kind && m.doc.metadata?.name === name);
const matches = (selector: Json, labels: Json): boolean => Object.entries(selector ?? {}).every(([k, v]) => labels?.[k] === v);
const workloads = [...byKind('Deployment'), ...byKind('Job')];
const podsOf = (selector: Json) => workloads.filter((w) => matches(selector, w.doc.spec?.template?.metadata?.labels));
const configMap: Record<string, string> = named('ConfigMap', 'outbox-relay')?.doc.data ?? {};
for (const [key, value] of Object.entries(configMap)) checkEnv('deploy/kubernetes/configmap.yaml', key, value);
if (configMap.OUTBOX_HTTP_HOST !== '0.0.0.0') fail('deploy/kubernetes/configmap.yaml', 'OUTBOX_HTTP_HOST must be 0.0.0.0 (the default 127.0.0.1 is unreachable for probes and Prometheus)');
// The Secrets here are examples: placeholders only (a username is no secret), never base64 `data`.
for (const { where, doc, file } of byKind('Secret')) {
  if (file !== 'secret.example.yaml') fail(where, 'Secrets belong in secret.example.yaml, as examples');
  if (doc.data) fail(where, 'an example Secret uses stringData with CHANGE-ME placeholders, not data');
  for (const [key, value] of Object.entries(doc.stringData ?? {})) if (key !== 'username' && !String(value).includes('CHANGE-ME')) fail(where, `${key}: an example holds a CHANGE-ME placeholder, not a value`);
}

for (const { where, doc } of workloads) {
  const spec = doc.spec;
  const pod = spec.template?.spec ?? {};
  const podLabels = spec.template?.metadata?.labels ?? {};
  if (doc.kind === 'Deployment' && !matches(spec.selector?.matchLabels, podLabels)) fail(where, 'selector.matchLabels do not match the pod template labels');
  if (pod.securityContext?.runAsNonRoot !== true) fail(where, 'pod securityContext.runAsNonRoot must be true');
  if (pod.automountServiceAccountToken !== false) fail(where, 'automountServiceAccountToken must be false (no Kubernetes API access needed)');
  if (pod.serviceAccountName && !named('ServiceAccount', pod.serviceAccountName)) fail(where, `ServiceAccount ${pod.serviceAccountName} is not defined`);
  for (const c of pod.containers ?? []) {
    const cw = `${where} container ${c.name}`;
    const sc = c.securityContext ?? {};
    if (sc.readOnlyRootFilesystem !== true) fail(cw, 'readOnlyRootFilesystem must be true');
    if (sc.allowPrivilegeEscalation !== false) fail(cw, 'allowPrivilegeEscalation must be false');
    if (!sc.capabilities?.drop?.includes('ALL')) fail(cw, 'capabilities.drop must include ALL');
    if (!c.resources?.requests?.cpu || !c.resources?.requests?.memory || !c.resources?.limits?.memory) fail(cw, 'resources: cpu and memory requests and a memory limit are required');
    for (const ref of c.envFrom ?? []) {
      if (ref.configMapRef && !named('ConfigMap', ref.configMapRef.name)) fail(cw, `ConfigMap ${ref.configMapRef.name} is not defined`);
      if (ref.secretRef) fail(cw, `envFrom Secret ${ref.secretRef.name}: a Secret as environment variables; mount it as files and name them in *_FILE variables`);
    }
    for (const e of c.env ?? []) {
      checkEnv(cw, e.name, e.value);
      if (e.valueFrom?.secretKeyRef && OPTION_BY_ENV.get(e.name)?.secret) fail(cw, `${e.name} from Secret ${e.valueFrom.secretKeyRef.name} as an environment variable: mount it as a file and set ${e.name}_FILE`);
    }
    const env = { ...(c.envFrom?.some((r: Json) => r.configMapRef?.name === 'outbox-relay') ? configMap : {}), ...Object.fromEntries((c.env ?? []).map((e: Json) => [e.name, e.value])) };
    {
      const files = podFiles(cw, pod, c, (name) => named('Secret', name)?.doc, fail);
      checkFileReferences(cw, c.args ?? [], envValues(env), files, fail);
      checkLoad(cw, c.args ?? [], envValues(env), files, fail);
    }
    const portNames = new Map((c.ports ?? []).map((p: Json) => [p.name, p.containerPort]));
    // `webhooks api` serves /metrics and its probes on the API's own port, not OUTBOX_HTTP_PORT.
    const portVariable = commandOf(c.args ?? []) === 'webhooks api' ? 'OUTBOX_WEBHOOK_API_PORT' : 'OUTBOX_HTTP_PORT';
    if (c.ports?.length && env[portVariable] && !(c.ports ?? []).some((p: Json) => String(p.containerPort) === String(env[portVariable]))) {
      fail(cw, `no containerPort equals ${portVariable}=${env[portVariable]}`);
    }
    for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
      const port = c[probe]?.httpGet?.port;
      if (port !== undefined && typeof port === 'string' && !portNames.has(port)) fail(cw, `${probe} uses port "${port}", which the container does not declare`);
    }
    const flagProblem = droppedRuntimeFlag(c.command);
    if (flagProblem) fail(cw, `command ${flagProblem}`);
    const args = c.args ?? [];
    const command = commandOf(args);
    // The commands that drain on SIGTERM (the relay: in-flight events; webhooks: attempts in flight).
    if (command === 'run' || command === 'webhooks') {
      if (c.livenessProbe?.httpGet?.path !== '/healthz') fail(cw, 'livenessProbe must be GET /healthz');
      if (c.readinessProbe?.httpGet?.path !== '/readyz') fail(cw, 'readinessProbe must be GET /readyz');
      const shutdown = shutdownSeconds(env);
      if (shutdown !== null && !(pod.terminationGracePeriodSeconds > shutdown)) fail(where, `terminationGracePeriodSeconds (${pod.terminationGracePeriodSeconds ?? 30}) must exceed OUTBOX_SHUTDOWN_TIMEOUT (${shutdown}s)`);
    }
    if (command === 'run' && spec.replicas !== 2) fail(where, 'the relay runs 2 replicas (active + standby)');
    if (args[0] === 'prune' && doc.kind === 'Deployment') {
      if (spec.replicas !== 1) fail(where, 'one pruner');
      if (spec.strategy?.type !== 'Recreate') fail(where, 'strategy Recreate: never two pruners at once');
    }
  }
}
for (const { where, doc } of [...byKind('PodDisruptionBudget'), ...byKind('Service')]) {
  const selector = doc.kind === 'Service' ? doc.spec?.selector : doc.spec?.selector?.matchLabels;
  const pods = podsOf(selector);
  if (pods.length === 0) fail(where, 'selector matches no workload');
  if (doc.kind === 'Service') {
    for (const p of doc.spec?.ports ?? []) {
      if (typeof p.targetPort === 'string' && !pods.every((w: Json) => w.doc.spec.template.spec.containers.some((c: Json) => c.ports?.some((cp: Json) => cp.name === p.targetPort)))) fail(where, `targetPort ${p.targetPort} is not a port of every selected pod`);
    }
  }
}
const jobsScraped = new Set<string>();
for (const { where, doc } of byKind('PodMonitor')) {
  const pods = podsOf(doc.spec?.selector?.matchLabels);
  if (pods.length === 0) fail(where, 'selector matches no workload');
  for (const ep of doc.spec?.podMetricsEndpoints ?? []) {
    if (!pods.every((w: Json) => w.doc.spec.template.spec.containers.some((c: Json) => c.ports?.some((p: Json) => p.name === ep.port)))) fail(where, `port ${ep.port} is not a port of every selected pod`);
    const job = (ep.relabelings ?? []).find((r: Json) => r.targetLabel === 'job')?.replacement;
    if (job) jobsScraped.add(job);
  }
}
for (const job of JOBS) if (!jobsScraped.has(job)) fail('deploy/kubernetes/podmonitor.yaml', `no PodMonitor sets job="${job}" (the alerts select on it)`);
{
  const image = (kustomization.images ?? []).find((i: Json) => i.name === 'outbox-relay');
  const expected = image ? `${image.newName}:${image.newTag}` : undefined;
  for (const { where, doc, file } of workloads) {
    for (const c of doc.spec.template.spec.containers) {
      if (STANDALONE_MANIFESTS.includes(file) ? c.image !== expected : c.image !== 'outbox-relay') {
        fail(where, `image ${c.image}: expected ${STANDALONE_MANIFESTS.includes(file) ? expected : '"outbox-relay" (set by kustomization images)'}`);
      }
    }
  }
}
checked.push('Kubernetes cross-references (selectors, ports, probes, ConfigMap/Secret, security, grace period)');
checked.push('Kubernetes secrets: files from read-only Secret volumes (0400/0440), none in env; each workload loads as the relay would, as its own role');

// ---------------------------------------------------------------- alert rules

const promRule = byKind('PrometheusRule')[0];
const groups: Json[] = promRule?.doc.spec?.groups ?? [];
if (!promRule) fail('deploy/kubernetes', 'no PrometheusRule');
const runbookBase: string = promRule?.doc.metadata?.annotations?.[RUNBOOK_BASE_ANNOTATION] ?? '';
{
  const problem = runbookBaseProblem(runbookBase || undefined);
  if (problem) fail('deploy/kubernetes/prometheusrule.yaml', problem);
}
const alertNames = new Set<string>();
for (const group of groups) {
  for (const rule of group.rules ?? []) {
    const where = `deploy/kubernetes/prometheusrule.yaml alert ${rule.alert ?? rule.record}`;
    if (rule.alert) {
      if (alertNames.has(rule.alert)) fail(where, 'duplicate alert name');
      alertNames.add(rule.alert);
      if (!/^[A-Z][A-Za-z0-9]+$/.test(rule.alert)) fail(where, 'alert names are PascalCase');
      if (!['critical', 'warning'].includes(rule.labels?.severity)) fail(where, 'labels.severity must be critical or warning');
      for (const a of ['summary', 'description', 'runbook_url']) if (!rule.annotations?.[a]) fail(where, `annotation ${a} is required`);
      const runbook = runbookUrl(runbookBase, rule.alert);
      if (rule.annotations?.runbook_url !== runbook) fail(where, `runbook_url must be ${runbook} (${RUNBOOK_BASE_ANNOTATION}, then the alert's page; --runbook-base rewrites them all)`);
      if (!existsSync(join(ROOT, RUNBOOKS_DIR, `${rule.alert}.md`))) fail(where, `its runbook ${RUNBOOKS_DIR}/${rule.alert}.md does not exist`);
      for (const [k, v] of Object.entries(rule.annotations ?? {}) as [string, string][]) {
        if ((v.match(/\{\{/g) ?? []).length !== (v.match(/\}\}/g) ?? []).length) fail(where, `annotation ${k}: unbalanced {{ }}`);
      }
    }
    if (rule.for !== undefined && !DURATION.test(rule.for)) fail(where, `for: ${rule.for} is not a duration`);
    checkPromQL(where, rule.expr);
  }
}
for (const name of REQUIRED_ALERTS) if (!alertNames.has(name)) fail('deploy/kubernetes/prometheusrule.yaml', `missing alert ${name}`);
checked.push(`${alertNames.size} alerts (PromQL, metric names, labels, runbook_url ${runbookUrl(runbookBase, '<AlertName>')} and its page in ${RUNBOOKS_DIR})`);

{
  const wanted = { groups };
  const header = '# GENERATED from deploy/kubernetes/prometheusrule.yaml by `scripts/validate-deploy.sh --write-rules`.\n# Loaded by the docker-compose Prometheus (deploy/prometheus/prometheus.yml). Do not edit here.\n';
  if (process.argv.includes('--write-rules')) {
    writeFileSync(RULES_FILE, header + YAML.stringify(wanted, { lineWidth: 0 }));
    notes.push(`wrote ${rel(RULES_FILE)}`);
  }
  const actual = existsSync(RULES_FILE) ? YAML.parse(readFileSync(RULES_FILE, 'utf8')) : null;
  if (!isDeepStrictEqual(actual, wanted)) fail(rel(RULES_FILE), 'differs from the PrometheusRule: run scripts/validate-deploy.sh --write-rules');
  else checked.push('compose Prometheus rules file equal to the PrometheusRule');
}

// ---------------------------------------------------------------- Grafana dashboard

{
  let dash: Json;
  try {
    dash = JSON.parse(readFileSync(DASHBOARD, 'utf8'));
  } catch (error) {
    fail(rel(DASHBOARD), `invalid JSON: ${(error as Error).message}`);
  }
  if (dash) {
    for (const key of ['uid', 'title', 'panels', 'schemaVersion', 'templating']) if (!(key in dash)) fail(rel(DASHBOARD), `missing ${key}`);
    const ids = new Set<number>();
    let queries = 0;
    const walk = (panels: Json[] | undefined): void => {
      for (const p of panels ?? []) {
        const where = `${rel(DASHBOARD)} panel ${p.id} "${p.title}"`;
        if (ids.has(p.id)) fail(where, 'duplicate panel id');
        ids.add(p.id);
        const g = p.gridPos;
        if (!g || g.x + g.w > 24 || g.w < 1 || g.h < 1) fail(where, 'gridPos missing or wider than 24');
        if (p.type !== 'row' && p.datasource?.uid !== '${datasource}') fail(where, 'datasource must be the ${datasource} variable');
        for (const t of p.targets ?? []) {
          queries += 1;
          checkPromQL(`${where} ${t.refId}`, expandGrafana(t.expr));
        }
        walk(p.panels);
      }
    };
    walk(dash.panels);
    const vars: Json[] = dash.templating?.list ?? [];
    if (!vars.some((v) => v.type === 'datasource' && v.name === 'datasource' && v.query === 'prometheus')) fail(rel(DASHBOARD), 'needs a "datasource" variable of type prometheus');
    for (const v of vars.filter((x) => x.type === 'query')) {
      const q = typeof v.query === 'string' ? v.query : v.query?.query;
      const m = /^label_values\((.*),\s*(\w+)\)$/.exec(q ?? '');
      if (!m) fail(`${rel(DASHBOARD)} variable ${v.name}`, `expected label_values(selector, label), got ${q}`);
      else checkPromQL(`${rel(DASHBOARD)} variable ${v.name}`, expandGrafana(m[1] ?? ''));
    }
    checked.push(`dashboard: ${ids.size} panels, ${queries} queries`);
  }
}
for (const name of CONTRACT_NAMES) if (!usedMetrics.has(name)) fail('deploy/', `metric ${name} is used by no alert and no dashboard panel`);

// ---------------------------------------------------------------- docker-compose cross-checks

/** A service of the relay's image: its variables, secret files, and configuration as the relay loads it. */
function checkComposeRelay(where: string, svc: Json, secrets: Record<string, Json>): void {
  const env = svc.environment ?? {};
  for (const [key, value] of Object.entries(env)) checkEnv(where, key, value);
  const files = composeFiles(where, svc, secrets, ROOT, fail);
  checkFileReferences(where, svc.command ?? [], envValues(env), files, fail);
  checkLoad(where, svc.command ?? [], envValues(env), files, fail);
}

{
  const compose: Json = YAML.parse(readFileSync(COMPOSE, 'utf8'), { merge: true });
  const services: Record<string, Json> = compose.services ?? {};
  const secrets: Record<string, Json> = compose.secrets ?? {};
  const where = (s: string) => `docker-compose.yml service ${s}`;
  // `docker compose up` needs every secret's file.
  for (const [name, secret] of Object.entries(secrets)) if (!secret.file || !existsSync(join(ROOT, secret.file))) fail(`docker-compose.yml secret ${name}`, `file ${secret.file} does not exist`);
  for (const [name, svc] of Object.entries(services)) {
    for (const port of svc.ports ?? []) {
      const text = typeof port === 'object' ? `${port.host_ip ?? ''}:${port.published}` : String(port);
      if (!text.startsWith('127.0.0.1:')) fail(where(name), `port ${text} must be published on 127.0.0.1 only`);
    }
    const deps: Record<string, Json> = Array.isArray(svc.depends_on) ? Object.fromEntries(svc.depends_on.map((d: string) => [d, {}])) : (svc.depends_on ?? {});
    for (const [dep, opts] of Object.entries(deps)) {
      if (!services[dep]) fail(where(name), `depends_on unknown service ${dep}`);
      else if (opts.condition === 'service_healthy' && (!services[dep].healthcheck || services[dep].healthcheck.disable)) fail(where(name), `depends_on ${dep} healthy, but ${dep} has no healthcheck`);
      else if ((services[dep].profiles ?? []).length && !(svc.profiles ?? []).length) fail(where(name), `depends on ${dep}, which only runs with a profile`);
    }
    for (const vol of svc.volumes ?? []) {
      const source = String(typeof vol === 'object' ? vol.source : vol.split(':')[0]);
      if (source.startsWith('./') && !existsSync(join(ROOT, source))) fail(where(name), `bind mount source ${source} does not exist`);
    }
    const env = svc.environment ?? {};
    const isRelayImage = svc.build !== undefined;
    if (isRelayImage) {
      const flagProblem = droppedRuntimeFlag(svc.entrypoint);
      if (flagProblem) fail(where(name), `entrypoint ${flagProblem}`);
      checkComposeRelay(where(name), svc, secrets);
      const command = commandOf(svc.command ?? []);
      if ((command === 'run' || command === 'prune' || command === 'webhooks') && env.OUTBOX_HTTP_HOST !== '0.0.0.0') fail(where(name), 'OUTBOX_HTTP_HOST must be 0.0.0.0');
      const shutdown = shutdownSeconds(env);
      if ((command === 'run' || command === 'webhooks') && shutdown !== null && !(seconds(svc.stop_grace_period ?? '10s') > shutdown)) fail(where(name), 'stop_grace_period must exceed OUTBOX_SHUTDOWN_TIMEOUT');
      const port = env.OUTBOX_HTTP_PORT;
      if (port && (svc.ports ?? []).length && !(svc.ports ?? []).some((p: Json) => String(p).endsWith(`:${port}`))) fail(where(name), `no published port targets OUTBOX_HTTP_PORT=${port}`);
    }
  }
  const pg = services.postgres;
  if (!pg || !JSON.stringify(pg.command ?? '').includes('wal_level=logical')) fail(where('postgres'), 'must run with -c wal_level=logical');
  if (pg?.environment?.POSTGRES_PASSWORD !== undefined || !pg?.environment?.POSTGRES_PASSWORD_FILE) fail(where('postgres'), 'the superuser password comes from a secret file (POSTGRES_PASSWORD_FILE), not POSTGRES_PASSWORD');
  // Least privilege: one service creates the table, publication, slot and roles as the
  // superuser, and the relay, which may not, starts once it has completed; the same for the
  // webhook tables (`webhooks setup`) and the webhooks service.
  const runs = (command: string): string[] => Object.keys(services).filter((name) => services[name].build !== undefined && commandOf(services[name].command ?? []) === command);
  const [setup] = runs('setup');
  const [webhooksSetup] = runs('webhooks setup');
  const completes = (name: string, oneShot: string | undefined, seen = new Set<string>()): boolean => {
    if (seen.has(name)) return false;
    seen.add(name);
    return Object.entries(services[name]?.depends_on ?? {}).some(([dep, opts]: [string, Json]) => (dep === oneShot && opts.condition === 'service_completed_successfully') || completes(dep, oneShot, seen));
  };
  if (!setup) fail('docker-compose.yml', 'no service runs `setup --create-roles` (the quick start needs the table, publication, slot and roles)');
  else if (!completes('relay', setup)) fail(where('relay'), `must start after ${setup} completed (depends_on ... service_completed_successfully, directly or through another service)`);
  for (const name of runs('webhooks')) {
    if (!webhooksSetup) fail(where(name), 'no service runs `webhooks setup` (the webhook tables), and `webhooks` refuses to start without them');
    else if (!completes(name, webhooksSetup)) fail(where(name), `must start after ${webhooksSetup} completed (depends_on ... service_completed_successfully, directly or through another service)`);
  }
  if (services.relay?.environment?.OUTBOX_SETUP === 'true') fail(where('relay'), `OUTBOX_SETUP must not be "true": the relay's role may not create the table (${setup ?? 'a setup service'} does)`);
  if (!(services.demo?.profiles ?? []).includes('demo')) fail(where('demo'), 'runs in profile "demo"');
  if (!(services.prometheus?.profiles ?? []).includes('observability')) fail(where('prometheus'), 'runs in profile "observability"');

  // The compose Prometheus scrapes what compose runs, on the ports they listen on.
  const prom: Json = YAML.parse(readFileSync(PROM_CONFIG, 'utf8'));
  const jobs = new Map<string, Json>((prom.scrape_configs ?? []).map((j: Json) => [j.job_name, j]));
  for (const job of JOBS) if (!jobs.has(job)) fail(rel(PROM_CONFIG), `no scrape job ${job}`);
  for (const job of jobs.values()) {
    const targets = [
      ...(job.static_configs ?? []).flatMap((s: Json) => s.targets ?? []),
      ...(job.dns_sd_configs ?? []).flatMap((d: Json) => (d.names ?? []).map((n: Json) => `${n}:${d.port}`)),
    ];
    for (const t of targets) {
      const [host, port] = t.split(':');
      if (host === 'localhost') continue;
      const svc = services[host];
      if (!svc) fail(rel(PROM_CONFIG), `job ${job.job_name}: target ${t} is no compose service`);
      else if (svc.environment?.OUTBOX_HTTP_PORT && svc.environment.OUTBOX_HTTP_PORT !== port) fail(rel(PROM_CONFIG), `job ${job.job_name}: ${host} listens on ${svc.environment.OUTBOX_HTTP_PORT}, not ${port}`);
    }
  }
  for (const pattern of prom.rule_files ?? []) {
    const dir = join(dirname(PROM_CONFIG), dirname(pattern));
    const re = new RegExp(`^${pattern.split('/').pop().replace(/\./g, '\\.').replace(/\*/g, '.*')}$`);
    if (!existsSync(dir) || !readdirSync(dir).some((f) => re.test(f))) fail(rel(PROM_CONFIG), `rule_files ${pattern} matches no file`);
  }
  checked.push(`docker-compose.yml: ${Object.keys(services).length} services (ports, depends_on, mounts, env, secret files, setup before the relay and webhooks, grace period); Prometheus scrape targets`);

  // The override adds TLS and SASL to the relay services: checked as compose merges it
  // (environment by key, secrets appended). Its files are the operator's: they need not exist here.
  const secured: Json = YAML.parse(readFileSync(COMPOSE_SECURED, 'utf8'), { merge: true });
  const allSecrets = { ...secrets, ...secured.secrets };
  for (const [name, svc] of Object.entries<Json>(secured.services ?? {})) {
    const base = services[name];
    const at = `${rel(COMPOSE_SECURED)} service ${name}`;
    if (!base) {
      fail(at, 'no such service in docker-compose.yml');
      continue;
    }
    checkComposeRelay(at, { ...base, environment: { ...base.environment, ...svc.environment }, secrets: [...(base.secrets ?? []), ...(svc.secrets ?? [])] }, allSecrets);
  }
  checked.push(`${rel(COMPOSE_SECURED)} merged over docker-compose.yml: variables, secret files, configuration as the relay loads it`);
}

// ---------------------------------------------------------------- image build context

/**
 * Every file the Dockerfile copies from the build context is let through by .dockerignore (which
 * starts from `*`): a COPY of a file it leaves out fails only when an image is built, which
 * nothing here does. Patterns as Docker reads them, the last match deciding; a pattern that
 * matches a folder matches what is in it.
 */
{
  const dockerfile = join(ROOT, 'Dockerfile');
  const ignoreFile = join(ROOT, '.dockerignore');
  const rules = readFileSync(ignoreFile, 'utf8').split('\n').map((line) => line.trim()).filter((line) => line !== '' && !line.startsWith('#')).map((line) => {
    const pattern = line.replace(/^!/, '').replace(/\/$/, '');
    const regex = new RegExp(`^${pattern.split('**').map((part) => part.split('*').map((text) => text.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('[^/]*')).join('.*')}$`);
    return { include: line.startsWith('!'), regex };
  });
  const sent = (path: string): boolean => {
    const parents = path.split('/').map((_, i, parts) => parts.slice(0, i + 1).join('/'));
    let included = true;
    for (const rule of rules) if (parents.some((parent) => rule.regex.test(parent))) included = rule.include;
    return included;
  };
  const copies = readFileSync(dockerfile, 'utf8').split('\n').filter((line) => /^COPY\s/.test(line) && !/--from=/.test(line));
  const sources = copies.flatMap((line) => line.trim().split(/\s+/).slice(1, -1).filter((word) => !word.startsWith('--')));
  for (const source of sources) {
    const path = source.replace(/^\.\//, '').replace(/\/$/, '');
    if (!existsSync(join(ROOT, path))) fail(rel(dockerfile), `COPY ${source}: no such file`);
    else if (!sent(path)) fail(rel(ignoreFile), `leaves out ${path}, which the Dockerfile copies (add !${path})`);
  }
  checked.push(`Dockerfile: ${sources.length} files and folders copied from the build context, each let through by .dockerignore`);
}

// ---------------------------------------------------------------- report

for (const line of checked) console.log(`  check ${line}`);
for (const line of notes) console.log(`  note  ${line}`);
if (errors.length > 0) {
  for (const line of errors) console.log(`  FAIL  ${line}`);
  console.log(`validate-deploy: ${errors.length} problem(s)`);
  process.exit(1);
}
