/**
 * A cursor over JSON text as UTF-8 bytes, for the transcoder: values are read where they stand,
 * without building them. Every method returns a sentinel (FAIL, or false) instead of throwing
 * on anything it does not take as given: the transcoder then gives up and the payload takes the
 * parsing path, which names the problem. Numbers and escaped strings become exactly what
 * JSON.parse makes of them.
 */
export const FAIL = -1;

/** What a JSON value is, from its first byte (the buckets avsc picks union branches by). */
export type JsonKind = 'null' | 'boolean' | 'string' | 'number' | 'object' | 'array';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const MINUS = 0x2d;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;

export class JsonReader {
  src: Buffer = Buffer.alloc(0);
  pos = 0;
  /** Set by `string()`: the bytes between the quotes, and whether they hold an escape. */
  start = 0;
  end = 0;
  escaped = false;

  /** The first backslash at or after `backslashSearchedFrom` (-1: none), found by memchr once per stretch of text. */
  private backslashAt = -1;
  private backslashSearchedFrom = Infinity;

  reset(src: Buffer): void {
    this.src = src;
    this.pos = 0;
    this.backslashSearchedFrom = Infinity;
  }

  /**
   * Where the string whose bytes start at `from` stops being plain text: its closing quote or
   * its first backslash, whichever comes first (src.length if neither). Found by memchr rather
   * than a byte loop: for the long strings of large payloads the loop was the costliest step
   * of the transcoder. A raw control character is not looked for: JSON text as Postgres
   * renders a json or jsonb value (what a JsonText holds) has none inside a string.
   */
  plainStringEnd(from: number): number {
    const src = this.src;
    const quote = src.indexOf(QUOTE, from);
    if (from < this.backslashSearchedFrom || (this.backslashAt >= 0 && this.backslashAt < from)) {
      this.backslashAt = src.indexOf(BACKSLASH, from);
      this.backslashSearchedFrom = from;
    }
    const end = quote < 0 ? src.length : quote;
    return this.backslashAt >= 0 && this.backslashAt < end ? this.backslashAt : end;
  }

  /** Skips JSON white space; returns the next byte (NaN at the end). */
  peek(): number {
    const src = this.src;
    let pos = this.pos;
    let c = src[pos];
    while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = src[++pos];
    this.pos = pos;
    return c ?? NaN;
  }

  /** Consumes `byte` (after white space) if it is next. */
  eat(byte: number): boolean {
    if (this.peek() !== byte) return false;
    this.pos += 1;
    return true;
  }

  atEnd(): boolean {
    return Number.isNaN(this.peek());
  }

  kind(): JsonKind | null {
    const c = this.peek();
    if (c === QUOTE) return 'string';
    if (c === 0x7b) return 'object';
    if (c === 0x5b) return 'array';
    if (c === 0x6e) return 'null';
    if (c === 0x74 || c === 0x66) return 'boolean';
    if (c === MINUS || (c >= ZERO && c <= NINE)) return 'number';
    return null;
  }

  /** Consumes `null`, `true` or `false`, as given by its bytes. */
  literal(word: Buffer): boolean {
    this.peek();
    const { src, pos } = this;
    for (let i = 0; i < word.length; i++) if (src[pos + i] !== word[i]) return false;
    this.pos = pos + word.length;
    return true;
  }

  /** A string token: sets start/end (inside the quotes) and `escaped`. False if not a valid one. */
  string(): boolean {
    if (this.peek() !== QUOTE) return false;
    const src = this.src;
    let pos = this.pos + 1;
    const start = pos;
    let escaped = false;
    for (;;) {
      const c = src[pos];
      if (c === undefined || c < 0x20) return false;
      if (c === QUOTE) break;
      if (c === BACKSLASH) {
        escaped = true;
        pos += 1;
        if (src[pos] === undefined) return false;
      }
      pos += 1;
    }
    this.start = start;
    this.end = pos;
    this.escaped = escaped;
    this.pos = pos + 1;
    return true;
  }

