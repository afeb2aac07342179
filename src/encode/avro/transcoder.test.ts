import avro from 'avsc';
import { describe, expect, it } from 'vitest';
import { FOR_SCHEMA_OPTIONS } from './logical-types.js';
import { loadSchemaSet } from './schema-set.js';
import { JsonReader } from './json-reader.js';
import { BODY_AT, compileTranscoder } from './transcoder.js';

/**
 * The transcoder against avsc, on random records: for any JSON text, it gives exactly the bytes
 * avsc encodes from JSON.parse of that text when avsc's strict check takes it, and nothing
 * (null: the parsing path decides) when it does not.
 */

/** Every shape the schemas may hold: unions (with a logical branch), nested and recursive records, arrays, maps, enums, numbers of each kind. */
const SHAPES: avro.Schema = {
  type: 'record',
  name: 'Shapes',
  namespace: 'test',
  fields: [
    { name: 'i', type: 'int' },
    { name: 'l', type: 'long' },
    { name: 'f', type: 'float' },
    { name: 'd', type: 'double' },
    { name: 'b', type: 'boolean' },
    { name: 's', type: 'string' },
    { name: 'u', type: { type: 'string', logicalType: 'uuid' } },
    { name: 'n', type: 'null' },
    { name: 'e', type: { type: 'enum', name: 'Color', symbols: ['RED', 'GREEN', 'BLUE_2'] } },
    { name: 'ts', type: { type: 'long', logicalType: 'timestamp-millis' } },
    { name: 'maybeTs', type: ['null', { type: 'long', logicalType: 'timestamp-millis' }], default: null },
    { name: 'maybeS', type: ['null', 'string'], default: null },
    { name: 'numOrStr', type: ['double', 'string', 'null'] },
    { name: 'withDefault', type: 'long', default: 7 },
    { name: 'colorDefault', type: 'Color', default: 'GREEN' },
    { name: 'arr', type: { type: 'array', items: 'long' }, default: [] },
    {
      name: 'lines',
      type: { type: 'array', items: { type: 'record', name: 'Line', fields: [{ name: 'q', type: 'int' }, { name: 'what', type: 'string' }, { name: 'tags', type: { type: 'map', values: 'string' } }] } },
    },
    { name: 'map', type: { type: 'map', values: ['null', 'Line'] } },
    { name: 'nested', type: { type: 'record', name: 'Node', fields: [{ name: 'v', type: 'int' }, { name: 'next', type: ['null', 'Node'], default: null }] } },
  ],
};

/** Shapes' fields whose values hold no object or array: a record the transcoder reads as jsonb prints it, in one pass over its keys. */
const FLAT: avro.Schema = {
  type: 'record',
  name: 'Flat',
  namespace: 'test',
  fields: (SHAPES as avro.schema.RecordType).fields.filter((field) => !['arr', 'lines', 'map', 'nested'].includes(field.name)),
};

// A copy of the options: avsc keeps its registry of names in the object it is given.
const SHAPES_TYPE = avro.Type.forSchema(SHAPES, { ...FOR_SCHEMA_OPTIONS });
const FLAT_TYPE = avro.Type.forSchema(FLAT, { ...FOR_SCHEMA_OPTIONS });
const STRICT = { noUndeclaredFields: true } as const;

