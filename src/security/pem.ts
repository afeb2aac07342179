import { readFileSync } from 'node:fs';
import { RelayError } from '../errors.js';

/** A PEM file (CA bundle, certificate, key) named by `variable`; a clear CONFIG_INVALID if it is not one. */
export function readPem(variable: string, file: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new RelayError('CONFIG_INVALID', `${variable}: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); expected a PEM file`, { cause: error });
  }
  if (!text.includes('-----BEGIN ')) throw new RelayError('CONFIG_INVALID', `${variable}: ${file} is not PEM (no -----BEGIN line)`);
  return text;
}
