import { isUtf8 } from 'node:buffer';
import avro from 'avsc';
import { FAIL, FALSE_BYTES, JsonReader, NULL_BYTES, TRUE_BYTES, type JsonKind } from './json-reader.js';
import { TimestampMillisType, toEpochMillis } from './logical-types.js';
import { HEADER_BYTES } from './wire.js';

/**
 * JSON text (UTF-8 bytes) -> Avro binary, driven by the schema, without building the payload's
 * object graph: parsing the jsonb text, checking the objects and encoding them with avsc was
 * most of the Avro format's cost per event. The bytes are avsc's to the byte (tested against it
 * on random records of every schema shape, transcoder.test.ts).
 *
 * It only encodes what it can prove avsc takes as it is: anything else (a value that does not
 * fit, an undeclared field, a map whose key order Object.keys would change, a wrapped union,
 * bytes) makes it return FAIL, and the payload takes the parsing path, which encodes it or says
 * why not. A fast path that is wrong fails loudly there instead of guessing here.
 */
export type Transcoder = (json: Buffer) => Buffer | null;

/** Bytes before the Avro body in what a transcoder returns: room for the Confluent header (wire.ts). */
export const BODY_AT = HEADER_BYTES;

/** Writes one value read from `reader` at `out[at]`; returns the end, or FAIL. */
type Write = (reader: JsonReader, at: number) => number;

const reader = new JsonReader();
/**
 * Where values are written, and what the bodies returned are views of: a slab handed out in
 * order, as Buffer's own pool does, so a body is neither allocated nor copied on its own. A slab
 * no longer written to stays alive only as long as a body in it (until Kafka acknowledged it).
 */
const SLAB_BYTES = 64 * 1024;
let out = Buffer.allocUnsafeSlow(SLAB_BYTES);
/** The same memory as a plain Uint8Array: its subarray is cheaper than a Buffer's. */
let outView = new Uint8Array(out.buffer, out.byteOffset, out.length);
/** Where the next body starts in `out`: everything before it has been handed out. */
let handedOut = 0;
/** Record field positions, as a stack shared by nested records: no allocation per record. */
let slots = new Int32Array(256);
let slotTop = 0;

/**
 * Compiles `type` into a function giving the Avro body of a JSON text after BODY_AT bytes left
 * for a header, or null when the parsing path must take it. Null instead of a function if the
 * type holds something the transcoder never encodes.
 */
export function compileTranscoder(type: avro.Type): Transcoder | null {
  const write = compile(type, new Map());
  if (write === null) return null;
  return (json) => {
    if (!isUtf8(json)) return null;
    for (;;) {
      reader.reset(json);
      slotTop = 0;
      let end: number;
      try {
        end = write(reader, handedOut + BODY_AT);
      } catch {
        // Nesting deeper than the stack: the parsing path decides.
        return null;
      }
      if (end !== GROW) {
        if (end === FAIL || !reader.atEnd()) return null;
        const body = out.subarray(handedOut, end);
        // The next body starts 8-byte aligned, as Buffer's pool does.
        handedOut = (end + 7) & ~7;
        return body;
      }
      // A new slab: the same size if this one was partly handed out, else twice as large.
      out = Buffer.allocUnsafeSlow(handedOut > 0 ? Math.max(SLAB_BYTES, out.length) : out.length * 2);
      outView = new Uint8Array(out.buffer, out.byteOffset, out.length);
      handedOut = 0;
    }
  };
}

/** Returned when `out` is too small: the whole value is written again into a larger one. */
const GROW = -2;

function room(at: number, bytes: number): boolean {
  return at + bytes <= out.length;
}