/** Deterministic: a failure names its seed. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const EDGE_NUMBERS = [0, -0, 1, -1, 2 ** 31 - 1, -(2 ** 31), 2 ** 31, -(2 ** 31) - 1, 2 ** 30, -(2 ** 30), 2 ** 30 - 1, 9007199254740990, -9007199254740990, 9007199254740991, 2 ** 53, 1e21, 0.1, 1.5, -2.5e-7, 3.4028234663852886e38, 3.5e38, 1.401298464324817e-45, 5e-324, 1.7976931348623157e308, 1e-7, 123456789012345, 1234567890123456];
const STRING_PIECES = ['', 'a', 'inv_1', 'é', '€', '😀', '\u0000', '\n', '"', '\\', '/', '\u001f', '\u007f', '\u2028', '\ud800', '\udc00', 'x'.repeat(70), 'ü'.repeat(40), 'RED', '0', '12', '__proto__', 'constructor', '2026-11-30T01:02:03Z', '2026-11-30T01:02:03.456+05:30', '2026-11-30'];

class Gen {
  /**
   * Set when the text holds what the transcoder leaves to avsc even though avsc takes it: a key
   * twice, a map key Object.keys would move ("0", "12") or "__proto__", an undeclared field or an
   * enum symbol named like a member of Object.prototype (avsc's plain-object lookups let it through).
   */
  unusual = false;

  constructor(private readonly random: () => number) {}

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.random() * items.length)]!;
  }

  chance(p: number): boolean {
    return this.random() < p;
  }

  string(): string {
    let text = '';
    for (let n = Math.floor(this.random() * 4); n > 0; n--) text += this.pick(STRING_PIECES);
    return text;
  }

  number(): number {
    if (this.chance(0.5)) return this.pick(EDGE_NUMBERS) * (this.chance(0.2) ? -1 : 1);
    return this.chance(0.5) ? Math.floor((this.random() - 0.5) * 2 ** (this.random() * 60)) : (this.random() - 0.5) * 10 ** Math.floor(this.random() * 40 - 20);
  }

  /** A whole number of at most `bits` bits (signed), edges included; now and then any number. */
  whole(bits: number): number {
    if (this.chance(0.05)) return this.number();
    if (this.chance(0.3)) return this.pick(EDGE_NUMBERS.filter((n) => Number.isInteger(n) && Math.abs(n) < 2 ** (bits - 1)));
    return Math.floor((this.random() - 0.5) * 2 ** (this.random() * bits));
  }

  /** A value for `type`, mostly valid; `depth` bounds recursion. */
  value(type: avro.Type, depth = 0): unknown {
    if (this.chance(0.005)) return this.anything(depth);
    if (type instanceof avro.types.LogicalType) {
      if (this.chance(0.05)) return this.pick([() => this.number(), () => this.string(), () => '2026-11-30T01:02:03', () => 8.64e15 + 1])();
      return this.pick([() => new Date(Math.floor(this.random() * 4e12)).toISOString(), () => Math.floor(this.random() * 4e12), () => '2026-11-30T01:02:03+01:00', () => '1969-12-31T23:59:59.999999Z', () => -Math.floor(this.random() * 4e12)])();
    }
    if (type instanceof avro.types.UnwrappedUnionType) return this.value(this.pick(type.types.filter((branch) => depth < 4 || branch.typeName === 'null')), depth + 1);
    if (type instanceof avro.types.RecordType) {
      const value: Record<string, unknown> = {};
      for (const field of type.fields) {
        if (field.defaultValue() !== undefined && this.chance(0.3)) continue;
        if (this.chance(0.003)) continue;
        value[field.name] = this.value(field.type, depth + 1);
      }
      if (this.chance(0.005)) {
        const key = this.string();
        if (key in Object.prototype) this.unusual = true;
        value[key] = 1;
      }
      return value;
    }
    if (type instanceof avro.types.ArrayType) return Array.from({ length: depth > 3 ? 0 : Math.floor(this.random() * 4) }, () => this.value(type.itemsType, depth + 1));
    if (type instanceof avro.types.MapType) {
      const value: Record<string, unknown> = {};
      for (let n = depth > 3 ? 0 : Math.floor(this.random() * 4); n > 0; n--) {
        const key = this.string();
        if (/^(?:0|[1-9]\d*)$/.test(key) || key === '__proto__' || key in value) this.unusual = true;
        value[key] = this.value(type.valuesType, depth + 1);
      }
      return value;
    }
    if (type instanceof avro.types.EnumType) {
      if (this.chance(0.98)) return this.pick(type.symbols);
      const other = this.string();
      // avsc looks symbols up in a plain object: it takes "constructor" for a symbol.
      if (other in Object.prototype) this.unusual = true;
      return other;
    }
    switch (type.typeName) {
      case 'null':
        return null;
      case 'boolean':
        return this.chance(0.5);
      case 'int':
        return this.whole(32);
      case 'long':
        return this.whole(54);
      case 'float':
      case 'double':
        return this.number();
      case 'string':
        return this.string();
      default:
        return this.anything(depth);
    }
  }

  anything(depth: number): unknown {
    return this.pick([() => null, () => true, () => this.number(), () => this.string(), () => (depth > 3 ? [] : [this.anything(depth + 1)]), () => ({ x: 1 })])();
  }

  /** JSON text of `value`, in one of several styles: compact, jsonb's, indented; escapes and number forms varied. */
  json(value: unknown): string {
    const style = this.pick(['compact', 'jsonb', 'pretty'] as const);
    const write = (item: unknown, indent: string): string => {
      if (item === null || typeof item === 'boolean') return String(item);
      if (typeof item === 'number') return this.numberText(item);
      if (typeof item === 'string') return this.stringText(item);
      const inner = style === 'pretty' ? `${indent}  ` : indent;
      const open = style === 'pretty' ? `\n${inner}` : '';
      const close = style === 'pretty' ? `\n${indent}` : '';
      const comma = style === 'compact' ? ',' : style === 'jsonb' ? ', ' : `,\n${inner}`;
      if (Array.isArray(item)) return item.length === 0 ? '[]' : `[${open}${item.map((each) => write(each, inner)).join(comma)}${close}]`;
      let keys = Object.keys(item as object);
      // jsonb's order: shorter keys first, then by bytes.
      if (style === 'jsonb') keys = keys.sort((a, b) => Buffer.byteLength(a) - Buffer.byteLength(b) || Buffer.compare(Buffer.from(a), Buffer.from(b)));
      else if (this.chance(0.3)) keys = keys.reverse();
      const colon = style === 'compact' ? ':' : ': ';
      const entries = keys.map((key) => `${this.stringText(key)}${colon}${write((item as Record<string, unknown>)[key], inner)}`);
      if (this.chance(0.03) && keys.length > 0 && (this.unusual = true)) entries.push(`${this.stringText(keys[0]!)}${colon}${write(this.anything(3), inner)}`); // a key twice: the last one counts
      return keys.length === 0 ? '{}' : `{${open}${entries.join(comma)}${close}}`;
    };
    return write(value, '');
  }

  numberText(value: number): string {
    const text = JSON.stringify(value);
    if (Number.isInteger(value) && Math.abs(value) < 1e15 && this.chance(0.2)) return this.pick([`${text}.0`, `${text}e0`, `${text}E+00`]);
    if (Object.is(value, -0)) return '-0';
    return text;
  }

  stringText(value: string): string {
    if (!this.chance(0.3)) return JSON.stringify(value);
    // Some characters escaped as \uXXXX, and "/" as "\/": the same string, other bytes.
    let text = '"';
    for (const c of value.split('')) {
      if (/[a-zé€/]/.test(c) && this.chance(0.5)) text += c === '/' ? '\\/' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
      else text += JSON.stringify(c).slice(1, -1);
    }
    return `${text}"`;
  }
}

