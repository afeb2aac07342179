// The compose stage (scripts/test-compose.sh, issue 65): docker-compose.yml started, fed and
// faulted on the images built on this machine (deploy/compose/local-images.yml), one step after
// the other on the same stack.
import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { PORTS, Receiver, TopicWatcher, compose, containers, database, docker, insertInvoices, isActive, secret, until } from './compose.js';

const ONE_SHOT = new Set(['setup', 'webhooks-setup', 'role-passwords']);
const ALL_PROFILES = ['--profile', 'standby', '--profile', 'observability'];
const CUSTOMER = 'cus_compose';

const figures: Record<string, unknown> = {};
const watcher = new TopicWatcher();
const receiver = new Receiver();
let db: pg.Client | undefined;

const seconds = (ms: number): number => Math.round(ms / 100) / 10;

/** Every container up and healthy (those with a healthcheck), the one-shot ones exited 0. */
async function allHealthy(timeoutMs: number): Promise<void> {
  await until('every container healthy', timeoutMs, async () => {
    const states = await containers();
    const waiting = states.filter((s) => (ONE_SHOT.has(s.service) ? s.status !== 'exited' || s.exitCode !== 0 : s.status !== 'running' || (s.health !== null && s.health !== 'healthy')));
    if (waiting.length === 0 && states.length > 0) return true;
    // Thrown, so that a timeout names them.
    throw new Error(`waiting for ${waiting.map((s) => `${s.service} ${s.status}/${s.health ?? 'no healthcheck'}/exit ${s.exitCode}`).join(', ')}`);
  }, 2_000);
}

beforeAll(async () => {
  // What an earlier, interrupted run left.
  await compose([...ALL_PROFILES, 'down', '-v', '--remove-orphans']);
});

afterAll(async () => {
  await watcher.stop().catch(() => undefined);
  await receiver.close().catch(() => undefined);
  await db?.end().catch(() => undefined);
  if ((await containers().catch(() => [])).length > 0) {
    console.log(await compose(['ps']).catch((error: Error) => error.message));
    console.log(await compose([...ALL_PROFILES, 'logs', '--tail=40']).catch((error: Error) => error.message));
    await compose([...ALL_PROFILES, 'down', '-v', '--remove-orphans']).catch(() => undefined);
  }
  console.log(`compose figures: ${JSON.stringify(figures)}`);
  if (process.env.OUTBOX_COMPOSE_FIGURES) writeFileSync(process.env.OUTBOX_COMPOSE_FIGURES, `${JSON.stringify(figures, null, 2)}\n`);
});

