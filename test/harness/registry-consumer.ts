import { SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import avro from 'avsc';
import { inject } from 'vitest';

// What any consumer would write: timestamp-millis as Date, straight from the avsc docs. Nothing of the relay.
class DateType extends avro.types.LogicalType {
  protected override _fromValue(value: number): Date {
    return new Date(value);
  }
  protected override _toValue(value: unknown): number | undefined {
    return value instanceof Date ? value.getTime() : undefined;
  }
  protected override _resolve(type: avro.Type) {
    return avro.Type.isType(type, 'long', 'logical:timestamp-millis') ? (value: number) => new Date(value) : undefined;
  }
}

/** A registry client as a consumer that knows nothing of the relay would build it. */
export function consumerRegistry(url = inject('services').schemaRegistryUrl): SchemaRegistry {
  return new SchemaRegistry({ host: url }, { [SchemaType.AVRO]: { logicalTypes: { 'timestamp-millis': DateType } } });
}
