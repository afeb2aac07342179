import { TypeBoxValidatorCompiler } from '@fastify/type-provider-typebox';
import type { FastifySchemaCompiler, FastifySchemaValidationError } from 'fastify';
import type { TSchema } from 'typebox';

/** How an integer is written in a query or a path: digits, perhaps a sign; no 1.5, 1e1, 0x10, true or ''. */
const INTEGER = /^-?[0-9]+$/;

interface IntegerField {
  readonly name: string;
  readonly minimum: number | undefined;
  readonly maximum: number | undefined;
}

/**
 * The API's validator: TypeBox's, except that an integer of a query, a path or a header must be
 * written as one. TypeBox converts those strings before checking them, and its conversion reads
 * `true` as 1 and `1.5` as 1: a request asking for something it did not mean would be answered.
 * Bodies are JSON, their numbers already numbers: TypeBox alone checks them.
 */
export const validatorCompiler: FastifySchemaCompiler<TSchema> = (route) => {
  const check = TypeBoxValidatorCompiler(route);
  const integers = route.httpPart === 'body' ? [] : integerFields(route.schema);
  if (integers.length === 0) return check;
  return (value: unknown) => {
    const fields = (value ?? {}) as Record<string, unknown>;
    for (const field of integers) {
      const raw = fields[field.name];
      if (raw === undefined) continue;
      const number = typeof raw === 'string' && INTEGER.test(raw) ? Number(raw) : Number.NaN;
      const inRange = Number.isSafeInteger(number) && (field.minimum === undefined || number >= field.minimum) && (field.maximum === undefined || number <= field.maximum);
      if (!inRange) return { error: [refusal(field, raw)] };
    }
    return check(value);
  };
};

function integerFields(schema: TSchema): readonly IntegerField[] {
  const properties = (schema as { properties?: Record<string, { type?: unknown; minimum?: number; maximum?: number }> }).properties ?? {};
  return Object.entries(properties)
    .filter(([, property]) => property.type === 'integer')
    .map(([name, property]) => ({ name, minimum: property.minimum, maximum: property.maximum }));
}

function refusal(field: IntegerField, raw: unknown): FastifySchemaValidationError {
  const range = field.minimum !== undefined && field.maximum !== undefined ? ` from ${field.minimum} to ${field.maximum}` : field.minimum !== undefined ? ` of at least ${field.minimum}` : field.maximum !== undefined ? ` of at most ${field.maximum}` : '';
  const given = Array.isArray(raw) ? 'it more than once' : JSON.stringify(String(raw).slice(0, 40));
  return { keyword: 'type', instancePath: `/${field.name}`, schemaPath: `#/properties/${field.name}`, params: { type: 'integer' }, message: `expected an integer${range}, got ${given}` };
}
