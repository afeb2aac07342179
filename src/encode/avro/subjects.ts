/**
 * Subject naming strategies, as Confluent's serializers name them:
 * topic        `<topic>-value` / `<topic>-key` (TopicNameStrategy, the default)
 * record       `<namespace>.<name>` of the record (RecordNameStrategy)
 * topic-record `<topic>-<namespace>.<name>` (TopicRecordNameStrategy)
 */
export type SubjectStrategy = 'topic' | 'record' | 'topic-record';
export const SUBJECT_STRATEGIES: readonly SubjectStrategy[] = ['topic', 'record', 'topic-record'];

export function subjectName(strategy: SubjectStrategy, part: 'key' | 'value', topic: string, fullName: string | undefined): string {
  if (strategy === 'topic') return `${topic}-${part}`;
  if (fullName === undefined) throw new Error(`the ${strategy} subject strategy needs a named schema (record, enum or fixed) for the ${part}`);
  return strategy === 'record' ? fullName : `${topic}-${fullName}`;
}

/** Whether the subject depends on the topic (then it is known only when an event arrives). */
export function subjectNeedsTopic(strategy: SubjectStrategy): boolean {
  return strategy !== 'record';
}
