import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { freePort } from './ports.js';

const run = promisify(execFile);
const STACK_SCRIPT = fileURLToPath(new URL('../../scripts/stack.sh', import.meta.url));

/**
 * A single Kafka node of the test's own, for a broker setting the shared one must not have
 * (`auto.create.topics.enable=false`, as managed Kafka services run). Like the three-broker
 * cluster, it always comes from the stack script (Java and the cached jars, no Docker), in a
 * state directory of its own on free ports, and is removed by `stop`.
 */
export class OwnBroker {
  brokers = '';
  private stackDir = '';

  constructor(private readonly settings: { readonly autoCreateTopics: boolean }) {}

  async start(): Promise<void> {
    this.stackDir = await mkdtemp(join(tmpdir(), 'outbox-own-broker-'));
    const [port, controllerPort] = [await freePort(), await freePort()];
    await run(STACK_SCRIPT, ['up', 'kafka'], { env: { ...process.env, ...this.env(), OUTBOX_KAFKA_PORT: String(port), OUTBOX_KAFKA_CONTROLLER_PORT: String(controllerPort) } });
    this.brokers = `127.0.0.1:${port}`;
  }

  async stop(): Promise<void> {
    if (!this.stackDir) return;
    await run(STACK_SCRIPT, ['down', 'kafka'], { env: { ...process.env, ...this.env() } }).catch(() => undefined);
    await rm(this.stackDir, { recursive: true, force: true });
  }

  private env(): Record<string, string> {
    return { OUTBOX_STACK_DIR: this.stackDir, OUTBOX_KAFKA_AUTO_CREATE: String(this.settings.autoCreateTopics) };
  }
}
