import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { RUNBOOK_BASE_ANNOTATION, runbookUrl, withRunbookBase } from '../scripts/validate-deploy/runbooks.js';

const file = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');
const RULE = file('deploy/kubernetes/prometheusrule.yaml');
const TESTS = file('scripts/validate-deploy/alerts.test.yml');

interface Rule {
  metadata: { annotations: Record<string, string> };
  spec: { groups: { rules: { alert?: string; annotations?: { runbook_url?: string } }[] }[] };
}
const alertsOf = (text: string) => (YAML.parse(text) as Rule).spec.groups.flatMap((group) => group.rules.filter((rule) => rule.alert));

describe('runbook URLs', () => {
  it("are absolute: the PrometheusRule's runbook base, then the alert's page", () => {
    const base = (YAML.parse(RULE) as Rule).metadata.annotations[RUNBOOK_BASE_ANNOTATION]!;
    expect(base).toMatch(/^https:\/\/.*\/docs\/runbooks$/);
    for (const rule of alertsOf(RULE)) expect(rule.annotations?.runbook_url).toBe(runbookUrl(base, rule.alert!));
  });

  it('move to another base with every runbook_url, in the rules and in their tests, the rest of each file as it was', () => {
    const base = 'https://git.example.com/platform/outbox-relay/-/blob/main/docs/runbooks/';
    const moved = withRunbookBase(RULE, base);
    expect((YAML.parse(moved) as Rule).metadata.annotations[RUNBOOK_BASE_ANNOTATION]).toBe(base);
    for (const rule of alertsOf(moved)) expect(rule.annotations?.runbook_url).toBe(`https://git.example.com/platform/outbox-relay/-/blob/main/docs/runbooks/${rule.alert}.md`);
    const unchanged = (text: string) => text.split('\n').filter((line) => !/runbook_url:|runbook-base:/.test(line));
    expect(unchanged(moved)).toEqual(unchanged(RULE));
    const tests = withRunbookBase(TESTS, base);
    expect(tests).not.toBe(TESTS);
    expect(tests.match(/runbook_url: (\S+)/g)?.every((line) => line.startsWith(`runbook_url: ${base}`))).toBe(true);
    // And back: the files in the repository are what the default base writes.
    const original = (YAML.parse(RULE) as Rule).metadata.annotations[RUNBOOK_BASE_ANNOTATION]!;
    expect(withRunbookBase(moved, original)).toBe(RULE);
    expect(withRunbookBase(tests, original)).toBe(TESTS);
  });
});
