import { run } from './proc.js';

/** The commit dist/ was built from, and what of src/ and sql/ differs from it (dist/ is built from the working tree). */
export async function sourceState(repo: string): Promise<string> {
  const commit = (await run('git', ['rev-parse', '--short', 'HEAD'], { cwd: repo })).trim();
  const changed = (await run('git', ['status', '--porcelain', '--', 'src', 'sql'], { cwd: repo })).split('\n').filter(Boolean).map((line) => line.slice(3));
  return changed.length === 0 ? commit : `${commit} with uncommitted changes to ${changed.join(', ')}`;
}
