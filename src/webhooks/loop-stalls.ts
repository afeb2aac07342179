import { RelayError } from '../errors.js';

/**
 * A test hook, not an option: OUTBOX_WEBHOOK_TEST_LOOP_STALLS=<min>-<max>ms holds the webhooks
 * process's event loop (a busy wait on the main thread) for a random <min>–<max> ms, every few
 * tens of milliseconds at random: the late event loop of a process on a loaded node, on demand.
 * test/webhooks/endpoint-gate.test.ts runs the endpoint gate under it. Unset in production.
 */
export const LOOP_STALLS_ENV = 'OUTBOX_WEBHOOK_TEST_LOOP_STALLS';

/** Starts the stalls `spec` asks for (none when unset); returns what stops them. */
export function stallLoopAtRandom(spec: string | undefined, random: () => number = Math.random): () => void {
  if (spec === undefined || spec === '') return () => undefined;
  const match = /^(\d+)-(\d+)ms$/.exec(spec);
  if (!match || Number(match[1]) > Number(match[2])) throw new RelayError('CONFIG_INVALID', `${LOOP_STALLS_ENV}=${spec}: expected <min>-<max>ms (a test hook: leave it unset)`);
  const [min, max] = [Number(match[1]), Number(match[2])];
  let timer: NodeJS.Timeout;
  const next = () => {
    timer = setTimeout(() => {
      const until = performance.now() + min + random() * (max - min);
      while (performance.now() < until) {
        // Held: nothing else on this thread runs meanwhile.
      }
      next();
    }, Math.round(random() * 2 * max));
    timer.unref();
  };
  next();
  return () => clearTimeout(timer);
}
