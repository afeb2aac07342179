import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { missingRuntimeFlag, SEMI_SPACE_FLAG } from './runtime-flags.js';

const file = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

describe('the semi-space flag', () => {
  it('is missing when neither the command line nor NODE_OPTIONS gives a size', () => {
    expect(missingRuntimeFlag([], undefined)).toMatch(/node runs without --max-semi-space-size=16: .*NODE_OPTIONS=--max-semi-space-size=16/);
    expect(missingRuntimeFlag(['--max-old-space-size=384'], '--enable-source-maps')).not.toBeNull();
  });

  it('is there in any spelling V8 takes, with any size, from either place', () => {
    for (const execArgv of [[SEMI_SPACE_FLAG], ['--max_semi_space_size=32'], ['--max-semi-space-size', '8']]) expect(missingRuntimeFlag(execArgv, undefined)).toBeNull();
    expect(missingRuntimeFlag([], `--max-old-space-size=384 ${SEMI_SPACE_FLAG}`)).toBeNull();
  });

  it('is passed by every way of starting the relay: the bin, the image, npm start, scripts/dev.sh', () => {
    expect(file('src/cli.ts').split('\n')[0]).toBe(`#!/usr/bin/env -S node ${SEMI_SPACE_FLAG}`);
    expect(file('Dockerfile')).toContain(`ENTRYPOINT ["node", "${SEMI_SPACE_FLAG}", "dist/cli.js"]`);
    const scripts = (JSON.parse(file('package.json')) as { scripts: Record<string, string> }).scripts;
    expect(scripts.start).toBe(`node ${SEMI_SPACE_FLAG} dist/cli.js run`);
    expect(file('scripts/dev.sh')).toContain(`exec node ${SEMI_SPACE_FLAG} dist/cli.js run`);
  });
});
