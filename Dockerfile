# A static metahooks binary on an empty image, running as a non-root user. The binary is linked
# statically against glibc (scripts/image-binary.sh), not built for musl: musl's memcmp and
# malloc made the server answer at a quarter to a third of the rate (docs/BENCHMARKS.md, "The
# image's binary"). `make image-check` builds the same binary and runs it as this image does.
FROM rust:1-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN scripts/image-binary.sh /metahooks

FROM scratch
COPY --from=build /metahooks /metahooks
USER 65532:65532
EXPOSE 8080 8443
ENTRYPOINT ["/metahooks"]
CMD ["serve", "--listen=[::]:8080"]
