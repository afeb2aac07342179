import type { IHeaders } from '../kafka/kafkajs/kafkajs.js';

/**
 * kafkajs 2.2.4 decodes a record's headers by merging them into a plain object
 * (src/protocol/recordBatch/record/v0/decoder.js): `obj[key] === undefined ? value :
 * Array.isArray(obj[key]) ? obj[key].concat([value]) : [obj[key], value]`. A header named like a
 * member of Object.prototype finds the inherited member first, so `constructor: "c"` arrives as
 * `[Object, <c>]`, `__proto__` as `[Object.prototype, <p>]`, a second `toString` as
 * `[<Function toString>, <t1>, <t2>]`.
 *
 * The merge loses nothing: the inherited member is always the array's first element, and a
 * header value is never a function or Object.prototype (it is a Buffer or null). So the headers
 * are repaired here, on what kafkajs delivered, and kafkajs itself is left as the application has
 * it (an earlier version replaced its decoder in the module cache, for every consumer of the process).
 */

type HeaderValue = IHeaders[string];

/** What a fresh object literal finds under `name` before it has an own property of that name. */
function inherited(name: string): unknown {
  return ({} as Record<string, unknown>)[name];
}

/** kafkajs's headers with the merge undone: each header as produced, a repeated name as an array (as kafkajs gives it). */
export function repairHeaders(headers: IHeaders | undefined): IHeaders {
  const repaired = Object.create(null) as IHeaders;
  for (const name of Object.keys(headers ?? {})) {
    let value = Object.getOwnPropertyDescriptor(headers, name)!.value as HeaderValue;
    const member = inherited(name);
    if (member !== undefined && Array.isArray(value) && (value[0] as unknown) === member) {
      const produced = value.slice(1);
      value = produced.length === 1 ? produced[0] : produced;
    }
    repaired[name] = value;
  }
  return repaired;
}

/** Header values as text (a repeated name's values joined by commas), repaired, in an object without a prototype. */
export function headerText(headers: IHeaders | undefined): Record<string, string> {
  const result = Object.create(null) as Record<string, string>;
  const repaired = repairHeaders(headers);
  for (const name of Object.keys(repaired)) {
    const value = repaired[name];
    if (value === undefined) continue;
    result[name] = Array.isArray(value) ? value.map(String).join(',') : String(value);
  }
  return result;
}
