# syntax=docker/dockerfile:1
# outbox-relay image: `docker build -t outbox-relay .`
# One image for every command: run (default), setup, prune --every 60s, status, replay, drop-slot.

ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
# What the librdkafka client (OUTBOX_KAFKA_CLIENT=librdkafka) is built with: linked to Debian's
# libraries, no download (scripts/librdkafka.sh, which npm ci's postinstall runs).
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential python3 pkg-config libssl-dev libsasl2-dev libzstd-dev liblz4-dev zlib1g-dev libcurl4-openssl-dev \
 && rm -rf /var/lib/apt/lists/*
# Dependencies first, so a source change does not reinstall them.
COPY package.json package-lock.json ./
COPY scripts/librdkafka.sh ./scripts/
RUN npm ci --no-audit --no-fund \
 && scripts/librdkafka.sh \
 && rm -rf node_modules/@confluentinc/kafka-javascript/build/Release/obj.target node_modules/@confluentinc/kafka-javascript/build/deps/*.a node_modules/@confluentinc/kafka-javascript/deps/librdkafka
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build \
 && npm prune --omit=dev --no-audit --no-fund \
 && npm cache clean --force

FROM ${NODE_IMAGE}
# The librdkafka client's shared libraries (the build stage linked it to them).
RUN apt-get update \
 && apt-get install -y --no-install-recommends libssl3 libsasl2-2 libzstd1 liblz4-1 zlib1g libcurl4 \
 && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production \
    # In a container the metrics/health server must listen beyond loopback.
    OUTBOX_HTTP_HOST=0.0.0.0 \
    OUTBOX_HTTP_PORT=9464
WORKDIR /app
# Owned by root and not writable by the runtime user: the process needs no writes
# (works with a read-only root filesystem).
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY sql ./sql
COPY schemas ./schemas
# The `node` user of the base image, numeric so that Kubernetes runAsNonRoot can verify it.
USER 1000:1000
EXPOSE 9464
# Liveness for plain `docker run`; compose and Kubernetes define their own probes.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.OUTBOX_HTTP_PORT||9464)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# Node is PID 1 and handles SIGTERM itself (drain, confirm, exit 0). 16 MB semi-spaces: with
# Node 24's default young generation a relay draining a backlog peaked at ~300 MB RSS, with
# these at ~150 MB, for the same CPU (README: Performance). Every way of starting it sets this.
ENTRYPOINT ["node", "--max-semi-space-size=16", "dist/cli.js"]
CMD ["run"]
