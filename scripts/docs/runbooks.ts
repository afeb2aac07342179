// docs/runbooks/README.md: the index of the runbooks, one page per alert, from the alert rules.
import { readFileSync } from 'node:fs';
import YAML from 'yaml';
import { cell, table } from './markdown.js';

const RULES = new URL('../../deploy/kubernetes/prometheusrule.yaml', import.meta.url);

export const RUNBOOKS_INTRO = `# Runbooks

One page per alert: what it means, how to confirm it, what to do. Each alert's \`runbook_url\`
links its page.`;

interface Alert {
  readonly alert: string;
  readonly labels: { readonly severity: string };
  readonly annotations: { readonly summary: string };
}

/** Every alert of the PrometheusRule, by group, as Prometheus loads them. */
export function alerts(): { readonly group: string; readonly alert: Alert }[] {
  const rule = YAML.parse(readFileSync(RULES, 'utf8')) as { spec: { groups: { name: string; rules: (Alert | { record: string })[] }[] } };
  return rule.spec.groups.flatMap((group) => group.rules.filter((each): each is Alert => 'alert' in each).map((alert) => ({ group: group.name, alert })));
}

/** A summary without its template ({{ $value | humanize }}): the value is the alert's, not the page's. */
const plain = (summary: string) => summary.replace(/\{\{.*?\}\}/g, '…');

/** The generated part of docs/runbooks/README.md. */
export function runbooksIndex(): string {
  const rows = alerts().map(({ group, alert }) => [`[${alert.alert}](${alert.alert}.md)`, alert.labels.severity, group, cell(plain(alert.annotations.summary))]);
  return [
    '_Generated from `deploy/kubernetes/prometheusrule.yaml` by `npm run docs`: edit that, not this part of the page._',
    table(['Alert', 'Severity', 'Group', 'Summary'], rows),
  ].join('\n\n');
}
