# manent image: the binaries (manent-server, manent and its siblings
# manent-agent and manent-policy), static, non-root, on distroless/static.
# Build: docker build -t ghcr.io/manent-io/manent:dev .
# goreleaser (.goreleaser.yaml) builds the same image from its own binaries
# with Dockerfile.goreleaser.
FROM golang:1.26.8-bookworm AS build
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/manent-io/manent/pkg/version.Version=${VERSION}" \
      -o /out/ ./cmd/...

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/manent-server /out/manent /out/manent-agent /out/manent-policy /usr/local/bin/
# 65532:65532 is distroless's nonroot user; /data is the SQLite data dir.
# /data belongs to the nonroot user, so the server can write its SQLite
# database there with no volume, and a named volume mounted there starts
# with that owner. distroless has no shell to mkdir and chown: the image's
# own (empty) /home/nonroot, owned by 65532, is copied as /data.
COPY --from=gcr.io/distroless/static-debian12:nonroot --chown=65532:65532 /home/nonroot /data
USER 65532:65532
WORKDIR /data
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/manent-server"]
CMD ["serve", "--listen", "0.0.0.0:8080", "--data-dir", "/data"]
