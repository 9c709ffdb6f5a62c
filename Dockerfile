# webpilot as a container: build with cargo, run on Debian slim with Debian's Chromium and the
# same fonts scripts/setup installs. Listens on 0.0.0.0, so a token is required:
#   docker build -t webpilot .
#   docker run -p 8931:8931 -e WEBPILOT_TOKEN="$(openssl rand -hex 24 | tee token.txt)" -v webpilot-data:/data webpilot

FROM rust:1-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY crates crates
COPY src src
COPY benches benches
COPY assets assets
RUN cargo build --release --locked -p webpilot -p webpilot-pdf

FROM debian:bookworm-slim
# Unpinned on purpose: Debian's chromium follows its security updates (as scripts/setup does).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        chromium fonts-liberation fonts-dejavu-core tini ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 webpilot \
    && mkdir /data \
    && chown webpilot:webpilot /data
COPY --from=build /src/target/release/webpilot /src/target/release/webpilot-pdf /usr/local/bin/
USER 10001
ENV WEBPILOT_BIND=0.0.0.0 \
    WEBPILOT_PORT=8931 \
    WEBPILOT_DATA_DIR=/data \
    WEBPILOT_CHROMIUM=/usr/bin/chromium
VOLUME ["/data"]
EXPOSE 8931
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s \
    CMD ["curl", "-fsS", "http://127.0.0.1:8931/healthz"]
# tini reaps Chromium's zombie children and forwards SIGTERM for a clean shutdown.
ENTRYPOINT ["/usr/bin/tini", "--", "webpilot"]
CMD ["serve"]
