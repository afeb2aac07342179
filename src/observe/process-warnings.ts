/**
 * kafkajs's request queue schedules `throttledUntil - Date.now()` with `throttledUntil = -1`
 * when nothing is throttled, a negative delay that Node (since 23) reports on stderr as a
 * TimeoutNegativeWarning — outside the JSON log, on every connection — before using 1 ms, which
 * is what kafkajs means. That one warning is dropped; every other goes out as before.
 */
export function dropKafkajsTimerWarning(): void {
  const emitWarning = process.emitWarning.bind(process);
  process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
    const type = typeof rest[0] === 'string' ? rest[0] : (rest[0] as { type?: string } | undefined)?.type;
    const name = warning instanceof Error ? warning.name : type;
    if (name === 'TimeoutNegativeWarning') return;
    (emitWarning as (...args: unknown[]) => void)(warning, ...rest);
  }) as typeof process.emitWarning;
}