function compile(type: avro.Type, named: Map<avro.Type, Write | null>): Write | null {
  if (named.has(type)) return named.get(type) ?? null;
  if (type instanceof avro.types.RecordType) {
    // Recursive records refer to themselves: bound once compiled.
    let compiled: Write | null = null;
    named.set(type, (r, at) => compiled!(r, at));
    compiled = compileRecord(type, named);
    named.set(type, compiled);
    return compiled;
  }
  if (type instanceof TimestampMillisType) return writeTimestamp;
  if (type instanceof avro.types.LogicalType) return null;
  if (type instanceof avro.types.UnwrappedUnionType) return compileUnion(type, named);
  if (type instanceof avro.types.ArrayType) return compileArray(compile(type.itemsType, named));
  if (type instanceof avro.types.MapType) return compileMap(compile(type.valuesType, named));
  if (type instanceof avro.types.EnumType) return compileEnum(type.symbols);
  switch (type.typeName) {
    case 'null':
      return (r, at) => (r.literal(NULL_BYTES) ? at : FAIL);
    case 'boolean':
      return writeBoolean;
    case 'int':
      return writeInt;
    case 'long':
      return writeLongValue;
    case 'float':
      return writeFloat;
    case 'double':
      return writeDouble;
    case 'string':
      return writeString;
    default:
      // bytes and fixed take Buffers, which JSON has not; a wrapped union wants {"type": value}.
      return null;
  }
}

function compileRecord(type: avro.types.RecordType, named: Map<avro.Type, Write | null>): Write | null {
  const fields = type.fields.map((field) => ({
    text: field.name,
    name: Buffer.from(field.name, 'utf8'),
    write: compile(field.type, named),
    // What avsc writes for a missing field: its default, encoded once (undefined: none).
    missing: field.defaultValue() === undefined ? undefined : field.type.toBuffer(field.defaultValue()),
  }));
  // avsc reads fields as properties (v.constructor is Object's for a missing "constructor").
  if (fields.some((field) => field.write === null || field.text in Object.prototype)) return null;
  const count = fields.length;
  // jsonb prints keys shortest first, then by bytes: the k-th key of a jsonb payload is most
  // likely the k-th field in that order, checked before looking through them all.
  const jsonbOrder = fields.map((_, i) => i).sort((a, b) => fields[a]!.name.length - fields[b]!.name.length || Buffer.compare(fields[a]!.name, fields[b]!.name));
  const defaultBytes = fields.reduce((sum, field) => sum + (field.missing?.length ?? 0), 0);
  const jsonbText = type.fields.every((field) => isFlat(field.type)) ? compileJsonbRecord(fields, jsonbOrder) : null;
  return (r, at) => {
    if (jsonbText !== null) {
      const end = jsonbText(r, at);
      if (end !== NOT_JSONB_TEXT) return end;
    }
    if (!r.eat(0x7b)) return FAIL;
    // One pass: each value is written where it comes, in the text's order, its place noted;
    // then the values are put in the schema's order (already so when the text has it).
    const base = slotTop;
    reserveSlots(base, count);
    slotTop += 2 * count;
    for (let i = base; i < slotTop; i += 2) slots[i] = FAIL;
    const staged = at;
    let next = 0;
    let inOrder = true;
    let k = 0;
    if (!r.eat(0x7d)) {
      do {
        let field = k < count ? jsonbOrder[k]! : -1;
        k += 1;
        if (field < 0 || !r.key(fields[field]!.name)) {
          if (!r.string()) return FAIL;
          field = fieldIndex(r, fields);
          if (field < 0) return FAIL; // undeclared: avsc's strict check refuses it
        }
        if (!r.eat(0x3a)) return FAIL;
        // A key given twice counts once, the last time (as JSON.parse keeps it).
        if (field !== next || slots[base + 2 * field] !== FAIL) inOrder = false;
        next = field + 1;
        slots[base + 2 * field] = at;
        at = fields[field]!.write!(r, at);
        if (at < 0) return at;
        slots[base + 2 * field + 1] = at;
      } while (r.eat(0x2c));
      if (!r.eat(0x7d)) return FAIL;
    }
    slotTop = base;
    if (inOrder && next === count) return at;
    // Moved past the room the defaults may take, then copied back in order: what is written
    // never reaches what is still to be read.
    const length = at - staged;
    if (!room(at, length + defaultBytes)) return GROW;
    const shift = at + defaultBytes - staged;
    out.copyWithin(staged + shift, staged, at);
    let dest = staged;
    for (let i = 0; i < count; i++) {
      const from = slots[base + 2 * i]!;
      if (from === FAIL) {
        const missing = fields[i]!.missing;
        if (missing === undefined) return FAIL;
        dest = copyBytes(missing, 0, missing.length, dest);
      } else dest = moveBytes(from + shift, slots[base + 2 * i + 1]! + shift, dest);
    }
    return dest;
  };
}