describe('docker compose (issue 65)', () => {
  it('builds the relay image from the Dockerfile', async () => {
    const started = Date.now();
    await compose(['build']);
    figures.relayImageBuildSeconds = seconds(Date.now() - started);
    const size = Number(await docker(['image', 'inspect', '--format', '{{.Size}}', 'outbox-relay:dev']));
    figures.relayImageMB = Math.round(size / 1e6);
    expect(size).toBeGreaterThan(0);
  });

  it('up -d --build: the first event reaches Kafka, every container becomes healthy', async () => {
    const started = Date.now();
    await compose(['up', '-d', '--build']);
    figures.upReturnedSeconds = seconds(Date.now() - started);
    db = database();
    await db.connect();
    const first = await insertInvoices(db, 'first', 0, 1, CUSTOMER);
    await watcher.start();
    await watcher.waitFor(first, 120_000);
    figures.upToFirstEventSeconds = seconds((watcher.arrived.get(first[0]!) ?? 0) - started);
    await allHealthy(180_000);
    figures.upToAllHealthySeconds = seconds(Date.now() - started);
  });

  it('delivers events to a customer endpoint added through the API', async () => {
    const network = JSON.parse(await docker(['network', 'inspect', 'outbox-relay_default'])) as { IPAM: { Config: { Gateway: string }[] } }[];
    const gateway = network[0]?.IPAM.Config[0]?.Gateway;
    expect(gateway).toBeDefined();
    const url = await receiver.listen(gateway!);
    const response = await fetch(`http://127.0.0.1:${PORTS.api}/v1/endpoints`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret('webhook-api-token')}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url, eventTypes: ['invoice.*'], customerId: CUSTOMER }),
    });
    expect(response.status, await response.clone().text()).toBe(201);
    // The webhooks service picks the new endpoint up at its next subscriptions reload.
    let probe = 0;
    await until('a first delivery to the new endpoint', 120_000, async () => {
      if (receiver.deliveries.length > 0) return true;
      await insertInvoices(db!, 'hook-probe', probe++, 1, CUSTOMER);
      return undefined;
    }, 3_000);
    const ids = await insertInvoices(db!, 'hook', 0, 20, CUSTOMER);
    await until('20 deliveries', 60_000, async () => (receiver.invoices(ids).size === ids.length ? true : undefined), 500);
    const signed = receiver.deliveries.find((delivery) => delivery.body.includes('"hook-0"'));
    expect(signed?.headers['webhook-id']).toBeTruthy();
    expect(signed?.headers['webhook-signature']).toMatch(/^v1,/);
    figures.webhookDeliveries = receiver.deliveries.length;
  });

  it('status through `exec relay`', async () => {
    const status = await compose(['exec', '-T', 'relay', 'node', 'dist/cli.js', 'status']);
    expect(status).toMatch(/^slot\s+outbox_relay$/m);
    expect(status).toMatch(/^active reader\s+pid \d+/m);
    expect(status).not.toContain('MISSING');
  });

  it('kill relay, then up again: nothing lost', async () => {
    const ids = await insertInvoices(db!, 'restart-before', 0, 100, CUSTOMER);
    await compose(['kill', 'relay']);
    ids.push(...(await insertInvoices(db!, 'restart-down', 0, 100, CUSTOMER)));
    const started = Date.now();
    await compose(['up', '-d']);
    ids.push(...(await insertInvoices(db!, 'restart-after', 0, 100, CUSTOMER)));
    await watcher.waitFor(ids, 180_000);
    figures.restart = { events: ids.length, lost: watcher.missing(ids).length, upToAllDeliveredSeconds: seconds(Date.now() - started) };
    await allHealthy(120_000);
  });

  it('standby profile: the standby takes over when the active relay is killed', async () => {
    await compose([...['--profile', 'standby'], 'up', '-d']);
    await allHealthy(180_000);
    expect(await isActive(PORTS.relay)).toBe(true);
    expect(await isActive(PORTS.standby)).toBe(false);
    const ids: string[] = [];
    let writing = true;
    const writer = (async () => {
      for (let batch = 0; writing && batch < 1_200; batch += 1) {
        ids.push(...(await insertInvoices(db!, 'failover', batch * 5, 5, CUSTOMER)));
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const killed = Date.now();
    await compose(['kill', 'relay']);
    await until('the standby active', 120_000, async () => ((await isActive(PORTS.standby)) ? true : undefined), 250);
    const takeover = Date.now() - killed;
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    writing = false;
    await writer;
    await watcher.waitFor(ids, 120_000);
    figures.failover = { events: ids.length, lost: watcher.missing(ids).length, takeoverSeconds: seconds(takeover) };
  });

  it('observability profile: Prometheus scrapes the relays', async () => {
    await compose(['--profile', 'observability', 'up', '-d', 'prometheus']);
    const query = encodeURIComponent('outbox_relay_state{job="outbox-relay",state="active"} == 1');
    const scraped = await until('an active relay in Prometheus', 120_000, async () => {
      const answer = (await (await fetch(`http://127.0.0.1:${PORTS.prometheus}/api/v1/query?query=${query}`)).json()) as { data?: { result?: { metric: Record<string, string> }[] } };
      const result = answer.data?.result ?? [];
      return result.length > 0 ? result : undefined;
    }, 2_000);
    figures.prometheusActiveRelay = scraped.map((series) => series.metric.service);
  });

  it('down -v leaves nothing running', async () => {
    await db?.end();
    db = undefined;
    await compose([...ALL_PROFILES, 'down', '-v', '--remove-orphans']);
    expect(await containers()).toEqual([]);
    expect(await docker(['volume', 'ls', '-q', '--filter', 'label=com.docker.compose.project=outbox-relay'])).toBe('');
    expect(await docker(['network', 'ls', '-q', '--filter', 'label=com.docker.compose.project=outbox-relay'])).toBe('');
  });
});