  /** The last string token as JSON.parse gives it (escapes resolved; lone surrogates kept). */
  stringValue(): string | undefined {
    if (!this.escaped) return this.src.toString('utf8', this.start, this.end);
    try {
      return JSON.parse(this.src.toString('utf8', this.start - 1, this.end + 1)) as string;
    } catch {
      return undefined;
    }
  }

  /**
   * Consumes the string token whose bytes are exactly `name` if it is next: one pass instead of
   * `string()` then `stringEquals()`. Only for bytes without a quote or a backslash (Avro field
   * names), so a quote right after them closes the token.
   */
  key(name: Buffer): boolean {
    if (this.peek() !== QUOTE) return false;
    const src = this.src;
    const start = this.pos + 1;
    const length = name.length;
    if (src[start + length] !== QUOTE) return false;
    for (let i = 0; i < length; i++) if (src[start + i] !== name[i]) return false;
    this.pos = start + length + 1;
    return true;
  }

  /** True if the last string token is exactly `bytes` (no escapes). */
  stringEquals(bytes: Buffer): boolean {
    const { src, start } = this;
    const length = this.end - start;
    if (this.escaped || length !== bytes.length) return false;
    // Names are short: a loop beats Buffer#compare's call and checks.
    for (let i = 0; i < length; i++) if (src[start + i] !== bytes[i]) return false;
    return true;
  }

  /** A number token as the double JSON.parse makes of it; NaN if there is none. */
  number(): number {
    this.peek();
    const src = this.src;
    const start = this.pos;
    let pos = start;
    if (src[pos] === MINUS) pos += 1;
    const intStart = pos;
    while (src[pos]! >= ZERO && src[pos]! <= NINE) pos += 1;
    const intDigits = pos - intStart;
    if (intDigits === 0 || (intDigits > 1 && src[intStart] === ZERO)) return NaN;
    let simple = true;
    if (src[pos] === DOT) {
      simple = false;
      const fracStart = ++pos;
      while (src[pos]! >= ZERO && src[pos]! <= NINE) pos += 1;
      if (pos === fracStart) return NaN;
    }
    if (src[pos] === 0x65 || src[pos] === 0x45) {
      simple = false;
      pos += 1;
      if (src[pos] === 0x2b || src[pos] === MINUS) pos += 1;
      const expStart = pos;
      while (src[pos]! >= ZERO && src[pos]! <= NINE) pos += 1;
      if (pos === expStart) return NaN;
    }
    this.pos = pos;
    // Up to 15 digits an integer is exact in a double; anything else is converted as JSON.parse does.
    if (simple && intDigits <= 15) {
      let value = 0;
      for (let i = intStart; i < pos; i++) value = value * 10 + (src[i]! - ZERO);
      return start === intStart ? value : -value;
    }
    return Number(src.toString('latin1', start, pos));
  }

  /** Skips one value of any kind; false if it is not well-formed enough to find its end. */
  skip(): boolean {
    switch (this.kind()) {
      case 'string':
        return this.string();
      case 'number':
        return !Number.isNaN(this.number());
      case 'null':
        return this.literal(NULL_BYTES);
      case 'boolean':
        return this.literal(TRUE_BYTES) || this.literal(FALSE_BYTES);
      case 'array':
        this.pos += 1;
        if (this.eat(0x5d)) return true;
        do if (!this.skip()) return false;
        while (this.eat(0x2c));
        return this.eat(0x5d);
      case 'object':
        this.pos += 1;
        if (this.eat(0x7d)) return true;
        do if (!this.string() || !this.eat(0x3a) || !this.skip()) return false;
        while (this.eat(0x2c));
        return this.eat(0x7d);
      default:
        return false;
    }
  }
}

export const NULL_BYTES = Buffer.from('null');
export const TRUE_BYTES = Buffer.from('true');
export const FALSE_BYTES = Buffer.from('false');
