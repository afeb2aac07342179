// Where each alert's runbook is: docs/runbooks/<AlertName>.md, linked by an absolute URL (a
// relative one is dead in Alertmanager, Slack or a pager). The base of those URLs is declared
// once, as an annotation of the PrometheusRule, and `--runbook-base <url>` rewrites it with every
// runbook_url (and the alert tests' expectations), for a fork or an internal Git host.

/** The PrometheusRule's annotation that holds the base; each runbook_url is `<base>/<AlertName>.md`. */
export const RUNBOOK_BASE_ANNOTATION = 'outbox-relay/runbook-base';

export const RUNBOOKS_DIR = 'docs/runbooks';

export function runbookUrl(base: string, alert: string): string {
  return `${base.replace(/\/+$/, '')}/${alert}.md`;
}

/** Why `base` cannot be a runbook base, or null. */
export function runbookBaseProblem(base: unknown): string | null {
  if (typeof base !== 'string' || base === '') return `metadata.annotations["${RUNBOOK_BASE_ANNOTATION}"] is required: the URL the runbook pages are browsable under, e.g. https://github.com/<owner>/<repo>/blob/main/${RUNBOOKS_DIR}`;
  try {
    const url = new URL(base);
    if (url.protocol === 'https:' || url.protocol === 'http:') return null;
  } catch {
    // Below.
  }
  return `runbook base ${JSON.stringify(base)} is not an absolute http(s) URL`;
}

/**
 * A rules file's text with `base` in every runbook_url (and as the base annotation, where the
 * file has it), edited line by line so that comments and layout stay. Each runbook_url belongs
 * to the alert named last above it: `- alert: X` in the PrometheusRule, `alertname: X` in
 * promtool's tests (scripts/validate-deploy/alerts.test.yml), which compare the annotations.
 */
export function withRunbookBase(text: string, base: string): string {
  const annotation = new RegExp(`^(\\s*${RUNBOOK_BASE_ANNOTATION.replace(/[/.]/g, '\\$&')}:\\s*).*$`);
  let alert: string | null = null;
  return text
    .split('\n')
    .map((line) => {
      alert = /^\s*(?:- alert|alertname):\s*(\S+)\s*$/.exec(line)?.[1] ?? alert;
      const declared = annotation.exec(line);
      if (declared) return `${declared[1]}${base}`;
      const url = /^(\s*runbook_url:\s*).*$/.exec(line);
      if (!url) return line;
      if (alert === null) throw new Error('a runbook_url before any alert is named');
      return `${url[1]}${runbookUrl(base, alert)}`;
    })
    .join('\n');
}
