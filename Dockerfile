# syntax=docker/dockerfile:1
# The image of any service in services.json, named by the WORKSPACE build argument. Build from the
# repository root:
#   docker build --build-arg WORKSPACE=users-service -t rest-microservices/users-service:dev .
# (gateway/Dockerfile builds the gateway the same way.)

# Every package.json and the lockfile, where they are, and the script of the root's postinstall
# (npm ci runs it), and nothing else: the npm ci layers below are rebuilt when dependencies change,
# not on every change of a source file, and no workspace is named here.
FROM node:24-slim AS manifests
WORKDIR /app
COPY . .
RUN mkdir /manifests && find . \( -name package.json -o -name package-lock.json -o -path ./scripts/drop-disallowed-builds.mjs \) -exec cp --parents {} /manifests \;

# Compiles every workspace: the same stage in gateway/Dockerfile, built once for the whole stack.
FROM node:24-slim AS build
WORKDIR /app
COPY --from=manifests /manifests/ ./
RUN npm ci
COPY . .
RUN npx tsc -b

# The production dependencies of the workspace and @app/shared only.
FROM node:24-slim AS production-dependencies
ARG WORKSPACE
WORKDIR /app
COPY --from=manifests /manifests/ ./
# A dependency whose version differs from the hoisted one is installed under the workspace's node_modules.
RUN npm ci --omit=dev --workspace $WORKSPACE && mkdir -p $WORKSPACE/node_modules

FROM node:24-slim
ARG WORKSPACE
WORKDIR /app/$WORKSPACE
COPY --from=production-dependencies /app/node_modules /app/node_modules
COPY --from=production-dependencies /app/$WORKSPACE/node_modules /app/$WORKSPACE/node_modules
COPY --from=build /app/services.json /app/
COPY --from=build /app/shared/package.json /app/shared/
COPY --from=build /app/shared/dist /app/shared/dist
COPY --from=build /app/$WORKSPACE/package.json /app/$WORKSPACE/
COPY --from=build /app/$WORKSPACE/dist /app/$WORKSPACE/dist
# Read at run time, relative to dist/, by the migrations that run on start and by dist/migrate.js:
# the resource engine's, then the service's own.
COPY shared/migrations /app/shared/migrations
COPY $WORKSPACE/migrations /app/$WORKSPACE/migrations
# The files above stay owned by root: the process can read them, not change them.
USER node
# Every service listens on 8080 in a container: Compose and Kubernetes tell them apart by name.
# On every interface of the container (outside one, a service listens on loopback only): the
# container's network is where the gateway reaches it, and nothing else does (docs/architecture.md).
ENV PORT=8080
ENV HOST=0.0.0.0
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/healthz').then((res) => process.exit(res.ok ? 0 : 1), () => process.exit(1))"]
# node as PID 1 (not npm), so SIGTERM reaches the process and starts its graceful shutdown; with
# the V8 options of its `npm start` (its package.json), which keep its memory small under load
# (docs/performance.md).
CMD ["node", "--import", "@app/shared/telemetry/preload", "--max-semi-space-size=8", "dist/main.js"]
