import { readFileSync } from 'node:fs';
import { RelayError } from '../errors.js';

const REDACTED = '(redacted)';

/**
 * A password, token or connection string. It prints as "(redacted)" however it is turned into
 * text (template string, JSON, util.inspect), so it cannot reach a log line or an error message
 * by accident; `reveal()` is the one way to the value, called where a connection is made.
 *
 * From a file (`<NAME>_FILE`, the Docker and Kubernetes secret convention) it is read again at
 * every `reveal()`: a rotated secret takes effect at the next connection, without a restart.
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

  static fromFile(source: string, file: string): Secret {
    const secret = new Secret(source, () => readSecretFile(source, file), file);
    secret.reveal();
    return secret;
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
