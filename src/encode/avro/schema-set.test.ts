import { mkdtemp, mkdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadSchemaSet } from './schema-set.js';
import { toEpochMillis } from './logical-types.js';

async function dirWith(files: Record<string, unknown>): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'schemas-'));
  for (const [name, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, name)), { recursive: true });
    await writeFile(path.join(dir, name), typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  }
  return dir;
}

const record = (name: string, fields: unknown[]) => ({ type: 'record', name, namespace: 'com.example', fields });

describe('loadSchemaSet', () => {
  it('maps each file name to its event type, at any depth, and ships a valid billing set', async () => {
    const billing = await loadSchemaSet('schemas');
    expect(billing.problems).toEqual([]);
    expect([...billing.byEventType.keys()].sort()).toEqual(['invoice.paid', 'payment.failed', 'refund.completed', 'subscription.canceled', 'subscription.created', 'subscription.renewed']);
    expect(billing.byEventType.get('invoice.paid')).toMatchObject({ file: 'schemas/billing/invoice.paid.avsc', fullName: 'com.example.billing.InvoicePaid' });
  });

  it('reports every problem with its file and path', async () => {
    const dir = await dirWith({
      'a/no.namespace.avsc': { type: 'record', name: 'X', fields: [] },
      'bad.default.avsc': record('D', [{ name: 'ok', type: 'string' }, { name: 'amount_cents', type: 'long', default: 'x' }]),
      'bad.items.avsc': record('I', [{ name: 'lines', type: { type: 'array', items: { type: 'record', name: 'L', fields: [{ name: 'q', type: 'integer' }] } } }]),
      'money.avsc': record('M', [{ name: 'amount', type: { type: 'bytes', logicalType: 'decimal', precision: 10, scale: 2 } }]),
      'ts.avsc': record('T', [{ name: 'at', type: { type: 'string', logicalType: 'timestamp-millis' } }]),
      'broken.avsc': '{"type": "record",\n  "name": }',
      'x/dup.avsc': record('Dup1', []),
      'y/dup.avsc': record('Dup2', []),
    });
    const { problems, byEventType } = await loadSchemaSet(dir);
    const byFile = Object.fromEntries(problems.map((problem) => [path.relative(dir, problem.file), `${problem.path}: ${problem.message}`]));
    expect(byFile['a/no.namespace.avsc']).toMatch(/^\(root\): the record needs a namespace/);
    expect(byFile['bad.default.avsc']).toMatch(/^amount_cents: .*default "x"/);
    expect(byFile['bad.items.avsc']).toMatch(/^lines\.items\.q: .*integer/);
    expect(byFile['money.avsc']).toMatch(/^amount: logicalType "decimal" is not supported/);
    expect(byFile['ts.avsc']).toMatch(/^at: timestamp-millis must annotate a long/);
    expect(byFile['broken.avsc']).toMatch(/not valid JSON/);
    expect(byFile['y/dup.avsc']).toMatch(/event type "dup" already has a schema in .*x\/dup\.avsc/);
    expect([...byEventType.keys()]).toEqual(['dup']);
  });
});

describe('timestamp-millis input', () => {
  it.each([
    [0, 0],
    [1_709_287_200_000, 1_709_287_200_000],
    ['2024-03-01T10:00:00Z', 1_709_287_200_000],
    ['2024-03-01T11:00:00.000+01:00', 1_709_287_200_000],
    [new Date(5), 5],
    ['2024-03-01T10:00:00', undefined],
    ['2024-03-01', undefined],
    ['yesterday', undefined],
    [1.5, undefined],
    [2 ** 53, undefined],
    [null, undefined],
  ])('%s -> %s', (input, expected) => {
    expect(toEpochMillis(input)).toBe(expected);
  });
});
