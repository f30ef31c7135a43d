# One image for every role: admm-coordinator, admm-party and admm-share. docker-compose.yml
# builds it once (as admm-share:local) and runs every service from it.

# Build: install exactly what the lockfile says, compile, then drop the dev dependencies.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.base.json tsconfig.json ./
COPY packages ./packages
RUN npm ci --no-audit --no-fund && npm run build && npm prune --omit=dev

# Run: the built workspace only (no compiler, no npm cache), owned by root and so read-only
# to the processes, which run as the base image's unprivileged `node` user (uid 1000; numeric,
# so that a runtime can check it is not root without reading /etc/passwd).
FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app ./
# The compose file's volume mount points, owned by that user: a new named volume takes the
# owner of the directory it is mounted on, so /data and /results are writable by the jobs.
RUN mkdir -p /data /results && chown 1000:1000 /data /results
USER 1000:1000
ENV PATH=/app/node_modules/.bin:$PATH
