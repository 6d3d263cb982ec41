# A static metahooks binary on an empty image, running as a non-root user.
FROM rust:1-alpine AS build
RUN apk add --no-cache musl-dev
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin metahooks \
 && cp target/release/metahooks /metahooks

FROM scratch
COPY --from=build /metahooks /metahooks
USER 65532:65532
EXPOSE 8080 8443
ENTRYPOINT ["/metahooks"]
CMD ["serve", "--listen=0.0.0.0:8080"]
