# One image for every role: admm-coordinator, admm-party and admm-share.
FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json tsconfig.base.json tsconfig.json ./
COPY packages ./packages
RUN npm ci --no-audit --no-fund && npm run build && npm prune --omit=dev
ENV PATH=/app/node_modules/.bin:$PATH
