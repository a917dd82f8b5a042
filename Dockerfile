# RichPush: build with a Swift 6 image, run on slim Debian.
#   docker build -t richpush .
#   docker run -p 8080:8080 -v richpush-data:/data richpush
#   docker run --rm -i -v richpush-data:/data richpush users add alice --password-stdin <<< 'secret'

ARG SWIFT_IMAGE=swift:6.3-bookworm

FROM ${SWIFT_IMAGE} AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends libsqlite3-dev libpng-dev libjpeg-dev libgif-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Dependencies first, so that source edits do not re-resolve them.
COPY Package.swift ./
RUN swift package resolve
COPY Sources ./Sources
COPY Tests ./Tests
RUN swift build -c release --static-swift-stdlib --product richpush \
 && install -D "$(swift build -c release --static-swift-stdlib --show-bin-path)/richpush" /out/richpush

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libpng16-16 libjpeg62-turbo libgif7 libsqlite3-0 libstdc++6 zlib1g ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /app --shell /usr/sbin/nologin richpush \
 && mkdir -p /data /app \
 && chown richpush:richpush /data
WORKDIR /app
COPY --from=build /out/richpush /usr/local/bin/richpush
COPY media ./media
ENV RICHPUSH_DATA=/data
VOLUME /data
EXPOSE 8080
USER richpush
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
  CMD richpush healthcheck --url http://127.0.0.1:8080/health
ENTRYPOINT ["richpush"]
CMD ["serve", "--host", "0.0.0.0", "--data", "/data"]