/** Returned by a jsonb-text record writer for a text it does not take: nothing was written, the reader is where it was. */
const NOT_JSONB_TEXT = -3;

/** A value whose text holds no object or array: found by one skip, without a record of its own to reorder. */
function isFlat(type: avro.Type): boolean {
  if (type instanceof avro.types.UnwrappedUnionType) return type.types.every(isFlat);
  return !(type instanceof avro.types.RecordType || type instanceof avro.types.ArrayType || type instanceof avro.types.MapType);
}

/**
 * A flat record (isFlat) as Postgres prints a jsonb value with every field present: `{"k": v,
 * "k2": v2}`, keys shortest first, then by bytes, one space after each colon and comma. Such a
 * text is matched against the keys' bytes in that order, each value's place noted (a plain
 * string's end too), then the values are written in the schema's order from their places: no
 * look-ups by name, nothing written twice. Any other text (a field missing or given twice, an
 * undeclared one, other spacing) is left to the general reader as if this were not here.
 */
function compileJsonbRecord(fields: readonly { readonly name: Buffer; readonly write: Write | null }[], jsonbOrder: readonly number[]) {
  const count = fields.length;
  if (count === 0) return null;
  const keys = jsonbOrder.map((field, k) => Buffer.concat([Buffer.from(k === 0 ? '{"' : ', "'), fields[field]!.name, Buffer.from('": ')]));
  const writes = fields.map((field) => field.write!);
  const plainString = writes.map((write) => write === writeString);
  return (r: JsonReader, at: number): number => {
    const src = r.src;
    const start = r.pos;
    const base = slotTop;
    reserveSlots(base, count);
    let pos = start;
    for (let k = 0; k < count; k++) {
      const key = keys[k]!;
      for (let i = 0; i < key.length; i++) if (src[pos + i] !== key[i]) return notJsonbText(r, start);
      pos += key.length;
      const field = jsonbOrder[k]!;
      slots[base + 2 * field] = pos;
      slots[base + 2 * field + 1] = -1;
      if (plainString[field] && src[pos] === QUOTE) {
        const end = plainStringEnd(r, pos + 1);
        if (src[end] === QUOTE) {
          slots[base + 2 * field + 1] = end;
          pos = end + 1;
          continue;
        }
      }
      r.pos = pos;
      if (!r.skip()) return notJsonbText(r, start);
      pos = r.pos;
    }
    if (src[pos] !== 0x7d) return notJsonbText(r, start);
    // The values' places stay on the stack while they are written: a value may be a record of its own.
    slotTop = base + 2 * count;
    for (let field = 0; field < count; field++) {
      const from = slots[base + 2 * field]!;
      const end = slots[base + 2 * field + 1]!;
      if (end >= 0) at = writePlainString(src, from + 1, end, at);
      else {
        r.pos = from;
        at = writes[field]!(r, at);
      }
      if (at < 0) return at;
    }
    slotTop = base;
    r.pos = pos + 1;
    return at;
  };
}

function notJsonbText(r: JsonReader, start: number): number {
  r.pos = start;
  return NOT_JSONB_TEXT;
}

/**
 * Where the plain text of a string whose bytes start at `from` stops (its closing quote, a
 * backslash, a control character, or the end): a loop for the short strings most values are,
 * memchr beyond them (JsonReader.plainStringEnd).
 */
function plainStringEnd(r: JsonReader, from: number): number {
  const src = r.src;
  const stop = Math.min(src.length, from + SHORT_STRING);
  for (let pos = from; pos < stop; pos++) {
    const c = src[pos]!;
    if (c === QUOTE || c === BACKSLASH || c < 0x20) return pos;
  }
  return stop < src.length ? r.plainStringEnd(stop) : stop;
}

/** The bytes `src[from, end)` of a string without escapes (valid UTF-8: checked once per payload), as an Avro string. */
function writePlainString(src: Buffer, from: number, end: number, at: number): number {
  const length = end - from;
  if (!room(at, length + 10)) return GROW;
  at = writeLong(at, length);
  if (length > SHORT_STRING) {
    outView.set(src.subarray(from, end), at);
    return at + length;
  }
  const into = out;
  for (let i = from; i < end; i++) into[at++] = src[i]!;
  return at;
}

