# syntax=docker/dockerfile:1
# bigseg: a static binary on a distroless, non-root runtime image.
FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/server ./cmd/server

# distroless/static: no shell, no package manager, CA certificates for rediss://, user 65532.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/server /server
COPY examples /examples
USER nonroot:nonroot
ENV BIGSEG_ADDR=:8080
EXPOSE 8080
# The image has no curl: the binary checks itself (GET /livez on the port of BIGSEG_ADDR).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 CMD ["/server", "healthcheck"]
ENTRYPOINT ["/server"]
