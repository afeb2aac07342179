#!/usr/bin/env bash
# The Postgres version matrix (issue 49; `npm test` runs it after the main run): the guarantee
# suites whose outcome depends on the server (WAL decoding, slots, pgoutput, catalog views) on
# every major the relay supports besides the stack's own 15, which the main run covers. One
# Kafka client, kafkajs (OUTBOX_TEST_KAFKA_CLIENTS): the clients do not depend on the
# Postgres version, and the main run puts every suite through both of them.
#
# Usage: scripts/test-postgres-versions.sh [MAJOR...]   (default: 14 16 17 18)
#
# Each major's run brings up its server (OUTBOX_TEST_POSTGRES: `scripts/stack.sh up pg<major>`,
# removed after the run); Kafka and the registry are the local stack's, started here if it is
# not running and stopped at the end (OUTBOX_KEEP_STACK=true keeps it). Every major runs even
# when one fails; the exit status is 1 if any did. Each run's seconds are printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

FILES=(
  test/guarantees/crash-safety.test.ts
  test/guarantees/adjacent-transactions.test.ts
  test/guarantees/idle-slot.test.ts
  test/guarantees/slot-lost.test.ts
  test/guarantees/exactly-once.test.ts
)
if [ $# -gt 0 ]; then MAJORS=("$@"); else MAJORS=(14 16 17 18); fi
# kafkajs whatever the main run's clients are (CI names all three for it): three clients here
# would triple the matrix's time and test no more of the server.
export OUTBOX_TEST_KAFKA_CLIENTS=kafkajs

if ! scripts/stack.sh status >/dev/null; then
  echo "postgres versions: starting the local stack (scripts/stack.sh up)"
  scripts/stack.sh up
  if [ "${OUTBOX_KEEP_STACK:-}" != true ]; then trap 'scripts/stack.sh down' EXIT; fi
fi

summary=()
failed=0
for major in "${MAJORS[@]}"; do
  echo "postgres versions: Postgres $major, ${FILES[*]##*/} on $OUTBOX_TEST_KAFKA_CLIENTS"
  started=$(date +%s)
  if OUTBOX_TEST_POSTGRES=$major npx vitest run --project 'integration*' "${FILES[@]}"; then
    result=passed
  else
    result=FAILED
    failed=1
  fi
  summary+=("Postgres $major: $result in $(($(date +%s) - started)) s")
done
printf 'postgres versions: %s\n' "${summary[@]}"
exit "$failed"