/** Room on the slot stack for `count` fields' two positions from `base`. */
function reserveSlots(base: number, count: number): void {
  if (base + 2 * count <= slots.length) return;
  const grown = new Int32Array(slots.length * 2 + 2 * count);
  grown.set(slots);
  slots = grown;
}

function fieldIndex(r: JsonReader, fields: readonly { readonly name: Buffer; readonly text: string }[]): number {
  if (r.escaped) return fields.findIndex((field) => field.text === r.stringValue());
  for (let i = 0; i < fields.length; i++) if (r.stringEquals(fields[i]!.name)) return i;
  return -1;
}

/** avsc's UnwrappedUnionType: the branch of the value's kind, or the one logical branch that takes it (never both). */
function compileUnion(type: avro.types.UnwrappedUnionType, named: Map<avro.Type, Write | null>): Write | null {
  const byKind = new Map<JsonKind, { index: number; write: Write }>();
  let logical: { index: number; type: TimestampMillisType } | null = null;
  for (const [index, branch] of type.types.entries()) {
    if (branch instanceof avro.types.LogicalType) {
      if (!(branch instanceof TimestampMillisType) || logical) return null;
      logical = { index, type: branch };
      continue;
    }
    const write = compile(branch, named);
    const kind = KIND_OF_BUCKET[bucketOf(branch)];
    if (write === null || kind === undefined) return null;
    byKind.set(kind, { index, write });
  }
  return (r, at) => {
    const kind = r.kind();
    if (kind === null) return FAIL;
    const branch = byKind.get(kind);
    if (logical && (kind === 'number' || kind === 'string')) {
      const start = r.pos;
      const takes = readTimestamp(r) !== undefined;
      r.pos = start;
      // Both would take it: avsc throws (ambiguous conversion); none: it does not fit.
      if (takes && branch) return FAIL;
      if (takes) return writeBranch(r, at, logical.index, writeTimestamp);
    }
    if (!branch) return FAIL;
    return writeBranch(r, at, branch.index, branch.write);
  };
}

function writeBranch(r: JsonReader, at: number, index: number, write: Write): number {
  if (!room(at, 10)) return GROW;
  return write(r, writeLong(at, index));
}

/** getTypeBucket of avsc, for the branches an unwrapped union may have. */
function bucketOf(type: avro.Type): string {
  const name = type.typeName;
  if (name === 'double' || name === 'float' || name === 'int' || name === 'long') return 'number';
  if (name === 'enum') return 'string';
  if (name === 'map' || name === 'record' || name === 'error') return 'object';
  return name;
}

const KIND_OF_BUCKET: Readonly<Record<string, JsonKind>> = { null: 'null', boolean: 'boolean', string: 'string', number: 'number', object: 'object', array: 'array' };

function compileArray(items: Write | null): Write | null {
  if (items === null) return null;
  return (r, at) => {
    if (!r.eat(0x5b)) return FAIL;
    if (!room(at, 1)) return GROW;
    if (r.eat(0x5d)) {
      out[at] = 0;
      return at + 1;
    }
    // Items first, after a byte kept for their count (moved on if the count takes more).
    let end = at + 1;
    let count = 0;
    do {
      end = items(r, end);
      if (end < 0) return end;
      count += 1;
    } while (r.eat(0x2c));
    if (!r.eat(0x5d)) return FAIL;
    return writeCounted(at, end, count);
  };
}

/** Puts `count` (a block count) at `at`, before the block written at at + 1 to `end`, and the 0 that ends the blocks. */
function writeCounted(at: number, end: number, count: number): number {
  const size = longSize(count);
  if (!room(end, size)) return GROW;
  if (size > 1) out.copyWithin(at + size, at + 1, end);
  writeLong(at, count);
  end += size - 1;
  out[end] = 0;
  return end + 1;
}

/**
 * A map is written in Object.keys order, which puts integer-like keys first: a map with such a
 * key (or a key twice, or "__proto__") takes the parsing path rather than a guessed order.
 */
