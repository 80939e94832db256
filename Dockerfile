# syntax=docker/dockerfile:1
# The service as a container image: browser and context sessions in a default
# unprivileged container (each browser in its own cell, native/cell.c),
# sandboxes with --privileged. See docs/operations/container.md.
#
#   docker build -t rbs .
#   docker run -d --name rbs -p 127.0.0.1:8080:8080 --security-opt systempaths=unconfined \
#     -v rbs-data:/data rbs
#
# Behind a TLS-intercepting proxy, give the build its CA bundle as a secret
# (never baked into a layer):
#   docker build --secret id=ca,src=/etc/ssl/certs/ca-certificates.crt -t rbs .

ARG DEBIAN=debian:bookworm-slim

# ---- build: dependencies, the dashboard, the native helpers --------------------------------------
FROM ${DEBIAN} AS build
ARG NPM_VERSION=11.19.1
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates curl gcc libc6-dev binutils \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
# The Node the project pins (package-lock's `node`) and npm, from the npm registry; they install
# the dependencies, whose `node` then runs everything after, and the service.
RUN --mount=type=secret,id=ca,required=false \
    set -e; \
    ca=""; if [ -s /run/secrets/ca ]; then ca="--cacert /run/secrets/ca"; fi; \
    version=$(sed -n '/"node_modules\/node": {/,/}/s/.*"version": "\([^"]*\)".*/\1/p' package-lock.json); \
    case "$(uname -m)" in x86_64) arch=x64 ;; aarch64) arch=arm64 ;; *) echo "no Node for $(uname -m)"; exit 1 ;; esac; \
    mkdir -p /opt/node /opt/npm; \
    curl -fsSL $ca "https://registry.npmjs.org/node-linux-$arch/-/node-linux-$arch-$version.tgz" | tar xz -C /opt/node --strip-components=1; \
    curl -fsSL $ca "https://registry.npmjs.org/npm/-/npm-$NPM_VERSION.tgz" | tar xz -C /opt/npm --strip-components=1; \
    printf '#!/bin/sh\nexec /opt/node/bin/node /opt/npm/bin/npm-cli.js "$@"\n' > /usr/local/bin/npm; \
    chmod +x /usr/local/bin/npm
ENV PATH=/opt/node/bin:$PATH
RUN --mount=type=secret,id=ca,required=false \
    NODE_EXTRA_CA_CERTS=/run/secrets/ca npm ci --no-audit --no-fund --loglevel=error
ENV PATH=/app/node_modules/.bin:$PATH
COPY . .
# The pinned Node ships with its debug symbols (strip), the dependencies with their type
# declarations and source maps: 130 MB the service never reads.
RUN node --version \
 && vite build --config web/vite.config.ts --logLevel warn \
 && node -e 'import("./scripts/sandbox-setup.mjs").then((m) => process.exit(m.buildNative(console.log) ? 0 : 1))' \
 && npm prune --omit=dev --no-audit --no-fund --loglevel=error \
 && find node_modules -type f \( -name "*.d.ts" -o -name "*.d.mts" -o -name "*.d.cts" -o -name "*.map" \) -delete \
 && strip node_modules/node/bin/node \
 && rm -rf web/src

# ---- the service ---------------------------------------------------------------------------------
FROM ${DEBIAN} AS service
ARG VERSION=dev
LABEL org.opencontainers.image.title="remote-browser-service" \
      org.opencontainers.image.description="Self-hostable remote browsers, context sessions and runc sandboxes over one REST, CDP and MCP API" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.version="${VERSION}"
# Chromium and its fonts, ffmpeg for recordings, tini as the init that forwards signals, and runc
# with e2fsprogs for sandboxes (used only in a --privileged container).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      chromium fonts-liberation webext-ublock-origin-chromium ffmpeg tini ca-certificates runc e2fsprogs \
 && rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/* \
 && useradd --uid 10001 --user-group --home-dir /data --no-create-home rbs \
 && mkdir -p /data /blobs && chown rbs:rbs /data /blobs && chmod 0700 /data /blobs
COPY --from=build --chown=root:root /app /app
# `rbs` (the operator's command line) on the PATH: `docker exec rbs rbs doctor`.
RUN ln -s /app/bin/rbs.mjs /usr/local/bin/rbs
WORKDIR /app
ENV PATH=/app/node_modules/.bin:$PATH \
    NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    DATA_DIR=/data \
    CHROME_PATH=/usr/bin/chromium \
    RBS_CONTAINER=1
# DATA_DIR: the embedded database, profiles, secrets.json, recordings (unless BLOB_STORE names
# another place, such as /blobs shared between nodes).
VOLUME ["/data"]
EXPOSE 8080
USER rbs
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# The service is the container's process (under tini, which passes signals on): `docker stop`
# sends it SIGTERM and it drains. `docker run IMAGE rbs doctor` runs a command instead.
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "--experimental-strip-types", "--disable-warning=ExperimentalWarning", "src/main/main.ts"]

# ---- the default sandbox image's root file system (the `sandboxes` target) -----------------------
FROM ${DEBIAN} AS sandbox-rootfs
COPY scripts/sandbox-setup.mjs /tmp/sandbox-setup.mjs
# The packages the set-up's mmdebstrap installs (PACKAGES in scripts/sandbox-setup.mjs), the same way.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      $(sed -n '/^export const PACKAGES = \[/,/^\]/p' /tmp/sandbox-setup.mjs | grep -o '"[^"]*"' | tr -d '"') \
 && rm -rf /var/lib/apt/lists/* /tmp/sandbox-setup.mjs

# ---- the service with sandboxes: `docker build --target sandboxes`, run --privileged --------------
# Sandboxes are runc containers made as root, each with a uid range and a disk of its own: the
# container runs as root, privileged (nested runc, loop devices for the disks). The default
# sandbox image is in it, built from the stage above.
FROM service AS sandboxes
USER root
# umoci unpacks images; skopeo turns a pulled account image (POST /v1/images) into an OCI layout.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends umoci skopeo \
 && rm -rf /var/lib/apt/lists/*
COPY --from=sandbox-rootfs / /tmp/sandbox-rootfs/
RUN tar -C /tmp/sandbox-rootfs --exclude=./proc --exclude=./sys --exclude=./dev -cf /tmp/rootfs.tar . \
 && rm -rf /tmp/sandbox-rootfs \
 && node -e 'import("./scripts/sandbox-setup.mjs").then((m) => process.exit(m.buildDefaultImage("/opt/rbs/images", console.log, { rootfs: "/tmp/rootfs.tar", unpack: false }) ? 0 : 1))' \
 && rm -f /tmp/rootfs.tar
# A sandbox's root is an idmapped mount of its image, which the container's own overlay file system
# refuses: the image store lives on the /data volume, seeded from the image's copy at the first start
# (the service unpacks it there at its first sandbox).
COPY deploy/sandboxes-entrypoint.sh /usr/local/bin/rbs-sandboxes-entrypoint
ENV SANDBOX_IMAGES_DIR=/data/images
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/rbs-sandboxes-entrypoint"]
CMD ["node", "--experimental-strip-types", "--disable-warning=ExperimentalWarning", "src/main/main.ts"]

# ---- the default target (`docker build -t rbs .`): the service, without sandboxes ----------------
FROM service
