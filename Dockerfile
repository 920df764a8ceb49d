# Builds both programs of the ledger into one small image:
#   ledger     (write side, HTTP API, operator tool)
#   projector  (read side: JetStream -> PostgreSQL)
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ENV CGO_ENABLED=0
RUN go build -trimpath -ldflags="-s -w" -o /out/ledger ./cmd/ledger \
 && go build -trimpath -ldflags="-s -w" -o /out/projector ./cmd/projector

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ledger /out/projector /usr/local/bin/
USER nonroot:nonroot
EXPOSE 8080
CMD ["ledger", "serve"]