function compileMap(values: Write | null): Write | null {
  if (values === null) return null;
  return (r, at) => {
    if (!r.eat(0x7b)) return FAIL;
    if (!room(at, 1)) return GROW;
    if (r.eat(0x7d)) {
      out[at] = 0;
      return at + 1;
    }
    const keys = new Set<string>();
    let end = at + 1;
    do {
      if (!r.string()) return FAIL;
      const key = r.stringValue();
      if (key === undefined || keys.has(key) || key === '__proto__' || INDEX_LIKE.test(key) || !r.eat(0x3a)) return FAIL;
      keys.add(key);
      end = writeJsString(end, key);
      if (end < 0) return end;
      end = values(r, end);
      if (end < 0) return end;
    } while (r.eat(0x2c));
    if (!r.eat(0x7d)) return FAIL;
    return writeCounted(at, end, keys.size);
  };
}

/** Array-index keys, which Object.keys lists first, in numeric order. */
const INDEX_LIKE = /^(?:0|[1-9]\d{0,9})$/;

function compileEnum(symbols: readonly string[]): Write {
  const names = symbols.map((symbol) => Buffer.from(symbol, 'utf8'));
  return (r, at) => {
    if (!r.string()) return FAIL;
    if (r.escaped) {
      const index = symbols.indexOf(r.stringValue()!);
      return index < 0 ? FAIL : room(at, 10) ? writeLong(at, index) : GROW;
    }
    for (let i = 0; i < names.length; i++) {
      if (r.stringEquals(names[i]!)) return room(at, 10) ? writeLong(at, i) : GROW;
    }
    return FAIL;
  };
}

function writeBoolean(r: JsonReader, at: number): number {
  const value = r.literal(TRUE_BYTES) ? 1 : r.literal(FALSE_BYTES) ? 0 : FAIL;
  if (value === FAIL) return FAIL;
  if (!room(at, 1)) return GROW;
  out[at] = value;
  return at + 1;
}

function writeInt(r: JsonReader, at: number): number {
  const value = r.number();
  if (value !== (value | 0)) return FAIL;
  return room(at, 10) ? writeLong(at, value) : GROW;
}

function writeLongValue(r: JsonReader, at: number): number {
  const value = r.number();
  if (!isLong(value)) return FAIL;
  return room(at, 10) ? writeLong(at, value) : GROW;
}

/** avsc's LongType check: a whole number within its safe range (which stops short of 2^53 - 1). */
function isLong(value: number): boolean {
  return value % 1 === 0 && value >= -9007199254740990 && value <= 9007199254740990;
}

function writeFloat(r: JsonReader, at: number): number {
  const value = r.number();
  if (Number.isNaN(value)) return FAIL;
  if (!room(at, 4)) return GROW;
  return out.writeFloatLE(value, at);
}

function writeDouble(r: JsonReader, at: number): number {
  const value = r.number();
  if (Number.isNaN(value)) return FAIL;
  if (!room(at, 8)) return GROW;
  return out.writeDoubleLE(value, at);
}

/** The epoch millis TimestampMillisType makes of a JSON number or string; undefined if it does not take it. */
function readTimestamp(r: JsonReader): number | undefined {
  const kind = r.kind();
  let millis: number | undefined;
  if (kind === 'number') millis = toEpochMillis(r.number());
  else if (kind === 'string' && r.string()) millis = toEpochMillis(r.stringValue());
  return millis !== undefined && isLong(millis) ? millis : undefined;
}

function writeTimestamp(r: JsonReader, at: number): number {
  const millis = readTimestamp(r);
  if (millis === undefined) return FAIL;
  return room(at, 10) ? writeLong(at, millis) : GROW;
}

function writeString(r: JsonReader, at: number): number {
  if (r.peek() !== QUOTE) return FAIL;
  const src = r.src;
  const from = r.pos + 1;
  // The bytes of an unescaped string are its UTF-8 (checked valid once per payload).
  if (!room(at, src.length - from + 10)) return GROW;
  const into = out;
  // Short strings (most values) scanned and copied in one loop, after a byte kept for the
  // length: up to SHORT_STRING bytes the length takes one byte.
  const stop = Math.min(src.length, from + SHORT_STRING);
  let pos = from;
  let end = at + 1;
  for (; pos < stop; pos++) {
    const c = src[pos]!;
    if (c === QUOTE || c === BACKSLASH || c < 0x20) break;
    into[end++] = c;
  }
  if (pos === stop && pos < src.length) {
    // A longer one: its end found by memchr (JsonReader), so its length is known before the
    // rest is copied (by memcpy) where it belongs; only the short prefix moves if the length
    // takes more than its byte.
    const rest = r.plainStringEnd(pos);
    if (src[rest] !== QUOTE) return writeEscapedString(r, at);
    const length = rest - from;
    const size = longSize(length);
    if (size > 1) into.copyWithin(at + size, at + 1, end);
    writeLong(at, length);
    outView.set(src.subarray(pos, rest), at + size + (pos - from));
    r.pos = rest + 1;
    return at + size + length;
  }
  if (src[pos] !== QUOTE) return writeEscapedString(r, at);
  r.pos = pos + 1;
  into[at] = (pos - from) << 1;
  return end;
}

