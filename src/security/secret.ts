import { readFileSync } from 'node:fs';
import { RelayError } from '../errors.js';

const REDACTED = '(redacted)';

/**
 * A password, token or connection string. It prints as "(redacted)" however it is turned into
 * text (template string, JSON, util.inspect), so it cannot reach a log line or an error message
 * by accident; `reveal()` is the one way to the value, called where a connection is made.
 *
 * From a file (`<NAME>_FILE`, the Docker and Kubernetes secret convention) it is read again at
 * every `reveal()`: a rotated secret takes effect at the next connection, without a restart; a
 * rotated value its option refuses, or a file that cannot be read, keeps the last good value.
 */
export class Secret {
  private constructor(
    /** The variable it came from, for messages. */
    readonly source: string,
    private readonly read: () => string,
    /** Set when the value comes from a file: shown in the start-up log instead of the value. */
    readonly file: string | null,
  ) {}

  static fromValue(source: string, value: string): Secret {
    return new Secret(source, () => value, null);
  }

  /**
   * `check` (the option's parser) throws for a value it refuses: at the first read the error
   * goes to the caller (the start fails); at a later read the value is refused with a warning
   * and the last good one kept, as it is when the file cannot be read (a rotation half done).
   */
  static fromFile(source: string, file: string, check: (value: string) => void = () => {}): Secret {
    let good = readSecretFile(source, file);
    check(good);
    let warned: string | null = null;
    return new Secret(
      source,
      () => {
        try {
          const value = readSecretFile(source, file);
          check(value);
          good = value;
          warned = null;
        } catch (error) {
          const reason = error instanceof RelayError ? error.message : `${source}: ${file} holds a value its option refuses (${(error as Error).message})`;
          // Once per reason, not at every read.
          if (reason !== warned) process.emitWarning(`${reason}; the last good value is kept`, { type: 'SecretFileWarning', code: 'CONFIG_INVALID' });
          warned = reason;
        }
        return good;
      },
      file,
    );
  }

  reveal(): string {
    return this.read();
  }

  toString(): string {
    return REDACTED;
  }

  toJSON(): string {
    return this.file ? `${REDACTED} from ${this.file}` : REDACTED;
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return this.toJSON();
  }
}

/** A secret file's content without the trailing newline editors and `echo` add. */
function readSecretFile(source: string, file: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new RelayError('CONFIG_INVALID', `${source}: cannot read ${file} (${reason}); expected a readable file holding the secret`, { cause: error });
  }
  const value = text.replace(/\r?\n$/, '');
  if (value === '') throw new RelayError('CONFIG_INVALID', `${source}: ${file} is empty; expected the secret`);
  return value;
}
