/** W3C Trace Context (https://www.w3.org/TR/trace-context/): the header names and their shape. */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/**
 * Why `value` is not a usable `traceparent`, or undefined when it is. Version `ff`, an all-zero
 * trace id or parent id are invalid; a future version may carry more fields after a dash.
 */
export function traceparentProblem(value: string): string | undefined {
  const match = TRACEPARENT.exec(value);
  if (!match) return 'expected "00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>" (lowercase)';
  const [, version, traceId, parentId, , rest] = match;
  if (version === 'ff') return 'version ff is invalid';
  if (version === '00' && rest !== undefined) return 'version 00 has exactly four fields';
  if (/^0+$/.test(traceId!)) return 'the trace id is all zeros';
  if (/^0+$/.test(parentId!)) return 'the parent id is all zeros';
  return undefined;
}
