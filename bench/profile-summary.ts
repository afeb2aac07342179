/**
 * `npx tsx bench/profile-summary.ts <file.cpuprofile> [--top N]`: where a relay's CPU went, from a
 * profile `npm run bench -- --profile` wrote (node_modules/.cache/outbox-relay-bench/profiles):
 * self time by function and by where the code lives (the relay's stages, kafkajs, librdkafka's
 * binding, Node itself), as shares of the profile's samples.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
}

interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

/** Where a function's code lives, coarse enough to read: a stage of the relay, a package, or Node. */
function place(url: string, name: string): string {
  if (url === '') return name === '(garbage collector)' || name === '(program)' || name === '(idle)' ? name : '(native)';
  const inRepo = /\/(src|dist)\/([^/]+)\//.exec(url);
  if (inRepo && !url.includes('node_modules')) return `relay ${inRepo[2]}`;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1]!;
  return url.startsWith('node:') ? 'node' : url;
}

const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '15' } } });
const file = positionals[0];
if (!file) {
  process.stderr.write('usage: npx tsx bench/profile-summary.ts <file.cpuprofile> [--top N]\n');
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const selfByFunction = new Map<string, number>();
const selfByPlace = new Map<string, number>();
let total = 0;
profile.samples.forEach((id, index) => {
  const delta = profile.timeDeltas[index] ?? 0;
  const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
  if (functionName === '(idle)') return;
  total += delta;
  const where = place(url, functionName);
  const fn = `${functionName || '(anonymous)'} ${where}${url ? `:${lineNumber + 1}` : ''}`;
  selfByFunction.set(fn, (selfByFunction.get(fn) ?? 0) + delta);
  selfByPlace.set(where, (selfByPlace.get(where) ?? 0) + delta);
});
const share = (us: number) => `${((us / total) * 100).toFixed(1)}%`;
const top = Number(values.top);
process.stdout.write(`${file}: ${(total / 1e6).toFixed(2)} s of CPU sampled (idle left out)\n\nby where the code lives:\n`);
for (const [where, us] of [...selfByPlace].sort((a, b) => b[1] - a[1]).slice(0, top)) process.stdout.write(`  ${share(us).padStart(6)}  ${where}\n`);
process.stdout.write('\nby function (self time):\n');
for (const [fn, us] of [...selfByFunction].sort((a, b) => b[1] - a[1]).slice(0, top)) process.stdout.write(`  ${share(us).padStart(6)}  ${fn}\n`);
