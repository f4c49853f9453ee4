# syntax=docker/dockerfile:1.7
#
# The maintainer image: one static binary on distroless (no shell, no package manager), running as
# the nonroot user 65532.
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) \
#                --build-arg COMMIT=$(git rev-parse HEAD) -t iceberg-maintainer .
#   (or: make image)
#
# The go build line below is the one deploy/kubernetes/validate's TestStaticBinary reproduces
# (CGO_ENABLED=0, -trimpath, these -ldflags) to check the binary is static: keep them in step.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
ARG COMMIT=unknown
WORKDIR /src
ENV CGO_ENABLED=0 \
    GOTOOLCHAIN=local \
    GOFLAGS=-buildvcs=false
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/maintainer ./cmd/maintainer

# A smoke test in the build stage when the image is for the build machine's architecture.
RUN if [ "${TARGETOS}/${TARGETARCH}" = "$(go env GOHOSTOS)/$(go env GOHOSTARCH)" ]; then \
      /out/maintainer version; \
    fi

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG COMMIT=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="iceberg-maintainer" \
      org.opencontainers.image.description="Keeps Apache Iceberg tables healthy: compaction, snapshot expiry, orphan-file removal" \
      org.opencontainers.image.source="https://github.com/iceberg-maintainer/maintainer" \
      org.opencontainers.image.url="https://github.com/iceberg-maintainer/maintainer" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.base.name="gcr.io/distroless/static-debian12:nonroot"
# distroless/static has the CA certificates (for S3, REST catalogs over TLS), tzdata and
# /etc/passwd with nonroot (65532).
COPY --from=build --chown=0:0 --chmod=0755 /out/maintainer /maintainer
USER 65532:65532
# serve: /metrics, /healthz, /readyz, /v1/trigger, /v1/alertmanager, /v1/status (server.listen)
EXPOSE 8080
ENTRYPOINT ["/maintainer"]
CMD ["--help"]
