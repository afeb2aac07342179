#!/usr/bin/env bash
# Kafka's class runner for its tools, as far as the compose file's healthcheck needs it: one
# short-lived JVM (the quick compiler, a small heap), warnings only.
exec java ${KAFKA_HEAP_OPTS:--Xmx256m} -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.awt.headless=true \
  -Dlog4j2.configurationFile=/opt/kafka/config/log4j2-tools.properties -cp '/opt/kafka/libs/*' "$@"