/** avsc's answer for a JSON text: the bytes, or null when its strict check refuses (or it throws: an ambiguous union). */
function expected(type: avro.Type, text: string): Buffer | null {
  const value = JSON.parse(text) as unknown;
  try {
    return type.isValid(value, STRICT) ? type.toBuffer(value) : null;
  } catch {
    return null;
  }
}

const billing = await loadSchemaSet('schemas');
const bench = await loadSchemaSet('bench/schemas');
const schemas: [string, avro.Type][] = [
  ...[...billing.byEventType.values(), ...bench.byEventType.values()].map((schema): [string, avro.Type] => [schema.file, schema.type]),
  ['Shapes', SHAPES_TYPE],
  ['Flat', FLAT_TYPE],
];

describe('compileTranscoder', () => {
  it.each(schemas)('gives avsc’s bytes, or leaves the payload to avsc, on random records of %s', (_name, type) => {
    const transcode = compileTranscoder(type)!;
    expect(transcode).not.toBeNull();
    let encoded = 0;
    /** Every body given, with its bytes then: later payloads are written into the same memory. */
    const given: [Buffer, string, string][] = [];
    for (let seed = 1; seed <= 3000; seed++) {
      const gen = new Gen(rng(seed));
      const text = gen.json(gen.value(type));
      const want = expected(type, text);
      const got = transcode(Buffer.from(text, 'utf8'))?.subarray(BODY_AT) ?? null;
      const context = `seed ${seed}: ${text}`;
      if (want === null) expect(got, context).toBeNull();
      else if (got !== null || !gen.unusual) {
        expect(got && Buffer.from(got).toString('hex'), context).toBe(want.toString('hex'));
        if (got) given.push([got, want.toString('hex'), context]);
        encoded += 1;
      }
    }
    for (const [body, hex, context] of given) expect(body.toString('hex'), `still, ${context}`).toBe(hex);
    // Most random records are valid ones: the fast path is taken, not just refused.
    expect(encoded).toBeGreaterThan(1000);
  });

  it('leaves to the parsing path what is not one valid JSON text of valid UTF-8, and nesting deeper than the stack', () => {
    const type = bench.byEventType.get('PaymentRecorded')!.type;
    const transcode = compileTranscoder(type)!;
    // In the schema's order, and as jsonb prints it (read by the flat record's one pass).
    for (const good of ['{"invoice_id": "inv-1", "customer_id": "c", "amount_cents": 1, "currency": "EUR", "method": "card", "note": "n"}', '{"note": "n", "method": "card", "currency": "EUR", "invoice_id": "inv-1", "customer_id": "c", "amount_cents": 1}']) {
      expect(transcode(Buffer.from(good))!.subarray(BODY_AT)).toEqual(type.toBuffer(JSON.parse(good)));
      for (const bad of [`${good} x`, `${good}}`, good.replace('1,', '01,').replace(/1}$/, '01}'), good.replace('"n"', '"\u0001"'), good.replace('"n"', '"\\x"'), good.slice(0, -1)]) {
        expect(transcode(Buffer.from(bad)), bad).toBeNull();
      }
      expect(transcode(Buffer.concat([Buffer.from(good.slice(0, good.indexOf('"n"') + 2)), Buffer.from([0xff]), Buffer.from(good.slice(good.indexOf('"n"') + 2))]))).toBeNull();
    }
    const deep = SHAPES_TYPE as avro.types.RecordType;
    const nested = `${'{"v": 1, "next": '.repeat(100_000)}null${'}'.repeat(100_000)}`;
    expect(compileTranscoder(deep.field('nested')!.type)!(Buffer.from(nested))).toBeNull();
  });

  it('grows its buffer for a value larger than it, leaving the bodies given before intact', () => {
    const type = bench.byEventType.get('PaymentRecorded')!.type;
    const transcode = compileTranscoder(type)!;
    const values = [1, 40_000, 3, 200_000, 5].map((length) => ({ invoice_id: 'i', customer_id: 'c', amount_cents: length, currency: 'EUR', method: 'card', note: 'é'.repeat(length) }));
    const bodies = values.map((value) => transcode(Buffer.from(JSON.stringify(value)))!);
    bodies.forEach((body, i) => expect(body.subarray(BODY_AT)).toEqual(type.toBuffer(values[i])));
  });
});

