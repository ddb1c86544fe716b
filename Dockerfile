# syntax=docker/dockerfile:1
# The load-worker image of `archbench k8s load --in-cluster`: one static archbench binary and
# nothing else (the workers connect to ClusterIPs, so no resolver is needed).
#
#   docker buildx build --platform linux/amd64,linux/arm64 -t REGISTRY/archbench:0.1.0 --push .
#   archbench k8s load both --in-cluster --workers 4 --image REGISTRY/archbench:0.1.0
#
# Each platform is cross-compiled on the build machine (no emulation): Rust's target for it,
# and Debian's cross gcc when it differs from the build machine's.
FROM --platform=$BUILDPLATFORM rust:1-bookworm AS build
ARG TARGETARCH
ARG BUILDARCH
RUN set -eu; \
    case "$TARGETARCH" in \
      amd64) triple=x86_64-unknown-linux-gnu; gcc=x86-64-linux-gnu; libc=amd64 ;; \
      arm64) triple=aarch64-unknown-linux-gnu; gcc=aarch64-linux-gnu; libc=arm64 ;; \
      *) echo "archbench images are built for amd64 and arm64, not $TARGETARCH" >&2; exit 1 ;; \
    esac; \
    if [ "$TARGETARCH" != "$BUILDARCH" ]; then \
      apt-get update && apt-get install -y --no-install-recommends "gcc-$gcc" "libc6-dev-$libc-cross"; \
    fi; \
    rustup target add "$triple"; \
    echo "$triple" > /triple
# Cross linkers and C compilers (ring builds C); on the build machine's own arch these
# triplet-named compilers are Debian's native ones.
ENV CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER=x86_64-linux-gnu-gcc \
    CC_x86_64_unknown_linux_gnu=x86_64-linux-gnu-gcc \
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
    CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
WORKDIR /src
COPY . .
# The same script CI runs: release, +crt-static, and a check that nothing is linked in.
RUN docker/build-static.sh "$(cat /triple)" && cp "target/$(cat /triple)/release/archbench" /archbench

FROM scratch
COPY --from=build /archbench /archbench
# For https:// targets: the build image's CA roots.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
# Not root: the control endpoint listens on 9090.
USER 65534:65534
EXPOSE 9090
ENTRYPOINT ["/archbench"]
