import { describe, expect, it } from 'vitest';
import { customerIdProblem, customerOf, describeCustomerRule, parseCustomerRule } from './customer-rule.js';

const event = (fields: { headers?: Record<string, string>; payload?: unknown; aggregateId?: string | null }) => ({ headers: fields.headers ?? {}, payload: fields.payload ?? {}, aggregateId: fields.aggregateId ?? null });

describe('the customer rule', () => {
  it('reads the three shapes an operator writes, and says what is wrong with any other', () => {
    for (const written of ['header:customer_id', 'payload:/customer/id', 'aggregate_id', 'payload:/a~1b/c~0d']) expect(describeCustomerRule(parseCustomerRule(written))).toBe(written);
    expect(parseCustomerRule('payload:/a~1b/c~0d')).toMatchObject({ path: ['a/b', 'c~d'] });
    expect(() => parseCustomerRule('header:')).toThrow(/names the header "": expected a header name/);
    expect(() => parseCustomerRule('payload:customer')).toThrow(/expected a JSON pointer starting with \//);
    expect(() => parseCustomerRule('customer_id')).toThrow(/is "customer_id", not a rule/);
  });

  it('finds the customer in a header, a payload field (JSON or decoded Avro) or the aggregate id', () => {
    expect(customerOf(parseCustomerRule('header:customer_id'), event({ headers: { customer_id: 'cus_1' } }))).toEqual({ customerId: 'cus_1' });
    expect(customerOf(parseCustomerRule('payload:/customer/id'), event({ payload: { customer: { id: 'cus_2' } } }))).toEqual({ customerId: 'cus_2' });
    // A numeric id, as JSON parses it or Avro's long decodes it.
    expect(customerOf(parseCustomerRule('payload:/customer_id'), event({ payload: { customer_id: 42 } }))).toEqual({ customerId: '42' });
    expect(customerOf(parseCustomerRule('payload:/customer_id'), event({ payload: { customer_id: 42n } }))).toEqual({ customerId: '42' });
    expect(customerOf(parseCustomerRule('aggregate_id'), event({ aggregateId: 'cus_3' }))).toEqual({ customerId: 'cus_3' });
  });

  it('never guesses: missing, null, empty, structured or imprecise values are no customer, with the reason', () => {
    const header = parseCustomerRule('header:customer_id');
    const field = parseCustomerRule('payload:/customer/id');
    expect(customerOf(header, event({ headers: { other: 'cus_1' } }))).toEqual({ customerId: null, missing: 'no header customer_id' });
    expect(customerOf(header, event({ headers: { customer_id: '' } })).customerId).toBeNull();
    // {"customer_id": null} in the outbox's headers column, as the relay carries it.
    expect(customerOf(header, event({ headers: { customer_id: 'null' } }))).toEqual({ customerId: null, missing: 'header customer_id is null' });
    expect(customerOf(field, event({ payload: { customer: null } }))).toEqual({ customerId: null, missing: 'no payload field /customer/id' });
    expect(customerOf(field, event({ payload: { customer: { id: null } } }))).toEqual({ customerId: null, missing: 'payload field /customer/id is null' });
    expect(customerOf(field, event({ payload: { customer: { id: { nested: 1 } } } }))).toMatchObject({ customerId: null, missing: 'payload field /customer/id is an object, not a customer id (a string or a safe integer)' });
    // Beyond 2^53 JSON.parse has rounded it to another number: someone else's id, perhaps.
    expect(customerOf(parseCustomerRule('payload:/id'), event({ payload: { id: 2 ** 53 + 2 } })).customerId).toBeNull();
    expect(customerOf(parseCustomerRule('payload:/id'), event({ payload: 'not an object' })).customerId).toBeNull();
    // A property of every object is not a field of the payload.
    expect(customerOf(parseCustomerRule('payload:/constructor'), event({ payload: {} })).customerId).toBeNull();
    expect(customerOf(parseCustomerRule('aggregate_id'), event({ aggregateId: null }))).toEqual({ customerId: null, missing: 'aggregate id is null' });
  });

  it('takes no customer id "null", wherever it is read: a JSON null arrives as that text, and no endpoint could ever get its events', () => {
    expect(customerIdProblem('null')).toMatch(/^"null" is not a customer id: it is how a JSON null arrives/);
    expect(customerOf(parseCustomerRule('payload:/customer_id'), event({ payload: { customer_id: 'null' } }))).toEqual({ customerId: null, missing: expect.stringContaining('"null" is not a customer id') });
    expect(customerOf(parseCustomerRule('aggregate_id'), event({ aggregateId: 'null' }))).toEqual({ customerId: null, missing: expect.stringContaining('"null" is not a customer id') });
    // Only the exact text: an id that merely contains it, or another case, is someone's.
    for (const id of ['NULL', 'Null', 'nullable', 'cus_null']) expect(customerIdProblem(id), id).toBeNull();
  });

  it('counts a customer id in characters, as the API does: 255 outside the BMP are taken, 256 are not; C1 controls are refused', () => {
    expect(customerIdProblem('\u{1F600}'.repeat(255))).toBeNull();
    expect(customerIdProblem('\u{1F600}'.repeat(256))).toMatch(/expected 1 to 255 characters/);
    expect(customerIdProblem('cus_\u0085')).toMatch(/not a customer id/);
  });
});
