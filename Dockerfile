# outbox-relay image: `docker build -t outbox-relay .`
# One image for every command: run (default), setup, prune --every 60s, status, replay, drop-slot,
# webhooks, webhooks api (with the customer portal's files).
#
# Build arguments:
#   NODE_IMAGE (node:24-bookworm-slim)  Node.js 24 with npm (Debian-based): builds the image and
#                                       gives it its node binary
#   RUNTIME_IMAGE (debian:bookworm-slim)  what the image runs on: the same Debian as NODE_IMAGE's,
#                                       without npm, Corepack or a package cache (about 20 MB less)
#   LIBRDKAFKA (false)                  true: the librdkafka client (OUTBOX_KAFKA_CLIENT=librdkafka)
#                                       built in, linked to Debian's libraries (scripts/librdkafka.sh):
#                                       Debian's compilers in the build stage and its libraries in the
#                                       image; NODE_IMAGE must have Node's headers (the official
#                                       images do). The default client, kafkajs, needs neither.

ARG NODE_IMAGE=node:24-bookworm-slim
ARG RUNTIME_IMAGE=debian:bookworm-slim

# The production dependencies, in a stage of their own: it runs again only when the package
# files change (a source change rebuilds the build stage's dist alone). --ignore-scripts: no
# dependency's install script runs (the relay needs none; @confluentinc/kafka-javascript's would
# download a prebuilt binary): the librdkafka client is built by scripts/librdkafka.sh, only when
# asked, and otherwise left out.
FROM ${NODE_IMAGE} AS dependencies
ARG LIBRDKAFKA=false
WORKDIR /app
RUN if [ "$LIBRDKAFKA" = true ]; then \
      apt-get update \
      && apt-get install -y --no-install-recommends build-essential patch python3 pkg-config libssl-dev libsasl2-dev libzstd-dev liblz4-dev zlib1g-dev libcurl4-openssl-dev \
      && rm -rf /var/lib/apt/lists/*; \
    fi
COPY package.json package-lock.json ./
COPY scripts/librdkafka.sh scripts/kafka-javascript.patch ./scripts/
RUN npm ci --omit=dev --no-audit --no-fund --ignore-scripts \
 && if [ "$LIBRDKAFKA" = true ]; then \
      scripts/librdkafka.sh \
      && rm -rf node_modules/@confluentinc/kafka-javascript/build/Release/obj.target node_modules/@confluentinc/kafka-javascript/build/deps/*.a node_modules/@confluentinc/kafka-javascript/deps/librdkafka; \
    else \
      rm -rf node_modules/@confluentinc/kafka-javascript; \
    fi \
 && npm cache clean --force

# dist/ from src/ with TypeScript (a dev dependency): every dependency, then the sources.
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

FROM ${RUNTIME_IMAGE}
ARG LIBRDKAFKA=false
# Node.js alone (it needs only glibc and libstdc++, which Debian has), as the user the official
# Node.js images have; and the librdkafka client's shared libraries (the dependencies stage
# linked it to them), when built in.
COPY --from=build /usr/local/bin/node /usr/local/bin/node
RUN groupadd --gid 1000 node \
 && useradd --uid 1000 --gid node --shell /usr/sbin/nologin --no-create-home --home-dir /app node \
 && if [ "$LIBRDKAFKA" = true ]; then \
      apt-get update \
      && apt-get install -y --no-install-recommends libssl3 libsasl2-2 libzstd1 liblz4-1 zlib1g libcurl4 \
      && rm -rf /var/lib/apt/lists/*; \
    fi
ENV NODE_ENV=production \
    # In a container the metrics/health server must listen beyond loopback.
    OUTBOX_HTTP_HOST=0.0.0.0 \
    OUTBOX_HTTP_PORT=9464 \
    # So must `webhooks api` (its port: OUTBOX_WEBHOOK_API_PORT, 8088).
    OUTBOX_WEBHOOK_API_HOST=0.0.0.0
WORKDIR /app
# Owned by root and not writable by the runtime user: the process needs no writes
# (works with a read-only root filesystem).
COPY --from=dependencies /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY sql ./sql
COPY schemas ./schemas
# The customer portal's static files, which `webhooks api` serves at /portal/ (read once at its
# start from /app/portal/, beside dist/: without them every /portal/ page is a 404).
COPY portal ./portal
# The `node` user, numeric so that Kubernetes runAsNonRoot can verify it.
USER 1000:1000
# Metrics and health of run, prune and webhooks (OUTBOX_HTTP_PORT); `webhooks api` (OUTBOX_WEBHOOK_API_PORT).
EXPOSE 9464 8088
# Liveness for plain `docker run`; compose and Kubernetes define their own probes. /healthz on
# OUTBOX_HTTP_PORT (run, prune, webhooks) or on OUTBOX_WEBHOOK_API_PORT (webhooks api): a container
# runs one command, so whichever answers is its own.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "Promise.any([process.env.OUTBOX_HTTP_PORT||9464,process.env.OUTBOX_WEBHOOK_API_PORT||8088].map(p=>fetch('http://127.0.0.1:'+p+'/healthz').then(r=>r.ok||Promise.reject()))).then(()=>process.exit(0),()=>process.exit(1))"]
# Node is PID 1 and handles SIGTERM itself (drain, confirm, exit 0). 16 MB semi-spaces: with
# Node 24's default young generation a relay draining a backlog peaked at ~300 MB RSS, with
# these at ~150 MB, for the same CPU (README: Performance). Every way of starting it sets this.
ENTRYPOINT ["node", "--max-semi-space-size=16", "dist/cli.js"]
CMD ["run"]
