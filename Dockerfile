# rowgate in a container: a static binary on an empty image.
#
#   docker build -t rowgate .
#   docker run -p 3000:3000 -v rowgate-data:/data rowgate                      # SQLite in /data
#   docker run -p 3000:3000 -e ROWGATE_DB_URI=postgres://authenticator:secret@db/app \
#     -e ROWGATE_DB_ANON_ROLE=web_anon rowgate                                 # PostgreSQL
#
# Every option is a ROWGATE_* variable (docs/configuration.md), or mount a configuration file and
# set ROWGATE_CONFIG. The health check asks /ready (a connection can be had, the schema is loaded).

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# Linked statically (glibc's own name resolution is built in since 2.34): the image needs no
# libc. Without debug information and symbols: about 29 MB.
RUN RUSTFLAGS="-C target-feature=+crt-static" CARGO_PROFILE_RELEASE_DEBUG=false \
    CARGO_PROFILE_RELEASE_STRIP=symbols \
    cargo build --release --locked --target x86_64-unknown-linux-gnu \
 && install -D target/x86_64-unknown-linux-gnu/release/rowgate /out/rowgate \
 && mkdir -p /out/data /out/tmp

FROM scratch
COPY --from=build /out/rowgate /rowgate
# COPY makes everything root's, and does not keep a directory's mode: the server's user must own
# the directories it writes.
COPY --from=build --chown=65532:65532 /out/tmp /tmp
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
WORKDIR /data
VOLUME /data
ENV ROWGATE_SERVER_HOST=0.0.0.0 \
    ROWGATE_SERVER_PORT=3000 \
    ROWGATE_DB_URI=sqlite:/data/rowgate.db
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/rowgate", "health", "http://127.0.0.1:3000/ready"]
ENTRYPOINT ["/rowgate"]
CMD ["serve"]
