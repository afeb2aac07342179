import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { inject } from 'vitest';
import type { ServiceName } from './services.js';

const run = promisify(execFile);

/**
 * Stops, kills and starts a service for fault tests. Fails (never skips) when the services
 * belong to someone else, saying how to run the fault tests instead.
 */
export async function serviceAction(action: 'stop' | 'kill' | 'start' | 'freeze' | 'thaw', service: ServiceName): Promise<void> {
  const control = inject('services').control;
  switch (control.kind) {
    case 'stack': {
      const name = service === 'pg' ? control.postgres : service;
      // Frozen: the process stops (SIGSTOP) with its sockets open, as a hung server or a long
      // GC pause; nothing answers until it is thawed (SIGCONT).
      if (action === 'freeze' || action === 'thaw') {
        process.kill(Number((await readFile(`${control.stackDir}/${name}.pid`, 'utf8')).trim()), action === 'freeze' ? 'SIGSTOP' : 'SIGCONT');
        return;
      }
      await run(control.script, [action, name], { timeout: 180_000 });
      return;
    }
    case 'docker': {
      const id = control.containers[service];
      const command = action === 'kill' ? ['kill', '--signal', 'KILL', id] : action === 'freeze' ? ['pause', id] : action === 'thaw' ? ['unpause', id] : [action, id];
      await run('docker', command, { timeout: 180_000 });
      return;
    }
    case 'none':
      throw new Error(`this fault test must ${action} ${service}, but ${control.reason}; unset them so the tests run their own services (scripts/stack.sh or Docker)`);
  }
}