/** A string with an escape (or not a string): as JSON.parse reads it, written as avsc writes a JS string. */
function writeEscapedString(r: JsonReader, at: number): number {
  if (!r.string()) return FAIL;
  const value = r.stringValue();
  return value === undefined ? FAIL : writeJsString(at, value);
}

/**
 * Up to this many bytes a loop beats a native call (memchr, memcpy) and its set-up. Below 64,
 * so that a string found whole in the loop has a one-byte length.
 */
const SHORT_STRING = 32;

/** Bytes of `n` (not negative) as a zigzag varint. */
function longSize(n: number): number {
  let size = 1;
  for (let z = n * 2; z >= 128; z /= 128) size += 1;
  return size;
}

/** `from[start, end)` to `out[at]`; a loop for the short runs most values are (Buffer#copy's checks cost more than the bytes). */
function copyBytes(from: Buffer, start: number, end: number, at: number): number {
  if (end - start > 64) {
    out.set(from.subarray(start, end), at);
    return at + end - start;
  }
  for (let i = start; i < end; i++) out[at++] = from[i]!;
  return at;
}

/** `out[start, end)` to `out[at]`, where at <= start. */
function moveBytes(start: number, end: number, at: number): number {
  if (end - start > 64) {
    out.copyWithin(at, start, end);
    return at + end - start;
  }
  for (let i = start; i < end; i++) out[at++] = out[i]!;
  return at;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * A JS string as avsc's Tap.writeString writes it: Buffer.byteLength bytes, with utf8Write above
 * 64 bytes and its own loop up to 64, which writes a lone surrogate as its three-byte form where
 * utf8Write writes U+FFFD.
 */
function writeJsString(at: number, value: string): number {
  const length = Buffer.byteLength(value);
  if (!room(at, length + 10)) return GROW;
  at = writeLong(at, length);
  if (length > 64) return at + out.write(value, at, length, 'utf8');
  for (let i = 0; i < value.length; i++) {
    let c = value.charCodeAt(i);
    if (c < 0x80) out[at++] = c;
    else if (c < 0x800) {
      out[at++] = (c >> 6) | 0xc0;
      out[at++] = (c & 0x3f) | 0x80;
    } else if ((c & 0xfc00) === 0xd800 && (value.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      c = 0x10000 + ((c & 0x03ff) << 10) + (value.charCodeAt(++i) & 0x03ff);
      out[at++] = (c >> 18) | 0xf0;
      out[at++] = ((c >> 12) & 0x3f) | 0x80;
      out[at++] = ((c >> 6) & 0x3f) | 0x80;
      out[at++] = (c & 0x3f) | 0x80;
    } else {
      out[at++] = (c >> 12) | 0xe0;
      out[at++] = ((c >> 6) & 0x3f) | 0x80;
      out[at++] = (c & 0x3f) | 0x80;
    }
  }
  return at;
}

/** Zigzag varint, as avsc's Tap.writeLong (integer arithmetic while it cannot overflow). */
function writeLong(at: number, n: number): number {
  if (n >= -1073741824 && n < 1073741824) {
    let m = n >= 0 ? n << 1 : (~n << 1) | 1;
    while (m > 0x7f) {
      out[at++] = (m & 0x7f) | 0x80;
      m >>= 7;
    }
    out[at++] = m;
    return at;
  }
  let f = n >= 0 ? n * 2 : -n * 2 - 1;
  while (f >= 128) {
    out[at++] = (f & 0x7f) | 0x80;
    f /= 128;
  }
  out[at++] = f;
  return at;
}
