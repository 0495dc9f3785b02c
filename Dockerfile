# The cloudgate CCM images for users who build with Docker (or BuildKit, Podman, Kaniko).
# `make image` builds the same images without a Docker daemon (deploy/image); both give:
# a static (CGO_ENABLED=0) binary at /cloud-controller-manager as the entrypoint, user
# 65532:65532 (nonroot), CA certificates at /etc/ssl/certs/ca-certificates.crt, and the
# org.opencontainers.image.* labels.
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty --match 'v*') \
#     --build-arg GIT_COMMIT=$(git rev-parse HEAD) -t cloudgate-aws-ccm .
#   # the GCE build (cloudgate in front of the GCE provider):
#   #   --build-arg MODULE=providers/gce --build-arg IMAGE_NAME=cloudgate-gce-ccm -t cloudgate-gce-ccm
#   # the simulated-cloud build (cloudgate with simcloud, in the bench module):
#   #   --build-arg MODULE=bench --build-arg IMAGE_NAME=cloudgate-ccm
#
# VERSION must be a semantic version (vX.Y.Z[-...]): the CCM parses it.
ARG GOLANG_IMAGE=golang:1.26
# distroless/static:nonroot is /etc/passwd with nonroot (65532), CA certificates and tzdata.
ARG BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM --platform=$BUILDPLATFORM ${GOLANG_IMAGE} AS builder
ARG TARGETOS=linux
ARG TARGETARCH=amd64
# MODULE: providers/aws (the AWS CCM with cloudgate in front), providers/gce (the GCE one) or
# bench (cloudgate with simcloud).
ARG MODULE=providers/aws
ARG VERSION=v0.0.0-dev
ARG GIT_COMMIT=unknown
ARG BUILD_DATE=1970-01-01T00:00:00Z
WORKDIR /src
COPY . .
RUN cd ${MODULE} && CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath \
      -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=${VERSION} \
        -X k8s.io/component-base/version.gitCommit=${GIT_COMMIT} \
        -X k8s.io/component-base/version.buildDate=${BUILD_DATE}" \
      -o /out/cloud-controller-manager ./cmd/cloud-controller-manager

FROM ${BASE_IMAGE}
ARG VERSION=v0.0.0-dev
ARG GIT_COMMIT=unknown
ARG BUILD_DATE=1970-01-01T00:00:00Z
# IMAGE_NAME: the title label, the name make image gives the same image (cloudgate-aws-ccm,
# cloudgate-gce-ccm, cloudgate-ccm).
ARG IMAGE_NAME=cloudgate-aws-ccm
LABEL org.opencontainers.image.title="${IMAGE_NAME}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${GIT_COMMIT}" \
      org.opencontainers.image.created="${BUILD_DATE}" \
      org.opencontainers.image.source="https://github.com/cloudgate/cloudgate" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /out/cloud-controller-manager /cloud-controller-manager
USER 65532:65532
ENTRYPOINT ["/cloud-controller-manager"]