describe('JsonReader.plainStringEnd', () => {
  it('stops at the closing quote or the first backslash, wherever the reader looked before', () => {
    const text = '"' + 'a'.repeat(40) + '\\n' + 'b'.repeat(40) + '" "' + 'c'.repeat(40) + '" "' + 'd'.repeat(40) + '\\t"';
    const reader = new JsonReader();
    reader.reset(Buffer.from(text));
    const firstBackslash = text.indexOf('\\');
    const secondBackslash = text.lastIndexOf('\\');
    const third = text.indexOf('c');
    expect(reader.plainStringEnd(1)).toBe(firstBackslash);
    expect(reader.plainStringEnd(firstBackslash + 2)).toBe(text.indexOf('"', firstBackslash));
    expect(reader.plainStringEnd(third)).toBe(text.indexOf('"', third));
    expect(reader.plainStringEnd(text.indexOf('d'))).toBe(secondBackslash);
    // Looked at again from an earlier place (a union tries a branch, then reads the value again).
    expect(reader.plainStringEnd(third)).toBe(text.indexOf('"', third));
    expect(reader.plainStringEnd(1)).toBe(firstBackslash);
    expect(reader.plainStringEnd(secondBackslash + 2)).toBe(text.length - 1);
    reader.reset(Buffer.from('"' + 'x'.repeat(50)));
    expect(reader.plainStringEnd(1)).toBe(51);
  });
});

describe('JsonReader.key', () => {
  it('consumes only the exact name as a whole string token', () => {
    const reader = new JsonReader();
    const name = Buffer.from('note');
    const at = (text: string) => {
      reader.reset(Buffer.from(text));
      return reader.key(name) ? reader.pos : -1;
    };
    expect(at('  "note": 1')).toBe(8);
    for (const text of ['"notes": 1', '"not": 1', '"nota": 1', 'note": 1', '"no\\u0074e": 1', '"note', '']) expect(at(text), text).toBe(-1);
  });
});
