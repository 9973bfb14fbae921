# manent image: the binaries (manent-server, manent and its siblings
# manent-agent and manent-policy), static, non-root, FROM scratch.
# Build: docker build -t ghcr.io/manent-io/manent:dev .
# goreleaser (.goreleaser.yaml) builds the same image from its own binaries
# with Dockerfile.goreleaser, which says what the final stage holds and
# why; the two final stages differ only in where the binaries come from
# (deploy's TestDockerfilesShareTheirFinalStage).
FROM golang:1.26.8-bookworm AS build
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/manent-io/manent/pkg/version.Version=${VERSION}" \
      -o /out/ ./cmd/...

FROM scratch
ADD deploy/image/rootfs.tar /
COPY --from=build /out/manent-server /out/manent /out/manent-agent /out/manent-policy /usr/local/bin/
ENV HOME=/data MANENT_DATA_DIR=/data
USER 65532:65532
WORKDIR /data
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/manent-server"]
CMD ["serve", "--listen", "0.0.0.0:8080", "--data-dir", "/data"]
